package sqlpool

import "slices"

// AnswerOrder keeps a server connection's answers in the order its requests
// were sent while one of them runs again (a statement prepared afresh after
// a schema change, then retried): the pool takes a connection's answers in
// the order sent, and the retried request's answer now comes after those of
// the requests written behind it. The zero value holds nothing back.
// Loop goroutine only, like the connection that owns it.
type AnswerOrder struct {
	holding bool
	order   []*Request // sent and not answered, in the order sent
	early   []*Request // answered, waiting for one before them in order
}

// Hold starts holding answers back: first, to run again, then inflight (the
// requests written after it and not answered yet, in the order sent; nils
// and repeats are skipped). A Hold while holding changes nothing: first is
// in order already.
func (o *AnswerOrder) Hold(first *Request, inflight ...[]*Request) {
	if o.holding {
		return
	}
	o.holding = true
	o.order = append(o.order[:0], first)
	for _, rs := range inflight {
		for _, q := range rs {
			if q != nil && !slices.Contains(o.order, q) {
				o.order = append(o.order, q)
			}
		}
	}
}

// Holding reports whether answers are being held back.
func (o *AnswerOrder) Holding() bool { return o.holding }

// Sent notes r, sent on the connection; it matters only while holding.
func (o *AnswerOrder) Sent(r *Request) {
	if o.holding {
		o.order = append(o.order, r)
	}
}

// Finish hands r's answer to done: at once when nothing is held back, else
// once every request sent before it has been answered, with the answers it
// was holding back for r. It stops as soon as closed reports the
// connection closed (done may close it, or send more: Sent keeps those in
// order).
func (o *AnswerOrder) Finish(r *Request, closed func() bool, done func(*Request)) {
	if !o.holding {
		done(r)
		return
	}
	o.early = append(o.early, r)
	for !closed() && len(o.order) > 0 {
		i := slices.Index(o.early, o.order[0])
		if i < 0 {
			return
		}
		o.early = slices.Delete(o.early, i, i+1)
		q := o.order[0]
		o.order = slices.Delete(o.order, 0, 1)
		if len(o.order) == 0 {
			o.holding = false
		}
		done(q)
	}
}
