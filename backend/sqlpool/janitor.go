package sqlpool

import (
	"errors"
	"time"
)

// janitor closes connections idle past idle_timeout (down to min_conns) and
// dials back up to min_conns, so the first request after a quiet spell does
// not pay a connect.
func (p *Pool) janitor() {
	defer close(p.janitorDone)
	idle := time.Duration(p.cfg.IdleTimeout)
	period := time.Second
	if idle > 0 && idle/4 < period {
		period = max(idle/4, 10*time.Millisecond)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.janitorStop:
			return
		case <-t.C:
			p.loop.Post(func() {
				if p.closed {
					return
				}
				now := time.Now()
				for i := 0; idle > 0 && i < len(p.conns[stateIdle]) && p.open > p.cfg.MinConns; {
					c := p.conns[stateIdle][i]
					if now.Sub(c.used) >= idle {
						p.drop(c, errors.New("idle_timeout"))
						continue
					}
					i++
				}
				if p.open < p.cfg.MinConns && !p.retiring {
					p.dial()
				}
			})
		}
	}
}
