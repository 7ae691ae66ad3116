//go:build linux

package evloop

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Conn is one client connection of a Loop.
type Conn struct {
	fd      int
	loop    *Loop
	in      []byte // unconsumed input; loop goroutine only
	closing atomic.Bool

	mu     sync.Mutex
	out    []byte // output the socket has not taken yet
	closed bool

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
		if len(c.out)+len(b) > c.loop.maxOut {
			c.shutdownLocked()
			return ErrClosed
		}
		c.out = append(c.out, b...)
		return nil
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
		unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_MOD, c.fd,
			&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLOUT, Fd: int32(c.fd)})
	}
	return nil
}

// flush writes queued output; called on the loop when the socket is writable.
func (c *Conn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for len(c.out) > 0 {
		n, errno := rawWrite(c.fd, c.out)
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.EAGAIN {
			return
		}
		if errno != 0 {
			c.shutdownLocked()
			return
		}
		c.out = c.out[n:]
	}
	c.out = nil
	unix.EpollCtl(c.loop.epfd, unix.EPOLL_CTL_MOD, c.fd,
		&unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)})
}

// Close closes the connection after the output queued so far is written as far
// as the socket takes it now. Safe from any goroutine; the loop does the
// closing and then calls the handler's OnClose.
func (c *Conn) Close() {
	c.closing.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
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
