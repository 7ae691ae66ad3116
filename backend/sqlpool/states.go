package sqlpool

import ()

// state is where a server connection is in the pool's state machine.
type state uint8

const (
	stateIdle       state = iota // clean, waiting for work
	stateBusy                    // running requests
	statePinned                  // pinned to a transaction (with or without requests running)
	stateResetting               // running the pool's reset before it is reused
	stateCancelling              // a statement of it was given up: waiting for the server to stop it
	stateClosing                 // closed; waiting for the server to confirm the session is gone
	stateGone                    // no longer counted
)

var stateNames = [...]string{"idle", "busy", "pinned", "resetting", "cancelling", "closing", "gone"}

func (s state) String() string { return stateNames[s] }

func (p *Pool) removeIdle(c *Conn) {
	for i, x := range p.idle {
		if x == c {
			copy(p.idle[i:], p.idle[i+1:])
			p.idle[len(p.idle)-1] = nil
			p.idle = p.idle[:len(p.idle)-1]
			return
		}
	}
}
