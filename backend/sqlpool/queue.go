package sqlpool

// waitQueue holds the requests waiting for a connection, one line per
// client, and serves the clients in turn: a client that floods the pool waits
// behind its own requests, not in front of everyone else's. Requests of no
// client (Go callers) share one line. Loop goroutine only.
type waitQueue struct {
	lines map[*Client]*waitLine
	turn  []*waitLine // lines with requests, in the order they are served
	next  int         // index in turn of the next line to serve
	n     int         // requests held, given-up ones included until popped
}

type waitLine struct {
	client *Client
	reqs   []*Request
}

func (q *waitQueue) len() int { return q.n }

// push adds r at the end of its client's line.
func (q *waitQueue) push(r *Request) {
	if q.lines == nil {
		q.lines = map[*Client]*waitLine{}
	}
	l := q.lines[r.Client]
	if l == nil {
		l = &waitLine{client: r.Client}
		q.lines[r.Client] = l
		q.turn = append(q.turn, l)
	}
	l.reqs = append(l.reqs, r)
	q.n++
}

// pop removes and returns the first request of the next client's line that
// is still wanted (given-up ones are dropped on the way), or nil.
func (q *waitQueue) pop() *Request {
	for len(q.turn) > 0 {
		if q.next >= len(q.turn) {
			q.next = 0
		}
		l := q.turn[q.next]
		r := l.reqs[0]
		n := copy(l.reqs, l.reqs[1:])
		l.reqs[n] = nil
		l.reqs = l.reqs[:n]
		q.n--
		if n == 0 {
			q.drop(q.next) // the next line moves into this index
		} else {
			q.next++
		}
		if !r.State.Abandoned {
			return r
		}
	}
	return nil
}

// popSibling removes and returns the next request of r's client's line when
// it belongs to r's batch (Group) and can be pipelined (a query or exec),
// dropping given-up ones on the way; nil otherwise. r was popped from that
// line: a batch's requests wait in it one after the other.
func (q *waitQueue) popSibling(r *Request) *Request {
	l := q.lines[r.Client]
	for l != nil && len(l.reqs) > 0 {
		s := l.reqs[0]
		if s.Group != r.Group || s.Kind != KindQuery && s.Kind != KindExec {
			return nil
		}
		n := copy(l.reqs, l.reqs[1:])
		l.reqs[n] = nil
		l.reqs = l.reqs[:n]
		q.n--
		if n == 0 {
			for i, t := range q.turn {
				if t == l {
					q.drop(i)
					if i < q.next {
						q.next--
					}
					break
				}
			}
			l = nil
		}
		if !s.State.Abandoned {
			return s
		}
	}
	return nil
}

// drop removes the line at index i of turn.
func (q *waitQueue) drop(i int) {
	l := q.turn[i]
	delete(q.lines, l.client)
	copy(q.turn[i:], q.turn[i+1:])
	q.turn[len(q.turn)-1] = nil
	q.turn = q.turn[:len(q.turn)-1]
}

// each calls fn for every request held, in no particular order; fn may
// abandon them (pop drops them later), not push.
func (q *waitQueue) each(fn func(*Request)) {
	for _, l := range q.turn {
		for _, r := range l.reqs {
			fn(r)
		}
	}
}

// of returns the requests of one client.
func (q *waitQueue) of(c *Client) []*Request {
	if l := q.lines[c]; l != nil {
		return l.reqs
	}
	return nil
}

// clear removes and returns every request held.
func (q *waitQueue) clear() []*Request {
	var all []*Request
	q.each(func(r *Request) { all = append(all, r) })
	*q = waitQueue{}
	return all
}
