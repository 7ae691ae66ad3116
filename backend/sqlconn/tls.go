package sqlconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tether-php/tether/internal/evloop"
)

// TLS on the loop. Without kTLS the records are sealed and opened in user
// space, by crypto/tls, over a Socket: a net.Conn that is the dialled
// connection while the dial runs blocking (the TLS handshake, then the
// protocol's authentication), and the loop's non-blocking fd afterwards
// (AdoptTLS). On the loop, the Socket's Read reads the fd and answers "would
// block" (a net.Error whose Temporary is true, which crypto/tls does not
// keep as the connection's error: a partial record stays in its buffer for
// the next Read); its Write appends the sealed records to a buffer that Conn
// writes to the fd as the socket takes it. Conn reads plaintext from the
// tls.Conn until it would block (not only while the fd is readable: a record
// read whole may hold more than the input buffer took) and writes its Out
// through the tls.Conn into that buffer at each flush.
//
// A plain connection does not pay for it: Conn tests one pointer on its read
// and write paths.

// errWouldBlock is what a Socket on the loop answers when the fd has
// nothing to read.
var errWouldBlock net.Error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "read tls socket: would block" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// Socket is the net.Conn under a loop-driven connection's tls.Conn: the
// dialled net.Conn until AdoptTLS, the loop's fd after. Give it to
// tls.Client (or return it from the dial function of a library that starts
// TLS itself, as pgconn does).
type Socket struct {
	nc net.Conn // the dialled connection; nil once on the loop

	fd      int
	drained bool   // the last read of the fd did not fill its buffer
	out     []byte // sealed records the fd has not taken, from opos
	opos    int
}

// NewSocket returns a Socket over nc, a dialled connection, for the dial.
func NewSocket(nc net.Conn) *Socket { return &Socket{nc: nc, fd: -1} }

// NetConn returns the dialled connection (nil once on the loop).
func (s *Socket) NetConn() net.Conn { return s.nc }

// Read implements net.Conn: on the loop, what the fd has, or errWouldBlock.
func (s *Socket) Read(p []byte) (int, error) {
	if s.nc != nil {
		return s.nc.Read(p)
	}
	if s.drained {
		// The fd gave less than asked last time: it is empty, as the loop
		// is told again (level-triggered) once more comes. Saves a read(2)
		// that would answer EAGAIN.
		s.drained = false
		return 0, errWouldBlock
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, errno := evloop.RawRead(s.fd, p)
		switch errno {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			s.drained = n < len(p)
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errWouldBlock
		}
		return 0, fmt.Errorf("read: %w", syscall.Errno(errno))
	}
}

// Write implements net.Conn: on the loop, it keeps p for the fd (flush) and
// never fails.
func (s *Socket) Write(p []byte) (int, error) {
	if s.nc != nil {
		return s.nc.Write(p)
	}
	s.out = append(s.out, p...)
	return len(p), nil
}

// flush writes the sealed records the fd takes now; it reports whether all
// are written, or the write error.
func (s *Socket) flush() (bool, error) {
	for s.opos < len(s.out) {
		n, errno := evloop.RawWrite(s.fd, s.out[s.opos:])
		switch errno {
		case 0:
			s.opos += n
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false, nil
		}
		return false, fmt.Errorf("write: %w", errno)
	}
	s.out, s.opos = s.out[:0], 0
	if cap(s.out) > keepBufSize {
		s.out = nil
	}
	return true, nil
}

// pending reports whether sealed records wait for the fd.
func (s *Socket) pending() bool { return s.opos < len(s.out) }

// Close implements net.Conn: the dialled connection's Close; on the loop,
// Conn closes the fd (CloseSocket).
func (s *Socket) Close() error {
	if s.nc != nil {
		return s.nc.Close()
	}
	return nil
}

// LocalAddr implements net.Conn.
func (s *Socket) LocalAddr() net.Addr {
	if s.nc != nil {
		return s.nc.LocalAddr()
	}
	return nil
}

// RemoteAddr implements net.Conn.
func (s *Socket) RemoteAddr() net.Addr {
	if s.nc != nil {
		return s.nc.RemoteAddr()
	}
	return nil
}

// SetDeadline implements net.Conn: the dial's deadlines; none on the loop,
// where nothing blocks.
func (s *Socket) SetDeadline(t time.Time) error {
	if s.nc != nil {
		return s.nc.SetDeadline(t)
	}
	return nil
}

// SetReadDeadline implements net.Conn (see SetDeadline).
func (s *Socket) SetReadDeadline(t time.Time) error {
	if s.nc != nil {
		return s.nc.SetReadDeadline(t)
	}
	return nil
}

// SetWriteDeadline implements net.Conn (see SetDeadline).
func (s *Socket) SetWriteDeadline(t time.Time) error {
	if s.nc != nil {
		return s.nc.SetWriteDeadline(t)
	}
	return nil
}

// ErrNotSocket: AdoptTLS was given a tls.Conn that is not over a Socket.
var ErrNotSocket = errors.New("tls connection is not over a sqlconn.Socket")

// AdoptTLS makes tc, a tls.Conn over a Socket whose handshake is done, the
// connection's: it takes the dialled connection's socket for the loop
// (evloop.TakeFd) and closes the dialled connection; the Socket goes on over
// the fd. Records crypto/tls read ahead during the dial stay in tc and are
// read first. CloseSocket closes the fd.
func (c *Conn[E, P]) AdoptTLS(tc *tls.Conn) error {
	s, ok := tc.NetConn().(*Socket)
	if !ok || s.nc == nil {
		return ErrNotSocket
	}
	fd, err := evloop.TakeFd(s.nc)
	if err != nil {
		return fmt.Errorf("take tls socket: %w", err)
	}
	s.nc.Close() // the loop works on the duplicate
	s.nc, s.fd = nil, fd
	c.fd, c.tc, c.ts = fd, tc, s
	return nil
}

// TLS reports whether the connection runs TLS (AdoptTLS).
func (c *Conn[E, P]) TLS() bool { return c.tc != nil }

// readTLS is read for a TLS connection: plaintext from the tls.Conn until it
// would block.
func (c *Conn[E, P]) readTLS() bool {
	for {
		if len(c.in) == 0 {
			c.in = make([]byte, readChunk)
		}
		if c.rlen == len(c.in) {
			c.makeRoom(readChunk)
		}
		n, err := c.tc.Read(c.in[c.rlen:])
		if n > 0 {
			c.rlen += n
			if err == nil {
				return true
			}
		}
		if err == nil {
			continue // a record with nothing for us (a session ticket)
		}
		if err == errWouldBlock {
			if c.ts.pending() {
				c.flushTLS() // an alert or a key update answered while reading
			}
			if n > 0 {
				// Plaintext came with the would-block (a partial record read
				// after it): parse it now, or a close_notify completing that
				// record next would fail the connection before it is.
				return true
			}
			c.settle()
			return false
		}
		if err != io.EOF { // EOF: the server's close_notify or end of the stream
			err = fmt.Errorf("read tls: %w", err)
		}
		// The input read along with the error is parsed first: Fail once
		// it is (read is called again).
		if n > 0 {
			c.tlsErr = err
			return true
		}
		c.Fail(err)
		return false
	}
}

// flushTLS seals Out into the Socket's buffer and writes what the fd takes
// now; the rest when it is writable.
func (c *Conn[E, P]) flushTLS() {
	if c.closed {
		return
	}
	if c.wpos < len(c.Out) {
		if _, err := c.tc.Write(c.Out[c.wpos:]); err != nil {
			c.Fail(fmt.Errorf("write tls: %w", err))
			return
		}
		c.Out, c.wpos = c.Out[:0], 0
		if cap(c.Out) > keepBufSize {
			c.Out = nil
		}
	}
	done, err := c.ts.flush()
	if err != nil {
		c.Fail(err)
		return
	}
	if done == c.wantOut {
		c.wantOut = !done
		c.loop.WantWrite(c.fd, !done)
	}
}

// closeTLS is CloseSocket's goodbye for a TLS connection: goodbye sealed,
// after what waits, then close_notify, written if the fd takes them now.
func (c *Conn[E, P]) closeTLS(goodbye []byte) {
	if len(goodbye) > 0 {
		c.tc.Write(goodbye)
	}
	c.tc.CloseWrite()
	c.ts.flush()
	c.ts.out = nil
}

// TLSState returns the TLS session's state (version, cipher suite, whether
// it resumed), false for a plain connection.
func (c *Conn[E, P]) TLSState() (tls.ConnectionState, bool) {
	if c.tc == nil {
		return tls.ConnectionState{}, false
	}
	return c.tc.ConnectionState(), true
}
