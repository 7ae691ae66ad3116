package sqlpool

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// state is where a server connection is in the pool's state machine. A
// connection is in exactly one state, and in the pool's list of that state
// (Pool.conns); only move changes it.
type state uint8

const (
	stateNew        state = iota // adopted after its dial, not placed yet (the zero value)
	stateIdle                    // clean, waiting for work
	stateBusy                    // running requests
	statePinned                  // pinned to a transaction (with or without requests running)
	stateResetting               // running the pool's reset before it is reused
	stateCancelling              // a statement of it was given up: waiting for the server to stop it
	stateClosing                 // closed; waiting for the server to confirm the session is gone
	stateGone                    // no longer counted
	numStates
)

var stateNames = [numStates]string{"new", "idle", "busy", "pinned", "resetting", "cancelling", "closing", "gone"}

func (s state) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// legalMoves is the pool's state table: legalMoves[from][to] reports whether
// a connection may move from one state to the other. The diagram, one edge a
// line with what makes the move (TestFakeStates_DiagramMatchesTable checks
// it against the table, both ways):
//
//	new        ──► busy        adopted after its dial; release places it next (adopt)
//	idle       ──► busy        taken for a request (takeIdle)
//	idle       ──► gone        idle_timeout, the pool retired or closed (drop)
//	busy       ──► idle        answered, clean, nobody waiting (release)
//	busy       ──► pinned      BEGIN run on it (run)
//	busy       ──► resetting   answered, the session left dirty (release)
//	busy       ──► cancelling  the statement it runs was given up (cancel)
//	busy       ──► gone        broken, panicked, retired, closed (drop)
//	pinned     ──► idle        transaction over, clean, nobody waiting (release)
//	pinned     ──► busy        transaction over, clean, a request waiting (release)
//	pinned     ──► resetting   transaction over, the session dirty (release)
//	pinned     ──► cancelling  a statement of the transaction was given up (cancel)
//	pinned     ──► gone        broken, panicked, closed (drop)
//	resetting  ──► idle        reset done, nobody waiting (release)
//	resetting  ──► busy        reset done, a request waiting (release)
//	resetting  ──► gone        the reset failed, broken, closed (drop)
//	cancelling ──► busy        given-up statement answered, cancel taken, probe ok (afterCancel)
//	cancelling ──► pinned      the same in a transaction: its rollback follows (afterCancel)
//	cancelling ──► closing     cancel_timeout passed, or the probes kept failing (terminate)
//	cancelling ──► gone        broken, panicked, closed (drop)
//	closing    ──► gone        the server confirmed the session gone, or Close's deadline passed
//
// Every state but new and gone counts against max_conns (Pool.open counts
// dialing ones too), closing and cancelling included: a connection whose
// statement is being cancelled is still a server session, and so is one
// closed until the server says it has let it go. So the sessions tetherd
// holds never exceed max_conns (plus a driver's documented side connection
// for cancels), whatever clients do.
var legalMoves = func() (t [numStates][numStates]bool) {
	for _, e := range []struct{ from, to state }{
		{stateNew, stateBusy},
		{stateIdle, stateBusy}, {stateIdle, stateGone},
		{stateBusy, stateIdle}, {stateBusy, statePinned}, {stateBusy, stateResetting}, {stateBusy, stateCancelling}, {stateBusy, stateGone},
		{statePinned, stateIdle}, {statePinned, stateBusy}, {statePinned, stateResetting}, {statePinned, stateCancelling}, {statePinned, stateGone},
		{stateResetting, stateIdle}, {stateResetting, stateBusy}, {stateResetting, stateGone},
		{stateCancelling, stateBusy}, {stateCancelling, statePinned}, {stateCancelling, stateClosing}, {stateCancelling, stateGone},
		{stateClosing, stateGone},
	} {
		t[e.from][e.to] = true
	}
	return t
}()

// panicOnIllegalMove makes an illegal move panic instead of being refused and
// logged: the package's own tests set it, so that a move the table forbids
// fails the test that made it.
var panicOnIllegalMove atomic.Bool

// move moves c to state to, keeping the per-state lists (Pool.conns) and the
// count of live connections in step, in O(1) without allocating once the
// lists have grown (leaving idle shifts the connections used after c, to keep
// idle in the order of use; takeIdle mostly takes the last). A move to the
// state c is in already changes nothing and reports true.
//
// A move the table does not allow is a bug of the pool's, not a condition of
// the server's: move refuses it (c stays where it was), logs it with its
// stack, counts it (Pool.stIllegalMoves) and reports false; under the
// package's tests it panics (panicOnIllegalMove). It does not panic in the
// daemon: move runs on the event loop goroutine, mostly inside posted
// functions and the protocol's callbacks, where a panic is recovered but
// leaves the pool's bookkeeping half done (a slot never freed, a request
// never answered), for every client of the loop and not only the one
// request; a refused move leaves the connection in a state the pool knows
// how to get out of (a close, a timeout) and the lists consistent with it.
func (p *Pool) move(c *Conn, to state) bool {
	from := c.state
	if from == to {
		return true
	}
	if !legalMoves[from][to] {
		p.illegalMove(c, from, to)
		return false
	}
	switch from {
	case stateNew:
		p.live++
	case stateIdle:
		// Keep idle in the order of use: shift the ones after c down.
		l := p.conns[stateIdle]
		for i := c.slot + 1; i < len(l); i++ {
			l[i-1] = l[i]
			l[i-1].slot = i - 1
		}
		l[len(l)-1] = nil
		p.conns[stateIdle] = l[:len(l)-1]
	default:
		l := p.conns[from]
		last := l[len(l)-1]
		l[c.slot], last.slot = last, c.slot
		l[len(l)-1] = nil
		p.conns[from] = l[:len(l)-1]
	}
	c.state = to
	if to == stateGone {
		c.slot = -1
		p.live--
		p.checkDrained()
		return true
	}
	c.slot = len(p.conns[to])
	p.conns[to] = append(p.conns[to], c)
	return true
}

func (p *Pool) illegalMove(c *Conn, from, to state) {
	p.stIllegalMoves.Add(1)
	name := "a connection"
	if c.srv != nil {
		name = c.srv.String()
	}
	msg := fmt.Sprintf("sqlpool: illegal move of %s from %s to %s", name, from, to)
	if panicOnIllegalMove.Load() {
		panic(msg)
	}
	p.log.Error(msg+": refused (a bug of the pool's; the connection stays where it was)", "backend", p.label, "stack", string(debug.Stack()))
}

// liveConns returns every connection with a server session (any state but
// new and gone), for the loops over all of them (the sweep, a client gone,
// Close): they may move connections while they go. The slice is the pool's
// scratch, taken out of it meanwhile so that a nested call gets its own;
// give it back with doneWith.
func (p *Pool) liveConns() []*Conn {
	all := p.scratch[:0]
	p.scratch = nil
	for s := stateIdle; s < stateGone; s++ {
		all = append(all, p.conns[s]...)
	}
	return all
}

func (p *Pool) doneWith(all []*Conn) {
	clear(all)
	p.scratch = all[:0]
}

// checkDrained tells Close, once, that a closed pool holds no connection.
func (p *Pool) checkDrained() {
	if p.closed && p.live == 0 && !p.drainSignalled {
		p.drainSignalled = true
		close(p.drained)
	}
}
