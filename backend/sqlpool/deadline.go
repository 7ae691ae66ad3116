package sqlpool

import (
	"context"
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
)

// armTimer makes sure the sweep runs at or before at.
func (p *Pool) armTimer(at time.Time) {
	if !p.timerAt.IsZero() && !at.Before(p.timerAt) {
		return
	}
	p.timerAt = at
	d := time.Until(at)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, func() { p.loop.Post(p.sweep) })
		return
	}
	p.timer.Reset(d)
}

// sweep answers the requests whose wait or deadline passed, cancels the
// statements whose deadline passed, and terminates connections whose cancel
// did not take. It re-arms the timer for the next deadline.
func (p *Pool) sweep() {
	p.timerAt = time.Time{}
	now := time.Now()
	var next time.Time
	later := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	acquire := time.Duration(p.cfg.AcquireTimeout)
	p.waiting.each(func(r *Request) {
		if r.State.Finished {
			return
		}
		switch {
		case !r.Deadline.IsZero() && !now.Before(r.Deadline):
			p.Abandon(r, p.timeoutErr(false))
		case now.Sub(r.State.Queued) >= acquire:
			p.Abandon(r, p.busyErr())
		default:
			later(r.State.Queued.Add(acquire))
			later(r.Deadline)
		}
	})
	all := p.liveConns()
	defer p.doneWith(all)
	for _, c := range all {
		if c.state == stateCancelling {
			if now.Sub(c.cancelAt) >= p.cancelTimeout {
				p.terminate(c, fmt.Sprintf("a cancelled statement did not stop within %s", p.cancelTimeout))
				continue
			}
			later(c.cancelAt.Add(p.cancelTimeout))
		}
		for _, r := range c.sent {
			if r.State.Finished || r.Deadline.IsZero() {
				continue
			}
			if !now.Before(r.Deadline) {
				p.Abandon(r, p.timeoutErr(true))
				if c.tx != nil {
					// A transaction whose statement was cancelled cannot be
					// trusted to go on (PostgreSQL aborts it anyway).
					p.AbortTx(c.tx, "a statement of it passed its deadline")
				}
			} else {
				later(r.Deadline)
			}
		}
		if r := c.next; r != nil && !r.State.Finished && !r.Deadline.IsZero() {
			if !now.Before(r.Deadline) {
				p.Abandon(r, p.timeoutErr(false))
			} else {
				later(r.Deadline)
			}
		}
	}
	if !next.IsZero() {
		p.armTimer(next)
	}
}

func (p *Pool) timeoutErr(sent bool) error {
	if sent {
		return &tether.Error{Code: tether.CodeTimeout, Err: context.DeadlineExceeded,
			Message: p.name + ": deadline exceeded; the statement may or may not have run (tetherd cancelled it on the server)"}
	}
	return &tether.Error{Code: tether.CodeTimeout, Retry: true, Err: context.DeadlineExceeded,
		Message: p.name + ": deadline exceeded while waiting for a connection; the statement did not run"}
}
