package sqlpool

import (
	"errors"
	"runtime/debug"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/fault"
)

// Conn is the pool's side of one server connection.
type Conn struct {
	pool  *Pool
	srv   ServerConn
	state state // only move changes it
	slot  int   // c's index in pool.conns[state]
	// fd is srv's descriptor, polled by the loop while watched. It is
	// unwatched exactly once, before srv closes it (closeSocket): once
	// closed, its number may belong to another connection, of this pool or
	// of another on the same loop.
	fd      int
	watched bool
	sent    []*Request // sent to the server and not answered yet, oldest first
	// next is a request waiting for this connection's settings to be
	// applied before it is sent (KindApply in flight).
	next    *Request
	tx      *Tx
	profile *Profile // the settings the server session has now
	dirty   string   // why the session must be reset before reuse
	broken  error
	used    time.Time

	// Cancelling.
	cancelAt   time.Time
	cancelGen  int  // counts cancels, so that a late timer of an earlier one does nothing
	killing    bool // the driver's Cancel is running, or another is due (killAgain)
	killAgain  bool // the statement given up was still running after a Cancel: another is due
	kills      int  // Cancels sent in this cancel
	probes     int
	abortingTx bool // roll back the pinned transaction once the cancel is done
}

// drop closes a broken or unwanted connection: whatever was in flight on it
// fails with err. Its slot is freed at once: the socket is closed, so the
// server ends the session when it notices (a statement still running is
// cancelled first, by cancel, where it matters).
func (p *Pool) drop(c *Conn, err error) {
	if c.state == stateGone {
		return
	}
	prev := c.state
	if !p.move(c, stateGone) {
		return
	}
	if prev != stateClosing { // terminate closed it already
		p.closeSocket(c)
	}
	if prev != stateClosing {
		p.open--
	}
	sent := c.sent
	c.sent = nil
	for _, r := range sent {
		if !r.State.Abandoned {
			r.Err = p.lostErr(err)
		}
		p.finish(r)
	}
	if r := c.next; r != nil {
		c.next = nil
		r.Err = p.lostErr(err)
		p.finish(r)
	}
	if tx := c.tx; tx != nil {
		tx.Conn = nil
		tx.Ended = &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: p.name + ": the transaction's connection was lost: " + err.Error()}
		c.tx = nil
	}
	p.updateStats()
	if !p.closed {
		p.maybeDial()
	}
}

// closeSocket stops polling c's descriptor and closes it, once: after that
// its number may be another connection's.
func (p *Pool) closeSocket(c *Conn) {
	if c.watched {
		c.watched = false
		p.loop.Unwatch(c.fd)
	}
	c.srv.Close()
}

// panicked drops c after a panic in its protocol's code (where says which:
// conn_read, conn_send): its session is in an unknown state, so it is closed,
// never reused, and its slot freed; the requests in flight on it get an
// internal error, a transaction pinned to it is answered as rolled back. The
// panic is logged with its stack and counted (tether.RecoverPanic). Call it
// from the deferred function that recovered v.
func (p *Pool) panicked(c *Conn, where string, v any) {
	p.panickedStack(c, where, v, debug.Stack())
}

func (p *Pool) panickedStack(c *Conn, where string, v any, stack []byte) {
	e := tether.RecordPanic(p.log, p.label, where, v, stack)
	if c.state == stateGone {
		return
	}
	if c.broken == nil {
		c.broken = e
	}
	p.drop(c, e)
}

// OnReadable implements evloop.Watcher for the protocol's connection.
func (c *Conn) OnReadable() {
	if fault.Enabled() {
		detail := ""
		if len(c.sent) > 0 {
			detail = c.sent[0].SQL
		}
		fault.Inject(fault.SQLConnRead, detail+"\t"+c.srv.String())
	}
	c.srv.OnReadable()
}

// OnWritable implements evloop.Watcher for the protocol's connection.
func (c *Conn) OnWritable() { c.srv.OnWritable() }

// Recover implements evloop.Recoverer: a panic in the protocol's callbacks
// (reading the server's answer, decoding a value, a Flush) drops the
// connection (panicked).
func (c *Conn) Recover(v any, stack []byte) { c.pool.panickedStack(c, "conn_read", v, stack) }

// Unwrap implements evloop.Wrapper: the protocol's connection, whose Flush
// the loop calls.
func (c *Conn) Unwrap() any { return c.srv }

// lostErr is the error of a request whose connection broke under it: it may
// have run, so it is not safe to retry.
func (p *Pool) lostErr(err error) error {
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	return &tether.Error{Code: tether.CodeUnavailable, Err: tether.ErrUnavailable, Message: p.name + ": connection lost: " + err.Error()}
}

// InTx reports whether the connection is pinned to a transaction.
func (c *Conn) InTx() bool { return c.tx != nil }

// Profile returns the session settings the server connection has now.
func (c *Conn) Profile() *Profile { return c.profile }
