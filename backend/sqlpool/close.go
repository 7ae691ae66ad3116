package sqlpool

import (
	"context"
	"errors"
	"time"
)

// Close implements tether.Backend: new requests get unavailable, idle
// connections close at once, busy ones once their requests are answered or
// ctx is done, whichever comes first; then the driver's side connections.
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
		// Every post below fails at once if the loop has stopped: then
		// nothing is left to close on it.
		err := p.post(func() { p.closed = true; p.failQueue(p.closedErr()); p.closeIdle() })
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for err == nil {
			n := 0
			if err = p.post(func() { n = len(p.conns) }); err != nil || n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				p.post(func() {
					for c := range p.conns {
						if c.state == stateClosing {
							// Its socket is closed (and its number maybe
							// reused): only its termination is left, which
							// stops trying now (closeBegun).
							delete(p.conns, c)
							continue
						}
						p.drop(c, p.closedErr())
					}
				})
			case <-t.C:
				continue
			}
			break
		}
		p.drv.Close()
		p.stopOwnLoop()
	})
	return nil
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
		for len(p.idle) > 0 {
			p.drop(p.idle[len(p.idle)-1], errRetired)
		}
	})
}

func (p *Pool) closeIdle() {
	for len(p.idle) > 0 {
		p.drop(p.idle[len(p.idle)-1], p.closedErr())
	}
}
