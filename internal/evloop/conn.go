//go:build linux

package evloop

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Conn is one client connection of a Loop.
type Conn struct {
	fd      int
	loop    *Loop
	peer    string // the client's address, when the connection came from AddConn
	in      []byte // unconsumed input; loop goroutine only
	closing atomic.Bool
	paused  atomic.Bool // reads stopped (PauseReading); set on the loop goroutine

	mu      sync.Mutex
	out     []byte // output the socket has not taken yet
	closed  bool
	pending bool // a flush at the end of the loop's turn is due
	waiting bool // the socket was full: polled for writability

	// Context is the handler's per-connection state.
	Context any
}

// Write sends b, whole, after anything queued before it. It never blocks: what
// the socket does not take now is queued and flushed when it is writable. A
// connection whose queue grows past the loop's limit (a client that does not
// read) is closed. Safe from any goroutine; b may be reused when Write returns.
func (c *Conn) Write(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if len(c.out) > 0 {
		return c.queueLocked(b)
	}
	for len(b) > 0 {
		n, errno := rawWrite(c.fd, b)
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.EAGAIN {
			break
		}
		if errno != 0 {
			c.shutdownLocked()
			return ErrClosed
		}
		b = b[n:]
	}
	if len(b) > 0 {
		c.out = append(c.out[:0], b...)
		c.waitWritableLocked()
	}
	return nil
}

// WriteLater queues b to be written at the end of the loop's turn (see
// Loop.FlushLater), after anything queued before it. Loop goroutine only; b
// may be reused when it returns. A connection whose queue passes the loop's
// limit is closed.
func (c *Conn) WriteLater(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.queueLocked(b); err != nil {
		return err
	}
	if !c.pending && !c.waiting {
		c.pending = true
		c.loop.FlushLater(c)
	}
	return nil
}

// queueLocked appends b to the output queue, closing a connection whose
// queue passes the limit (ErrOutputLimit, once: the caller says so).
func (c *Conn) queueLocked(b []byte) error {
	if len(c.out)+len(b) > c.loop.maxOut {
		if c.closing.Load() {
			return ErrClosed
		}
		c.shutdownLocked()
		return ErrOutputLimit
	}
	c.out = append(c.out, b...)
	return nil
}

// DropBuffers lets go of the connection's buffered input and unsent output
// at once, for a connection being closed to free memory: otherwise they are
// held until the loop has seen the close. Loop goroutine only.
func (c *Conn) DropBuffers() {
	n := cap(c.in)
	c.in = nil
	c.mu.Lock()
	n += cap(c.out)
	c.out = nil
	c.mu.Unlock()
	c.loop.dropped.Add(int64(n))
}

// Flush implements Flusher: it writes what WriteLater queued.
func (c *Conn) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = false
	if !c.closed && !c.waiting {
		c.writeOutLocked()
	}
}

// flush writes queued output; called on the loop when the socket is writable.
func (c *Conn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.writeOutLocked()
	}
}

// writeOutLocked writes the queue as far as the socket takes it, and polls
// for writability while some is left.
func (c *Conn) writeOutLocked() {
	w := 0
	for w < len(c.out) {
		n, errno := rawWrite(c.fd, c.out[w:])
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.EAGAIN {
			c.out = c.out[:copy(c.out, c.out[w:])]
			c.waitWritableLocked()
			return
		}
		if errno != 0 {
			c.shutdownLocked()
			return
		}
		w += n
	}
	c.out = c.out[:0]
	if cap(c.out) > 64<<10 {
		c.out = nil // do not pin a large reply's buffer on an idle connection
	}
	if c.waiting {
		c.waiting = false
		c.pollLocked()
	}
}

func (c *Conn) waitWritableLocked() {
	if c.waiting {
		return
	}
	c.waiting = true
	c.pollLocked()
}

// pollLocked tells epoll what to poll c for: input unless reads are paused,
// writability while output waits.
func (c *Conn) pollLocked() {
	var ev uint32
	if !c.paused.Load() {
		ev |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if c.waiting {
		ev |= unix.EPOLLOUT
	}
	unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: ev, Fd: int32(c.fd)})
}

// PauseReading stops reading c's socket: what was read and not consumed
// stays buffered, and the client's further requests wait in the socket (the
// kernel's buffer, then the client itself), instead of in tetherd's memory.
// A client that hangs up meanwhile is still noticed. Loop goroutine only.
func (c *Conn) PauseReading() {
	if c.paused.Swap(true) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.pollLocked()
	}
}

// ResumeReading undoes PauseReading: the input buffered meanwhile is offered
// to the handler again first. Safe from any goroutine.
func (c *Conn) ResumeReading() {
	c.loop.Post(func() { c.loop.resume(c) })
}

// Paused reports whether reads are paused.
func (c *Conn) Paused() bool { return c.paused.Load() }

// Buffered returns the bytes c holds: its input buffer and its output queue.
// Loop goroutine only.
func (c *Conn) Buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cap(c.in) + len(c.out)
}

// Peer describes the other end: for a Unix socket the process's pid and uid
// (SO_PEERCRED), for TCP its address. Loop goroutine only (the descriptor is
// the loop's); it costs a system call, for operators' listings.
func (c *Conn) Peer() (pid, uid int, addr string) {
	if c.closed {
		return 0, 0, ""
	}
	if c.peer != "" {
		return 0, 0, c.peer
	}
	if cred, err := unix.GetsockoptUcred(c.fd, unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil && cred.Pid > 0 {
		return int(cred.Pid), int(cred.Uid), ""
	}
	if sa, err := unix.Getpeername(c.fd); err == nil {
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			return 0, 0, netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
		case *unix.SockaddrInet6:
			return 0, 0, netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)).String()
		}
	}
	return 0, 0, ""
}

// Unread returns the bytes read from the socket and not yet consumed by the
// handler (a partial frame, or frames held while reading is paused). Loop
// goroutine only.
func (c *Conn) Unread() int { return len(c.in) }

// Unsent returns the bytes of replies queued and not yet written to the
// socket. Safe from any goroutine.
func (c *Conn) Unsent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out)
}

// Close closes the connection after the output queued so far is written as far
// as the socket takes it now. Safe from any goroutine; the loop does the
// closing and then calls the handler's OnClose.
func (c *Conn) Close() {
	c.closing.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		if len(c.out) > 0 && !c.waiting {
			c.writeOutLocked() // what WriteLater queued, such as the error that explains the close
		}
		c.shutdownLocked()
	}
}

// shutdownLocked half-closes the socket so that the loop sees it readable
// (EOF), and closes it there; closing the fd here could hand its number to a
// new connection while the loop still holds events for the old one.
func (c *Conn) shutdownLocked() {
	c.closing.Store(true)
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
}
