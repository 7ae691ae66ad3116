package sqlpool

import (
	"context"
	"errors"
)

// Close implements tether.Backend: new requests get unavailable, idle
// connections close at once, busy ones once their requests are answered or
// ctx is done, whichever comes first; then the driver's side connections.
// It waits for the pool to drain (the last connection's move to gone
// signals it, checkDrained), not by polling; past ctx's deadline it drops
// what is left and forgets the connections still being terminated.
func (p *Pool) Close(ctx context.Context) error {
	if p.loop == nil {
		return nil
	}
	p.closeOnce.Do(func() {
		close(p.closeBegun)
		if p.janitorStop != nil {
			close(p.janitorStop)
			<-p.janitorDone
		}
		// A post fails at once if the loop has stopped: then nothing is
		// left to close on it.
		err := p.post(func() { p.closed = true; p.failQueue(p.closedErr()); p.closeIdle(); p.checkDrained() })
		if err == nil {
			select {
			case <-p.drained:
			case <-p.loop.Done():
			case <-ctx.Done():
				p.post(p.closeNow)
			}
		}
		p.drv.Close()
		p.stopOwnLoop()
	})
	return nil
}

// closeNow ends a Close whose deadline passed: every connection is dropped,
// and those being terminated are forgotten.
func (p *Pool) closeNow() {
	all := p.liveConns()
	defer p.doneWith(all)
	for _, c := range all {
		if c.state == stateClosing {
			// Its socket is closed (and its number maybe reused): only its
			// termination is left, which stops trying now (closeBegun).
			p.move(c, stateGone)
			continue
		}
		p.drop(c, p.closedErr())
	}
}

// errRetired is why a retiring pool closes a connection it no longer needs.
var errRetired = errors.New("pool retired by a reload")

// Retire implements tether.Retirer: a reload replaced the pool. It goes on
// serving the requests and transactions it was given, but closes its idle
// connections now and every other one as soon as nothing waits for it, so
// that the pools a burst of reloads leaves draining hold no more server
// connections than their requests in flight. Safe from any goroutine.
func (p *Pool) Retire() {
	if p.loop == nil {
		return
	}
	p.loop.Post(func() {
		p.retiring = true
		for idle := p.conns[stateIdle]; len(idle) > 0; idle = p.conns[stateIdle] {
			p.drop(idle[len(idle)-1], errRetired)
		}
	})
}

// DrainIdle closes the pool's idle connections now; busy ones finish what
// they run and return as usual, and new ones are dialled when needed (the
// janitor tops min_conns up). A router calls it on the host writes moved
// away from: sessions to a server that stopped being the primary end, and
// the next connections resolve its name afresh (one writer hostname whose
// address moved). Loop goroutine.
func (p *Pool) DrainIdle() {
	if !p.closed {
		p.closeIdle()
	}
}

func (p *Pool) closeIdle() {
	for idle := p.conns[stateIdle]; len(idle) > 0; idle = p.conns[stateIdle] {
		p.drop(idle[len(idle)-1], p.closedErr())
	}
}
