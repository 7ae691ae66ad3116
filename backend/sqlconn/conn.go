// Package sqlconn holds what a loop-driven SQL server connection does the
// same whatever its protocol: the socket (output written as the socket takes
// it, input read into a buffer that grows to the largest message), the
// requests waiting to be written, the answers awaited in order, and the
// cache of prepared statements. backend/mysql and backend/postgres each
// embed a Conn in their sqlpool.ServerConn and keep only their protocol:
// framing, encoding, decoding and their state machines. It stands below
// them and above backend/sqlpool and internal/evloop.
package sqlconn

import (
	"crypto/tls"
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
)

const (
	readChunk   = 16 << 10
	keepBufSize = 1 << 20 // larger buffers are dropped once empty
)

// Await is the part of an awaited answer that Conn reads; a protocol's own
// entry type embeds it and adds what it decodes by.
type Await struct {
	R    *sqlpool.Request // the request it belongs to; nil for an answer of tetherd's own
	Last bool             // the request is complete with this answer
	// Local: no message comes for it; the request is answered by tetherd,
	// with Err, once it is its turn (DrainLocal).
	Local bool
	Err   error
}

// Entry is a pointer to a protocol's entry type E, which embeds Await. The
// zero E must be an answer tetherd gives itself (Local).
type Entry[E any] interface {
	*E
	Head() *Await
}

// Protocol is what Conn calls back: the protocol's ServerConn, which embeds
// the Conn.
type Protocol interface {
	// Flush is Conn.Flush (promoted): the loop flushes the ServerConn, so
	// that a panic there reaches the pool's Recover (evloop.Wrapper).
	evloop.Flusher
	// WriteRequest encodes r's commands into Out and appends the answers
	// they get to Exp (a prepare first counting in Blocked, a request
	// tetherd answers itself with Local).
	WriteRequest(r *sqlpool.Request)
	// Parse handles every whole message read: it takes each with Peek and
	// Take, while the connection is not Closed.
	Parse()
}

// Conn is the protocol-free half of one loop-driven server connection. Its
// protocol embeds it in the sqlpool.ServerConn it implements; E is the
// protocol's awaited-answer type. Loop goroutine only, once dialled.
//
// The protocol's life with it:
//  1. Adopt the non-blocking socket once dialled (AdoptTLS a TLS session
//     over a Socket, tls.go); Start it from Attach.
//  2. Send (sqlpool.ServerConn's, promoted) queues the request and writes
//     it unless a prepare is in flight (Blocked): Protocol.WriteRequest
//     encodes it into Out and appends its answers to Exp. Once a prepare
//     is answered, WritePending writes the requests that waited for it.
//  3. OnReadable (evloop.Watcher's, promoted) reads what the socket has and
//     calls Protocol.Parse after each read, which takes each whole message
//     with Peek and Take and decodes it as part of Exp[0]'s answer, Pops an
//     answer once complete and Finishes its request on its last answer.
//  4. Close: CloseSocket with the protocol's goodbye.
//
// Output is flushed at the end of the loop's turn (Loop.FlushLater), and
// what the socket does not take then when it turns writable. A read or write
// error, or the server's end of the stream, fails the connection to the pool
// (sqlpool.Conn.Fail), which fails the requests in flight and closes it.
type Conn[E any, P Entry[E]] struct {
	// PC is the pool's side of the connection (Start).
	PC *sqlpool.Conn
	// Out is the output the socket has not taken (from an internal write
	// position): the protocol appends its messages to it.
	Out []byte
	// Exp is the answers awaited, oldest first.
	Exp []E
	// Blocked counts the prepares in flight: the requests sent after them
	// wait unwritten until their answers are in (WritePending).
	Blocked int

	fd       int
	loop     *evloop.Loop
	proto    Protocol
	wpos     int
	wantOut  bool
	flushDue bool // registered to flush at the end of the loop's turn
	in       []byte
	rlen     int
	rpos     int
	short    bool // the last read did not fill the buffer: the socket is drained
	closed   bool
	pending  []*sqlpool.Request // sent, not yet written

	// tc is the connection's TLS session, over ts (AdoptTLS); nil for a
	// plain connection. tlsErr is its read error once the input read with
	// it is parsed.
	tc     *tls.Conn
	ts     *Socket
	tlsErr error

	// answers keeps answers in the order sent while a request runs again
	// (HoldForRetry).
	answers sqlpool.AnswerOrder
}

// Adopt makes fd, a non-blocking socket, the connection's; CloseSocket
// closes it.
func (c *Conn[E, P]) Adopt(fd int) { c.fd = fd }

// Fd implements sqlpool.ServerConn.
func (c *Conn[E, P]) Fd() int { return c.fd }

// Start hands the connection to the pool's side of it, pc, on loop; proto
// is the protocol's ServerConn that embeds c.
func (c *Conn[E, P]) Start(pc *sqlpool.Conn, loop *evloop.Loop, proto Protocol) {
	c.PC, c.loop, c.proto = pc, loop, proto
}

// Closed reports whether CloseSocket ran.
func (c *Conn[E, P]) Closed() bool { return c.closed }

// CloseSocket writes goodbye if the socket takes it now, then closes it and
// drops the buffers. It does nothing once closed.
func (c *Conn[E, P]) CloseSocket(goodbye []byte) {
	if c.closed {
		return
	}
	c.closed = true
	if c.tc != nil {
		c.closeTLS(goodbye)
	} else {
		evloop.RawWrite(c.fd, goodbye)
	}
	unix.Close(c.fd)
	c.Out, c.in = nil, nil
}

// Fail reports a broken connection to the pool, which drops it; nothing once
// closed.
func (c *Conn[E, P]) Fail(err error) {
	if c.closed {
		return
	}
	c.PC.Fail(err)
}

// Send implements sqlpool.ServerConn: r is written after the requests sent
// before it, at once unless a prepare is in flight.
func (c *Conn[E, P]) Send(r *sqlpool.Request) {
	c.answers.Sent(r)
	c.pending = append(c.pending, r)
	c.WritePending()
}

// WritePending writes the requests waiting, up to the first that needs a
// statement prepared (Blocked), flushes at the end of the loop's turn, and
// answers the requests tetherd answers itself (DrainLocal).
func (c *Conn[E, P]) WritePending() {
	for c.Blocked == 0 && len(c.pending) > 0 && !c.closed {
		r := c.pending[0]
		n := copy(c.pending, c.pending[1:])
		c.pending[n] = nil
		c.pending = c.pending[:n]
		c.proto.WriteRequest(r)
	}
	c.FlushLater()
	c.DrainLocal()
}

// Local awaits no message for r: tetherd answers it, with err, in its turn
// (DrainLocal).
func (c *Conn[E, P]) Local(r *sqlpool.Request, err error) {
	var zero E // set in place: a local E would escape through Head
	c.Exp = append(c.Exp, zero)
	*P(&c.Exp[len(c.Exp)-1]).Head() = Await{R: r, Last: true, Local: true, Err: err}
}

// FlushLater writes Out at the end of the loop's turn, with the others of
// the turn (evloop.Loop.FlushLater).
func (c *Conn[E, P]) FlushLater() {
	if !c.flushDue && c.wpos < len(c.Out) {
		c.flushDue = true
		c.loop.FlushLater(c.proto)
	}
}

// Flush implements evloop.Flusher (for the owner to forward to).
func (c *Conn[E, P]) Flush() {
	c.flushDue = false
	c.flush()
}

// OnWritable implements evloop.Watcher.
func (c *Conn[E, P]) OnWritable() { c.flush() }

// flush writes what the socket takes now; the rest when it is writable.
func (c *Conn[E, P]) flush() {
	if c.tc != nil {
		c.flushTLS()
		return
	}
	for c.wpos < len(c.Out) && !c.closed {
		n, errno := evloop.RawWrite(c.fd, c.Out[c.wpos:])
		switch errno {
		case 0:
			c.wpos += n
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if !c.wantOut {
				c.wantOut = true
				c.loop.WantWrite(c.fd, true)
			}
			return
		}
		c.Fail(fmt.Errorf("write: %w", errno))
		return
	}
	c.Out, c.wpos = c.Out[:0], 0
	if cap(c.Out) > keepBufSize {
		c.Out = nil
	}
	if c.wantOut {
		c.wantOut = false
		c.loop.WantWrite(c.fd, false)
	}
}

// OnReadable implements evloop.Watcher: it reads what the socket has and
// parses it (Protocol.Parse) after each read.
func (c *Conn[E, P]) OnReadable() {
	for c.read() {
		c.proto.Parse()
	}
}

// read reads what the socket has into the input buffer and reports whether
// there is new input to parse; false once the socket is drained, the
// connection closed, or failed (a read error or the server's end of the
// stream).
func (c *Conn[E, P]) read() bool {
	if c.closed {
		return false
	}
	if c.short {
		c.short = false
		c.settle()
		return false
	}
	if c.tc != nil {
		if c.tlsErr != nil {
			c.Fail(c.tlsErr)
			return false
		}
		return c.readTLS()
	}
	for {
		if len(c.in) == 0 {
			c.in = make([]byte, readChunk)
		}
		if c.rlen == len(c.in) {
			c.makeRoom(readChunk)
		}
		n, errno := evloop.RawRead(c.fd, c.in[c.rlen:])
		if errno == unix.EAGAIN {
			c.settle()
			return false
		}
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n <= 0 {
			err := error(io.EOF)
			if errno != 0 {
				err = fmt.Errorf("read: %w", syscall.Errno(errno))
			}
			c.Fail(err)
			return false
		}
		c.short = n < len(c.in)-c.rlen
		c.rlen += n
		return true
	}
}

// settle rewinds the input buffer once all of it is parsed, dropping it if
// it grew large.
func (c *Conn[E, P]) settle() {
	if c.rpos == c.rlen {
		c.rpos, c.rlen = 0, 0
		if len(c.in) > keepBufSize {
			c.in = nil
		}
	}
}

// Peek returns the input read and not taken yet, nil when it is shorter
// than n bytes (a message header not all read).
func (c *Conn[E, P]) Peek(n int) []byte {
	if c.rlen-c.rpos < n {
		return nil
	}
	return c.in[c.rpos:c.rlen]
}

// Take takes the next n bytes of input (a whole message) and returns them,
// valid until the next read; false when not all of them are read yet, with
// room made for the rest.
func (c *Conn[E, P]) Take(n int) ([]byte, bool) {
	avail := c.rlen - c.rpos
	if avail < n {
		c.makeRoom(n - avail)
		return nil, false
	}
	b := c.in[c.rpos : c.rpos+n]
	c.rpos += n
	return b, true
}

// makeRoom makes at least n bytes free after rlen, moving unparsed input to
// the front or growing the buffer.
func (c *Conn[E, P]) makeRoom(n int) {
	unparsed := c.rlen - c.rpos
	if c.rpos > 0 && len(c.in)-unparsed >= n {
		copy(c.in, c.in[c.rpos:c.rlen])
		c.rpos, c.rlen = 0, unparsed
		return
	}
	if len(c.in)-c.rlen >= n {
		return
	}
	nb := make([]byte, max(2*len(c.in), unparsed+n))
	copy(nb, c.in[c.rpos:c.rlen])
	c.in, c.rpos, c.rlen = nb, 0, unparsed
}

// Pop drops the first answer awaited.
func (c *Conn[E, P]) Pop() {
	// Shift down rather than reslice, so that the slice keeps its room.
	n := copy(c.Exp, c.Exp[1:])
	var zero E
	c.Exp[n] = zero
	c.Exp = c.Exp[:n]
}

// DrainLocal answers the requests answered by tetherd (Await.Local) once it
// is their turn.
func (c *Conn[E, P]) DrainLocal() {
	for !c.closed && len(c.Exp) > 0 {
		a := *P(&c.Exp[0]).Head()
		if !a.Local {
			break
		}
		c.Pop()
		if a.R.Err == nil {
			a.R.Err = a.Err
		}
		if a.Last {
			c.Finish(a.R)
		}
	}
}

// Finish answers r to the pool; while a retry is held (HoldForRetry), once
// every request sent before it has been answered. Nothing once closed.
func (c *Conn[E, P]) Finish(r *sqlpool.Request) {
	if c.closed {
		return
	}
	if !c.answers.Holding() {
		c.PC.Done(r) // the hot path: no retry in progress
		return
	}
	c.answers.Finish(r, c.Closed, c.PC.Done) // Done may send more: Send keeps them in order
}

// HoldForRetry starts holding answers so that r, its answer popped, about
// to run again, is answered before the requests sent after it; the answers
// still awaited for r stop being its last (a check written after the failed
// attempt: the retry writes its own); and the requests tetherd answers
// itself that are first in line now are answered (held until r is), so that
// the answers to come meet the entries they belong to.
func (c *Conn[E, P]) HoldForRetry(r *sqlpool.Request) {
	inflight := make([]*sqlpool.Request, len(c.Exp))
	for i := range c.Exp {
		a := P(&c.Exp[i]).Head()
		inflight[i] = a.R
		if a.R == r {
			a.Last = false
		}
	}
	c.answers.Hold(r, inflight, c.pending)
	c.DrainLocal()
}

// Awaits reports whether an answer for r is still awaited.
func (c *Conn[E, P]) Awaits(r *sqlpool.Request) bool {
	for i := range c.Exp {
		if P(&c.Exp[i]).Head().R == r {
			return true
		}
	}
	return false
}
