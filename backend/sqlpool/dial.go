package sqlpool

import (
	"context"
	"time"
)

// maybeDial dials one more connection when requests wait and max_conns allows.
func (p *Pool) maybeDial() {
	waiting := 0
	p.waiting.each(func(r *Request) {
		if !r.State.Abandoned {
			waiting++
		}
	})
	if waiting <= p.dialing || p.open >= p.cfg.MaxConns || p.closed {
		return
	}
	p.dial()
}

func (p *Pool) dial() {
	p.open++
	p.dialing++
	p.stDials.Add(1)
	p.updateStats()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.cfg.ConnectTimeout))
		s, err := p.drv.Dial(ctx)
		cancel()
		if p.loop.Post(func() { p.dialed(s, err) }) != nil && s != nil {
			s.Close() // the loop has stopped: nobody will use it
		}
	}()
}

func (p *Pool) dialed(s ServerConn, err error) {
	p.dialing--
	if err != nil {
		p.stDialErrors.Add(1)
		p.open--
		p.updateStats()
		p.lastDial = err
		if now := time.Now(); now.Sub(p.dialLoggedAt) >= dialLogEvery {
			p.log.Warn("connect failed", "backend", p.name, "err", err, "failures_not_logged", p.dialUnlogged)
			p.dialLoggedAt, p.dialUnlogged = now, 0
		} else {
			p.dialUnlogged++
		}
		if p.open == 0 {
			// Nothing else will serve the waiting requests.
			p.failQueue(p.unavailable(err))
		}
		return
	}
	if p.closed {
		s.Close()
		p.open--
		p.updateStats()
		return
	}
	p.adopt(s)
}

// adopt takes a freshly dialled connection into the pool as idle. Its slot
// (p.open) is counted already.
func (p *Pool) adopt(s ServerConn) {
	c := &Conn{pool: p, srv: s, used: time.Now(), fd: s.Fd()}
	if err := p.loop.Watch(c.fd, c); err != nil {
		s.Close()
		p.open--
		p.updateStats()
		p.log.Error("watch connection", "backend", p.name, "err", err)
		return
	}
	c.watched = true
	p.move(c, stateBusy)
	s.Attach(c)
	p.release(c)
}
