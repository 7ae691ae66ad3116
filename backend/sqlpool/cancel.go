package sqlpool

import (
	"context"
	"errors"
	"time"

	tether "github.com/tether-php/tether"
)

// Abandon answers r with err now, if it has not been answered; a statement of
// it still running on the server is cancelled there. Loop goroutine only.
func (p *Pool) Abandon(r *Request, err error) {
	if r.State.Finished {
		return
	}
	r.State.Abandoned = true
	r.Err = err
	// The caller may reuse its sink once answered: whatever still arrives
	// for r goes nowhere.
	if r.Sink != nil {
		r.Sink = discard{}
	}
	p.finish(r)
	c, _ := r.State.Conn.(*Conn)
	if c == nil || c.state == stateGone {
		return // it was waiting in the queue, which skips it
	}
	if c.next == r {
		return // its settings are being applied; it will not be sent
	}
	if len(c.sent) > 0 && c.sent[0] == r {
		p.cancel(c)
	}
	// Otherwise it waits behind others on c, and is cancelled if it is
	// still there when they are answered (Done).
}

// cancel starts cancelling the statement c runs now.
func (p *Pool) cancel(c *Conn) {
	if c.state == stateCancelling || c.state == stateClosing || c.state == stateGone {
		return
	}
	if !p.move(c, stateCancelling) {
		return
	}
	p.stCancels.Add(1)
	c.cancelAt = time.Now()
	c.cancelGen++
	c.kills = 0
	c.probes = 0
	p.armTimer(c.cancelAt.Add(p.cancelTimeout))
	p.kill(c)
}

// Pauses between the tries of a termination the server has not confirmed
// (Pool.firstTerminatePause is the first, but in tests). They space retries
// of a call that failed; nothing in the pool polls for a state: the pool
// learns of an answer, a Cancel or a Terminate back, by an event.
const (
	firstTerminatePause = 100 * time.Millisecond
	maxTerminatePause   = 5 * time.Second
)

// Pauses between the Cancels of one cancel: the first soon, then less often.
const (
	firstKillPause = 10 * time.Millisecond
	maxKillPause   = 200 * time.Millisecond
)

// kill sends the driver's Cancel for the statement c runs now. Once it is
// done, if the statement given up is still unanswered, another follows after
// a pause, until it is answered or cancel_timeout terminates the connection:
// a cancel that reaches the server before the statement has begun is dropped
// (MySQL's KILL QUERY and PostgreSQL's CancelRequest both only stop a
// statement that is running; a statement pipelined behind the first, or
// sent just as its predecessor ended, may not have begun), and each
// statement given up behind the first needs one of its own. A Cancel that
// arrives once nothing runs is absorbed by the probe (afterCancel).
func (p *Pool) kill(c *Conn) {
	c.killing, c.killAgain = true, false
	c.kills++
	srv, gen := c.srv, c.cancelGen
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cancelTimeout)
		err := p.drv.Cancel(ctx, srv)
		cancel()
		p.loop.Post(func() {
			if err != nil {
				p.log.Warn("cancel failed", "backend", p.name, "conn", srv.String(), "err", err)
			}
			if c.state != stateCancelling || c.cancelGen != gen {
				c.killing = false
				return
			}
			if !c.givenUpRuns() {
				c.killing = false
				p.afterCancel(c)
				return
			}
			c.killAgain = true
			pause := min(firstKillPause<<(c.kills-1), maxKillPause)
			time.AfterFunc(pause, func() {
				p.loop.Post(func() {
					if !c.killAgain || c.state != stateCancelling || c.cancelGen != gen {
						return // answered meanwhile (Done), or over
					}
					if c.givenUpRuns() {
						p.kill(c)
						return
					}
					c.killing, c.killAgain = false, false
					p.afterCancel(c)
				})
			})
		})
	}()
}

// givenUpRuns reports whether the statement c runs now, as far as tetherd
// knows, is one that was given up.
func (c *Conn) givenUpRuns() bool {
	return len(c.sent) > 0 && c.sent[0].State.Abandoned
}

// afterCancel moves a cancelling connection on once the server has both
// answered what was given up and taken the cancel: a probe absorbs a cancel
// that arrived after the statement ended.
func (p *Pool) afterCancel(c *Conn) {
	if c.killing || len(c.sent) > 0 || c.next != nil {
		return
	}
	if c.tx != nil {
		// A transaction whose statement was cancelled is rolled back: its
		// ROLLBACK stands in for the probe (a late cancel cannot harm it,
		// and a failed one sends the connection through a reset).
		c.abortingTx = true
		p.move(c, statePinned)
		p.release(c)
		return
	}
	if c.probes >= maxProbes {
		p.terminate(c, "probes after a cancel kept failing")
		return
	}
	c.probes++
	p.send(c, &Request{Kind: KindProbe, Done: func(r *Request) {
		if r.Err != nil {
			return // Done calls afterCancel again: another probe
		}
		to := stateBusy
		if c.tx != nil && c.abortingTx {
			to = statePinned
		}
		p.move(c, to)
	}})
}

// terminate closes a connection whose session the server must end for good,
// and frees its slot only when the driver confirms the session is gone.
func (p *Pool) terminate(c *Conn, why string) {
	if c.state == stateClosing || c.state == stateGone {
		return
	}
	if !p.move(c, stateClosing) {
		// Only a cancelling connection is terminated (the table): close
		// any other at once rather than leave it in use.
		p.drop(c, errors.New(why))
		return
	}
	p.log.Warn("terminating connection", "backend", p.name, "conn", c.srv.String(), "why", why)
	srv := c.srv
	p.closeSocket(c)
	sent := c.sent
	c.sent = nil
	for _, r := range sent {
		if !r.State.Abandoned {
			r.Err = p.lostErr(errors.New(why))
		}
		p.finish(r)
	}
	if tx := c.tx; tx != nil {
		tx.Conn = nil
		tx.Ended = &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: p.name + ": the transaction was rolled back: " + why}
		c.tx = nil
	}
	go func() {
		// The slot stays taken until the server confirms: tried again, less
		// and less often, while the confirmation fails (the side connection
		// busy with slow KILLs for longer than a try's deadline, the server
		// unreachable), until the pool closes.
		pause := p.firstTerminatePause
		var err error
	tries:
		for {
			ctx, cancel := context.WithTimeout(context.Background(), p.cancelTimeout)
			err = p.drv.Terminate(ctx, srv)
			cancel()
			if err == nil {
				break
			}
			p.log.Warn("terminate session: not confirmed yet; its slot stays taken", "backend", p.name, "conn", srv.String(), "err", err, "next_try_in", pause)
			select {
			case <-time.After(pause):
				pause = min(2*pause, maxTerminatePause)
			case <-p.closeBegun:
				break tries
			}
		}
		p.loop.Post(func() {
			if err != nil {
				p.log.Error("terminate session", "backend", p.name, "conn", srv.String(), "err", err)
			}
			p.move(c, stateGone) // unless Close's deadline forgot it already
			p.open--
			p.updateStats()
			if !p.closed {
				p.maybeDial()
			}
		})
	}()
	p.updateStats()
}

// CancelClient gives up every request of a client that went away: waiting
// ones are dropped, running ones cancelled on the server. Its transactions
// are the caller's to abort (AbortTx). Loop goroutine only.
func (p *Pool) CancelClient(cl *Client, err error) {
	for _, r := range p.waiting.of(cl) {
		if !r.State.Finished {
			p.Abandon(r, err)
		}
	}
	all := p.liveConns()
	defer p.doneWith(all)
	for _, c := range all {
		if r := c.next; r != nil && r.Client == cl {
			p.Abandon(r, err)
		}
		for _, r := range c.sent {
			if r.Client == cl && !r.State.Finished {
				p.Abandon(r, err)
			}
		}
	}
}

// AbortTx rolls tx back on the pool's initiative (its client went away, it
// idled too long, tetherd shuts down): a statement of it still running is
// cancelled on the server first. Loop goroutine only.
func (p *Pool) AbortTx(tx *Tx, why string) {
	c, _ := tx.Conn.(*Conn)
	if c == nil {
		return
	}
	aborted := &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: "transaction was rolled back: " + why}
	tx.Ended = aborted
	c.abortingTx = true
	for _, r := range c.sent {
		if !r.State.Finished && r.Kind != KindRollback && r.Kind != KindCommit {
			p.Abandon(r, aborted)
		}
	}
	if len(c.sent) == 0 && c.state != stateCancelling {
		p.release(c)
	}
}
