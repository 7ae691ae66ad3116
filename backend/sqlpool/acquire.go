package sqlpool

import (
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
)

// Submit runs r: on its transaction's connection, on an idle connection, or
// after the requests waiting before it. r.Done is called once, on the loop
// goroutine. Loop goroutine only.
func (p *Pool) Submit(r *Request) {
	r.State.Pool = p
	if p.closed {
		r.Err = p.closedErr()
		p.finish(r)
		return
	}
	if r.Tx != nil {
		p.runInTx(r)
		return
	}
	if c := p.takeIdle(r.Client); c != nil {
		c.run(r)
		return
	}
	if c := p.pipelineFor(r); c != nil {
		c.run(r)
		return
	}
	p.enqueue(r)
}

// takeIdle returns an idle connection, preferring the most recently used one
// whose settings are the client's already.
func (p *Pool) takeIdle(cl *Client) *Conn {
	idle := p.conns[stateIdle]
	if len(idle) == 0 {
		return nil
	}
	var want *Profile
	if cl != nil {
		want = cl.Profile
	}
	i := len(idle) - 1
	for j := i; j >= 0; j-- {
		if Equal(idle[j].profile, want) {
			i = j
			break
		}
	}
	c := idle[i]
	p.move(c, stateBusy)
	p.updateStats()
	return c
}

// pipelineFor returns a busy connection running requests of r's batch, the
// least loaded one, to write r after them.
func (p *Pool) pipelineFor(r *Request) *Conn {
	if r.Group == nil || r.Kind != KindQuery && r.Kind != KindExec {
		return nil
	}
	var best *Conn
	for _, c := range p.conns[stateBusy] {
		if len(c.sent) == 0 || !c.takesMore() {
			continue
		}
		if c.sent[len(c.sent)-1].Group != r.Group {
			continue
		}
		if best == nil || len(c.sent) < len(best.sent) {
			best = c
		}
	}
	return best
}

// takesMore reports whether c may have another request of a batch written
// behind those in flight: it applies no settings first, its session is
// clean and its pipeline is not full.
func (c *Conn) takesMore() bool {
	return c.next == nil && c.dirty == "" && len(c.sent) < maxPipeline
}

func (p *Pool) enqueue(r *Request) {
	r.State.Queued = time.Now()
	p.waiting.push(r)
	p.stWaits.Add(1)
	p.armTimer(r.State.Queued.Add(time.Duration(p.cfg.AcquireTimeout)))
	if !r.Deadline.IsZero() {
		p.armTimer(r.Deadline)
	}
	p.maybeDial()
}

// pipelineSiblings writes after r, just handed c from the queue, the
// requests of r's batch that wait behind it, up to maxPipeline in flight:
// a batch that found every connection busy costs one round trip once it has
// one, not one per statement (each would otherwise wait for its own turn in
// the queue). As pipelineFor, only while c applies no settings first and is
// clean (takesMore).
func (p *Pool) pipelineSiblings(c *Conn, r *Request) {
	if r.Group == nil || r.Kind != KindQuery && r.Kind != KindExec {
		return
	}
	for c.broken == nil && c.takesMore() {
		s := p.waiting.popSibling(r)
		if s == nil {
			return
		}
		if err := p.tooLate(s); err != nil {
			s.Err = err
			p.finish(s)
			continue
		}
		p.send(c, s)
	}
}

// failQueue answers every waiting request with err.
func (p *Pool) failQueue(err error) {
	for _, r := range p.waiting.clear() {
		if !r.State.Abandoned {
			r.Err = err
			p.finish(r)
		}
	}
}

// release decides where a connection goes once it has nothing in flight.
func (p *Pool) release(c *Conn) {
	if c.broken != nil {
		p.drop(c, c.broken)
		return
	}
	if len(c.sent) > 0 || c.next != nil || c.state == stateCancelling || c.state == stateClosing {
		return
	}
	if p.closed && c.tx == nil {
		p.drop(c, p.closedErr())
		return
	}
	if c.tx != nil {
		if c.abortingTx {
			c.abortingTx = false
			p.move(c, statePinned)
			p.send(c, &Request{Kind: KindRollback, Tx: c.tx, Done: func(*Request) {}})
			return
		}
		p.move(c, statePinned)
		p.updateStats()
		return
	}
	if c.dirty != "" {
		p.move(c, stateResetting)
		p.stResets.Add(1)
		why := c.dirty
		p.send(c, &Request{Kind: KindReset, Done: func(r *Request) {
			if r.Err != nil {
				p.log.Warn("reset failed; closing the connection", "backend", p.name, "conn", c.srv.String(), "reason", why, "err", r.Err)
				c.broken = r.Err
				return
			}
			c.dirty = ""
			c.profile = nil
		}})
		return
	}
	c.used = time.Now()
	// Hand it to the next waiting client, if any; else it goes idle.
	for r := p.waiting.pop(); r != nil; r = p.waiting.pop() {
		if err := p.tooLate(r); err != nil {
			r.Err = err
			p.finish(r)
			continue
		}
		p.move(c, stateBusy)
		c.run(r)
		p.pipelineSiblings(c, r)
		p.updateStats()
		return
	}
	if p.retiring {
		p.drop(c, errRetired)
		return
	}
	p.move(c, stateIdle)
	p.updateStats()
}

// run starts r on c, first applying r's client's settings when c's differ.
func (c *Conn) run(r *Request) {
	p := c.pool
	r.State.Conn = c
	if r.Kind == KindBegin {
		c.tx = &Tx{Conn: c, Client: r.Client, Pool: p}
		p.move(c, statePinned)
	}
	var want *Profile
	if r.Client != nil {
		want = r.Client.Profile
	}
	if r.Tx == nil && !Equal(c.profile, want) {
		// Not pipelined: the statement must not run if the settings could
		// not be applied.
		c.next = r
		p.send(c, &Request{Kind: KindApply, Profile: want, Done: func(ar *Request) {
			c.next = nil
			if ar.Err != nil {
				c.dirty = "settings not applied"
				if !r.State.Abandoned {
					r.Err = fmt.Errorf("%s: apply the client's session settings: %w", p.name, ar.Err)
					p.finish(r)
				}
				if r.Kind == KindBegin {
					c.tx = nil
				}
				return
			}
			c.profile = want
			if r.State.Abandoned {
				if r.Kind == KindBegin {
					c.tx = nil
				}
				return
			}
			p.send(c, r)
		}})
		return
	}
	p.send(c, r)
}

// send writes r on c and arms the deadline timer for it.
func (p *Pool) send(c *Conn, r *Request) {
	r.State.Conn = c
	if p.waiting.len() > 0 && (r.Kind == KindQuery || r.Kind == KindExec) {
		r.State.Sent = time.Now()
	}
	c.sent = append(c.sent, r)
	if !r.Deadline.IsZero() {
		p.armTimer(r.Deadline)
	}
	// A panic in the protocol's Send leaves the connection's stream in an
	// unknown state: it is dropped, and r, in c.sent now, answered internal.
	defer func() {
		if v := recover(); v != nil {
			p.panicked(c, "conn_send", v)
		}
	}()
	c.srv.Send(r)
}

// runInTx runs a statement, commit or rollback on its transaction's connection.
func (p *Pool) runInTx(r *Request) {
	tx := r.Tx
	c, _ := tx.Conn.(*Conn)
	if c == nil {
		r.Err = tx.Ended
		if r.Err == nil {
			r.Err = fmt.Errorf("%s: %w", p.name, tether.ErrTxDone)
		}
		p.finish(r)
		return
	}
	if c.state == stateCancelling || c.abortingTx {
		r.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: p.name + ": the transaction is being rolled back"}
		p.finish(r)
		return
	}
	p.send(c, r)
}

func (p *Pool) busyErr() error {
	return &tether.Error{Code: tether.CodeBusy, Retry: true, Err: tether.ErrBusy,
		Message: fmt.Sprintf("%s: all %d connections busy for %s (acquire_timeout)", p.name, p.cfg.MaxConns, p.cfg.AcquireTimeout)}
}
