//go:build linux

// Package evloop is tetherd's client-facing I/O: one goroutine running an epoll
// loop over non-blocking sockets.
//
// Why by hand and not net + goroutine per connection: on a 2-core web host the
// daemon's CPU per request is taken straight from PHP, and
// ../shared/reference/round-trip-floor.md measured idiomatic Go at ~40 us of
// daemon CPU per round trip against ~15 us for one goroutine running epoll with
// raw syscalls, because one wake-up serves every ready connection and no
// goroutine hand-off happens for requests answered from memory. The general
// event-loop libraries for Go route every call through the scheduler-aware
// syscall path, which that measurement found to cost ~7 us more per request.
//
// The loop never blocks its thread: it polls its epoll instance with a raw,
// non-blocking epoll_wait, and when nothing is ready it parks in Go's own
// network poller on the epoll fd (an epoll fd is readable when it has events).
// A loop blocked in epoll_wait would hold its scheduler slot (P) until the
// runtime's monitor took it back, up to 10 ms later, and the goroutines it had
// handed backend work to would wait for that; with GOMAXPROCS=1 that made a
// MariaDB read 4x slower.
//
// Besides client connections, the loop polls the sockets of backend
// connections (Watch) and runs functions posted from other goroutines (Post):
// a backend driven from the loop answers a client without a single goroutine
// hand-off, which is what keeps a query near the cost of a ping.
//
// Threading contract: the Handler's OnOpen, OnData and OnClose, the Watchers'
// methods and posted functions run on the loop goroutine and must not block.
// Conn.Write, Conn.Close, Conn.ResumeReading and Post may be called from any
// goroutine; Watch, Unwatch, WantWrite, Conn.WriteLater and
// Conn.PauseReading only on the loop goroutine.
//
// Panics: a panic in any of those callbacks is recovered by the loop, which
// goes on serving everyone else. The connection it was for is closed (a
// client's), told (a Recoverer, such as a pool's backend connection, which
// closes itself) or no longer polled (any other Watcher); the handler hears of
// it (PanicHandler). The cost is one deferred call per turn of the loop, not
// per event.
package evloop

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Handler receives a loop's connection events.
type Handler interface {
	// OnOpen is called when a connection is accepted; tcp tells the listener kind.
	OnOpen(c *Conn, tcp bool)
	// OnData is called with the bytes buffered for c. It returns how many it
	// consumed; the rest is kept and offered again with more data. It must not
	// keep references to in after it returns.
	OnData(c *Conn, in []byte) (consumed int)
	// OnClose is called once, after c's socket is closed.
	OnClose(c *Conn)
}

// Watcher is a socket the loop polls for another part of tetherd, such as a
// backend connection. Its methods run on the loop goroutine and must not block.
type Watcher interface {
	// OnReadable is called when the socket has data, or was hung up or failed.
	OnReadable()
	// OnWritable is called when the socket takes more output, while WantWrite
	// is on.
	OnWritable()
}

// Flusher has output to write at the end of the loop's turn.
type Flusher interface {
	Flush()
}

// Errors.
var (
	ErrClosed = errors.New("connection closed")
	// ErrOutputLimit: the write would have queued more than the loop's
	// maxOut for a connection that does not read its replies, so it was
	// closed instead. Returned once per connection.
	ErrOutputLimit = errors.New("connection closed: its unread output passed the limit")
	// ErrLoopClosed: the loop has stopped (or is stopping) and runs no more
	// posted functions.
	ErrLoopClosed = errors.New("event loop stopped")
)

// PanicHandler is implemented by a Handler that wants to hear of a panic the
// loop recovered from in a callback (to log it with its stack and count it).
// Without one the loop logs it. The loop goes on serving: a client
// connection whose callback panicked is closed, a Watcher that is no
// Recoverer is no longer polled.
type PanicHandler interface {
	OnPanic(where string, v any, stack []byte)
}

// Recoverer is a Watcher (or Flusher) that handles a panic in its own
// callbacks: the loop calls Recover instead of its handler's OnPanic, and
// Recover closes whatever the panic may have left in an unknown state (a
// backend connection). It runs on the loop goroutine.
type Recoverer interface {
	Recover(v any, stack []byte)
}

// Wrapper is a Watcher that forwards to another object's callbacks (a pool's
// connection to its protocol's): a panic in a Flush of the wrapped object
// goes to the wrapper's Recover.
type Wrapper interface {
	Unwrap() any
}

const (
	readChunk    = 64 << 10
	maxEvents    = 256
	listenerFlag = -1
)

// Loop is one epoll loop with its listeners and connections.
type Loop struct {
	epfd      int
	epFile    *os.File        // epfd, registered with Go's network poller
	epRaw     syscall.RawConn // to park the loop goroutine until epfd is readable
	wakefd    int             // eventfd that wakes epoll_wait for Stop
	handler   Handler
	listeners map[int]*listener // by fd
	conns     map[int]*Conn     // by fd; touched only on the loop goroutine
	watchers  map[int]Watcher   // by fd; loop goroutine only
	flushes   []Flusher         // to flush at the end of this turn; loop goroutine only
	aborted   []int             // fds of connections CloseAbort closed, released at the end of this turn; loop goroutine only
	maxOut    int

	// dropped counts the bytes of connection buffers let go of since
	// TakeDropped: garbage the runtime may not collect (and so RSS that
	// stays) until something allocates again.
	dropped atomic.Int64
	// busy counts the nanoseconds the loop spent serving events (not parked
	// waiting for them), turns its turns: an operator's measure of how near
	// the one loop goroutine is to saturation.
	busy  atomic.Int64
	turns atomic.Int64

	mu       sync.Mutex
	stopping bool
	// closed: Run has returned and wakefd is closed. Its number may belong to
	// any socket opened since (a backend connection's, say), so nothing may be
	// written to it any more: a Post or Stop racing the shutdown would put
	// eight stray bytes into someone else's stream.
	closed    bool
	posted    []func() // run on the loop at its next wake-up
	running   []func() // the batch being run; loop goroutine only
	wakeArmed bool     // the eventfd has been written since the loop last drained it
	done      chan struct{}

	// cur is the callback being run, for the recovery of a panic in it.
	// Loop goroutine only.
	cur struct {
		c  *Conn
		w  Watcher
		fd int
		f  Flusher
	}
}

type listener struct {
	fd  int
	tcp bool
	ln  net.Listener // kept to own the address (and unlink the Unix path on close)
	f   *os.File
}

// New returns a loop that dispatches to h (nil for a loop without listeners,
// which only polls Watchers and runs posted functions). maxOut bounds the bytes
// queued for a connection that does not read its replies; past it the
// connection is closed.
func New(h Handler, maxOut int) (*Loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	// A non-blocking fd given to os.NewFile is registered with the runtime's
	// poller, which can then park a goroutine until it is readable.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, fmt.Errorf("epoll fd nonblock: %w", err)
	}
	epFile := os.NewFile(uintptr(epfd), "epoll")
	epRaw, err := epFile.SyscallConn()
	if err != nil {
		epFile.Close()
		unix.Close(wfd)
		return nil, fmt.Errorf("epoll fd: %w", err)
	}
	return &Loop{
		epfd: epfd, epFile: epFile, epRaw: epRaw, wakefd: wfd, handler: h, maxOut: maxOut,
		listeners: map[int]*listener{}, conns: map[int]*Conn{}, watchers: map[int]Watcher{}, done: make(chan struct{}),
	}, nil
}

// AddListener makes the loop accept connections from ln, which must be a
// *net.UnixListener or *net.TCPListener. The loop owns ln from then on and
// closes it when Run returns. It waits for the loop to take it: call it
// from another goroutine than the loop's, with Run started.
func (l *Loop) AddListener(ln net.Listener) error {
	errc := make(chan error, 1)
	if err := l.Post(func() { errc <- l.addListener(ln) }); err != nil {
		return fmt.Errorf("add listener: %w", err)
	}
	select {
	case err := <-errc:
		return err
	case <-l.done:
		return fmt.Errorf("add listener: %w", ErrLoopClosed)
	}
}

func (l *Loop) addListener(ln net.Listener) error {
	var f *os.File
	var err error
	tcp := false
	switch x := ln.(type) {
	case *net.UnixListener:
		f, err = x.File()
	case *net.TCPListener:
		f, err = x.File()
		tcp = true
	default:
		return fmt.Errorf("add listener: unsupported type %T", ln)
	}
	if err != nil {
		return fmt.Errorf("add listener: %w", err)
	}
	fd := int(f.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		f.Close()
		return fmt.Errorf("add listener: set nonblock: %w", err)
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		f.Close()
		return fmt.Errorf("add listener: epoll_ctl: %w", err)
	}
	l.listeners[fd] = &listener{fd: fd, tcp: tcp, ln: ln, f: f}
	return nil
}

// StopAccepting closes the listeners (a Unix socket's path is removed), so
// that a new client is refused at once instead of waiting in the backlog of
// a socket nobody accepts from, while established connections go on being
// served. It waits for the loop to do it: call it from another goroutine,
// with Run started.
func (l *Loop) StopAccepting() {
	done := make(chan struct{})
	err := l.Post(func() {
		for fd, ln := range l.listeners {
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			ln.f.Close()
			ln.ln.Close()
			delete(l.listeners, fd)
		}
		close(done)
	})
	if err != nil {
		return // Run closes the listeners as it returns
	}
	select {
	case <-done:
	case <-l.done:
	}
}

// Stop makes Run close every connection and return. Safe from any goroutine.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	l.wakeLocked()
}

// Post runs fn on the loop goroutine, after the functions posted before it.
// Safe from any goroutine; it never blocks. It returns ErrLoopClosed, and fn
// never runs, once Stop has been called: a caller waiting for fn must not
// wait then. A function it accepted runs before Run returns (unless Run
// fails). A panic in fn is recovered and reported (PanicHandler); the
// functions posted after it still run.
func (l *Loop) Post(fn func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.stopping {
		return ErrLoopClosed
	}
	l.posted = append(l.posted, fn)
	if !l.wakeArmed {
		l.wakeArmed = true
		l.wakeLocked()
	}
	return nil
}

// wakeLocked makes epoll_wait return, unless the loop is gone. l.mu held:
// the shutdown closes wakefd under it.
func (l *Loop) wakeLocked() {
	if l.closed {
		return
	}
	var one = [8]byte{1}
	unix.Write(l.wakefd, one[:])
}

// runPosted drains the eventfd and runs what was posted; it reports whether
// the loop is stopping.
func (l *Loop) runPosted() bool {
	var b [8]byte
	unix.Read(l.wakefd, b[:])
	l.mu.Lock()
	stopping := l.stopping
	l.running, l.posted = l.posted, l.running[:0]
	l.wakeArmed = false
	l.mu.Unlock()
	for i := 0; i < len(l.running); {
		i = l.runPostedFrom(i)
	}
	return stopping
}

// runPostedFrom runs l.running[i:]; when one panics, it recovers and returns
// the index after it.
func (l *Loop) runPostedFrom(i int) (next int) {
	defer func() {
		if v := recover(); v != nil {
			l.recovered("posted function", v, debug.Stack())
			next = i + 1
		}
	}()
	for ; i < len(l.running); i++ {
		fn := l.running[i]
		l.running[i] = nil
		l.cur.c, l.cur.w, l.cur.f = nil, nil, nil
		fn()
	}
	return i
}

// recovered handles a panic in the callback l.cur names: a client
// connection is closed, a Recoverer told, any other Watcher no longer polled
// (the loop does not own its descriptor); the panic is reported to the
// handler (or the Recoverer). Loop goroutine.
func (l *Loop) recovered(where string, v any, stack []byte) {
	cur := l.cur
	l.cur.c, l.cur.w, l.cur.f = nil, nil, nil
	var rec Recoverer
	switch {
	case cur.c != nil:
		where = "client connection"
	case cur.w != nil:
		where = "watched descriptor"
		rec, _ = cur.w.(Recoverer)
	case cur.f != nil:
		where = "flush"
		if r, ok := cur.f.(Recoverer); ok {
			rec = r
		} else if c, ok := cur.f.(*Conn); ok {
			cur.c = c
		} else {
			for _, w := range l.watchers {
				if u, ok := w.(Wrapper); ok && u.Unwrap() == any(cur.f) {
					rec, _ = w.(Recoverer)
					break
				}
			}
		}
	}
	if rec != nil {
		l.safely(func() { rec.Recover(v, stack) })
		return
	}
	l.report(where, v, stack)
	switch {
	case cur.c != nil:
		l.safely(func() { l.closeConn(cur.c) })
	case cur.w != nil:
		l.Unwatch(cur.fd)
	}
}

// report tells the handler of a panic, or logs it.
func (l *Loop) report(where string, v any, stack []byte) {
	if h, ok := l.handler.(PanicHandler); ok {
		l.safely(func() { h.OnPanic(where, v, stack) })
		return
	}
	slog.Error("event loop: panic recovered", "where", where, "panic", fmt.Sprint(v), "stack", string(stack))
}

// safely runs fn, logging a panic in it (a recovery's own recovery).
func (l *Loop) safely(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("event loop: panic while recovering from a panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// Watch makes the loop poll fd for w, for reading (and for writing when
// WantWrite turns it on). The fd must be non-blocking; the loop does not own
// it: Unwatch before closing it. Loop goroutine only (or before Run).
func (l *Loop) Watch(fd int, w Watcher) error {
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		return fmt.Errorf("watch fd %d: epoll_ctl: %w", fd, err)
	}
	l.watchers[fd] = w
	return nil
}

// WantWrite turns polling fd for writability on or off. Loop goroutine only.
func (l *Loop) WantWrite(fd int, on bool) {
	ev := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if on {
		ev |= unix.EPOLLOUT
	}
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)})
}

// Unwatch stops polling fd. Loop goroutine only.
func (l *Loop) Unwatch(fd int) {
	if _, ok := l.watchers[fd]; ok {
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		delete(l.watchers, fd)
	}
}

// TakeDropped returns the bytes of connection buffers let go of since its
// last call (closed connections, large frames done with). Safe from any
// goroutine.
func (l *Loop) TakeDropped() int64 { return l.dropped.Swap(0) }

// Done is closed when Run has returned.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Run serves until Stop. It must be called once, on its own goroutine.
func (l *Loop) Run() error {
	defer close(l.done)
	defer l.shutdown()
	events := make([]unix.EpollEvent, maxEvents)
	buf := make([]byte, readChunk)
	// The parked poll, made once: a closure per wait would allocate on the
	// path every idle moment takes.
	var n int
	var errno syscall.Errno
	poll := func(fd uintptr) bool {
		n, errno = epollWaitRaw(int(fd), events)
		return n != 0 || errno != 0 // false: wait for readability, then call again
	}
	for {
		// Read calls poll at once (a raw, non-blocking epoll_wait that skips
		// the scheduler's bookkeeping) and parks only when nothing is ready.
		// A poll of its own before Read would cost an epoll_wait more at
		// every park: one of the ~3.5 a request paid (docs/benchmarks.md).
		if err := l.epRaw.Read(poll); err != nil {
			return fmt.Errorf("wait for events: %w", err)
		}
		if errno != 0 && errno != unix.EINTR {
			return fmt.Errorf("epoll_wait: %w", errno)
		}
		turnStart := time.Now()
		for i := 0; i < n; {
			var stop bool
			if i, stop = l.serve(events[:n], i, buf); stop {
				return nil
			}
		}
		l.flush()
		l.releaseAborted()
		l.busy.Add(int64(time.Since(turnStart)))
		l.turns.Add(1)
	}
}

// serve dispatches events[i:] and returns len(events), or, when a callback
// panicked, the index after its event (the panic recovered); stop: a posted
// Stop was seen.
func (l *Loop) serve(events []unix.EpollEvent, i int, buf []byte) (next int, stop bool) {
	defer func() {
		if v := recover(); v != nil {
			l.recovered("event", v, debug.Stack())
			next = i + 1
		}
	}()
	for ; i < len(events); i++ {
		ev := &events[i]
		fd := int(ev.Fd)
		l.cur.c, l.cur.w, l.cur.f = nil, nil, nil
		if fd == l.wakefd {
			if l.runPosted() {
				return i + 1, true
			}
			continue
		}
		c, ok := l.conns[fd]
		if !ok {
			if w, ok := l.watchers[fd]; ok {
				l.cur.w, l.cur.fd = w, fd
				if ev.Events&unix.EPOLLOUT != 0 {
					w.OnWritable()
				}
				// The writable handler may have unwatched it.
				if w2, ok := l.watchers[fd]; ok && w2 == w && ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0 {
					w.OnReadable()
				}
			} else if ln, ok := l.listeners[fd]; ok {
				l.accept(ln)
			}
			continue
		}
		l.cur.c = c
		if ev.Events&unix.EPOLLOUT != 0 {
			c.flush()
		}
		switch {
		case c.paused.Load() && ev.Events&(unix.EPOLLHUP|unix.EPOLLERR) != 0:
			l.closeConn(c) // hung up while paused: its requests are of no use to anyone
		case ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0:
			l.read(c, buf)
		}
	}
	return i, false
}

// Busy returns the time the loop has spent serving events since it started,
// and how many turns it took. Safe from any goroutine.
func (l *Loop) Busy() (time.Duration, int64) {
	return time.Duration(l.busy.Load()), l.turns.Load()
}

// CloseAbort closes c at once, discarding whatever its peer sent that was not
// read yet: the peer's next read fails with ECONNRESET instead of seeing EOF,
// which tells a client waiting on a request that the request was never read,
// so that it may send it again elsewhere (a tetherd that hands its clients to
// a new process closes idle connections so). Close, by contrast, half-closes
// first and the peer reads EOF. The descriptor itself is released at the end
// of the loop's turn, so that no event of this turn can reach a connection
// that reused its number. Loop goroutine only.
func (l *Loop) CloseAbort(c *Conn) { l.release(c, true) }

func (l *Loop) releaseAborted() {
	for _, fd := range l.aborted {
		unix.Close(fd)
	}
	l.aborted = l.aborted[:0]
}

// FlushLater makes f's Flush run at the end of the loop's current turn, once
// every ready socket has been served: the writes of one turn go out together,
// each socket's in one write, and the peers they wake do not preempt the loop
// in the middle of a turn (most of what a request costs tetherd is such
// wake-ups and switches, measured in docs/benchmarks.md). Loop goroutine only;
// f is flushed once however often it is added in a turn.
func (l *Loop) FlushLater(f Flusher) {
	l.flushes = append(l.flushes, f)
}

func (l *Loop) flush() {
	// A Flush may add more (a reply written from a backend's answer).
	for i := 0; i < len(l.flushes); {
		i = l.flushFrom(i)
	}
	l.flushes = l.flushes[:0]
}

// flushFrom flushes l.flushes[i:]; when one panics, it recovers and returns
// the index after it.
func (l *Loop) flushFrom(i int) (next int) {
	defer func() {
		if v := recover(); v != nil {
			l.recovered("flush", v, debug.Stack())
			next = i + 1
		}
	}()
	for ; i < len(l.flushes); i++ {
		f := l.flushes[i]
		l.flushes[i] = nil
		l.cur.c, l.cur.w, l.cur.f = nil, nil, f
		f.Flush()
	}
	return i
}

func (l *Loop) accept(ln *listener) {
	for {
		nfd, _, err := unix.Accept4(ln.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			// Out of descriptors or memory: the listener stays readable, and
			// polling it again at once would spin. Pause it, and tell.
			l.pauseListener(ln, err)
			return
		default:
			// EAGAIN: drained; ECONNABORTED and the like: the next one.
			if err == unix.EAGAIN || err == unix.EINTR {
				return
			}
			continue
		}
		if ln.tcp {
			unix.SetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		}
		l.adopt(nfd, ln.tcp, "")
	}
}

// adopt makes the connected socket fd one of the loop's connections and
// tells the handler; it closes fd if it cannot be polled. Loop goroutine.
func (l *Loop) adopt(fd int, tcp bool, peer string) {
	c := &Conn{fd: fd, loop: l, peer: peer}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return
	}
	l.conns[fd] = c
	l.cur.c = c // a panic in OnOpen closes c
	l.handler.OnOpen(c, tcp)
	l.cur.c = nil
}

// AddConn makes fd, a connected stream socket the caller hands over, one of
// the loop's client connections, as if accepted from a listener: the
// handler's OnOpen gets it with tcp (a TLS front hands the plaintext end of
// a socket pair so, with its client's address as peer). Safe from any
// goroutine; the loop owns fd from then on (it closes it if the loop has
// stopped).
func (l *Loop) AddConn(fd int, tcp bool, peer string) {
	err := l.Post(func() {
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return
		}
		l.adopt(fd, tcp, peer)
	})
	if err != nil {
		unix.Close(fd)
	}
}

func (l *Loop) read(c *Conn, buf []byte) {
	n, errno := rawRead(c.fd, buf)
	if errno == unix.EAGAIN || errno == unix.EINTR {
		return
	}
	if n <= 0 || errno != 0 {
		l.closeConn(c)
		return
	}
	data := buf[:n]
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		data = c.in
	}
	l.feed(c, data)
}

// resume undoes PauseReading and offers what was buffered meanwhile.
func (l *Loop) resume(c *Conn) {
	if !c.paused.Swap(false) || c.closing.Load() {
		return
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.pollLocked()
	}
	c.mu.Unlock()
	if !closed && len(c.in) > 0 {
		l.feed(c, c.in)
	}
}

// feed offers data (c's input buffer, or the loop's read buffer) to the
// handler and keeps what it did not consume in c's buffer.
func (l *Loop) feed(c *Conn, data []byte) {
	l.cur.c = c // a panic in OnData closes c
	used := l.handler.OnData(c, data)
	if c.closing.Load() {
		l.closeConn(c)
		return
	}
	rest := data[used:]
	switch {
	case used == 0 && len(c.in) > 0:
		// Nothing taken (a frame still partial): it stays where it is.
		// Moving it onto itself would copy the whole partial frame on
		// every read, quadratic in its size.
	case len(rest) == 0:
		c.in = c.in[:0]
		if cap(c.in) > 4*readChunk {
			l.dropped.Add(int64(cap(c.in)))
			c.in = nil // do not pin a large frame's buffer on an idle connection
		}
	case len(c.in) > 0:
		c.in = c.in[:copy(c.in, rest)]
	default:
		c.in = append(c.in[:0], rest...)
	}
}

// acceptPause is how long a listener rests after accept failed for want of
// descriptors or memory.
const acceptPause = 100 * time.Millisecond

// AcceptErrorHandler is implemented by a Handler that wants to hear of
// accepts failing for want of resources (to log them, say); the loop pauses
// the listener for acceptPause each time.
type AcceptErrorHandler interface {
	OnAcceptError(err error, pause time.Duration)
}

func (l *Loop) pauseListener(ln *listener, err error) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, ln.fd, nil)
	if h, ok := l.handler.(AcceptErrorHandler); ok {
		h.OnAcceptError(err, acceptPause)
	}
	time.AfterFunc(acceptPause, func() {
		l.Post(func() {
			if l.listeners[ln.fd] == ln { // not closed meanwhile
				unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, ln.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ln.fd)})
			}
		})
	})
}

func (l *Loop) closeConn(c *Conn) { l.release(c, false) }

// release closes c's descriptor (at the end of the turn when later, see
// CloseAbort), forgets c and tells the handler. Loop goroutine.
func (l *Loop) release(c *Conn, later bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	if later {
		l.aborted = append(l.aborted, c.fd)
	} else {
		unix.Close(c.fd)
	}
	l.dropped.Add(int64(cap(c.in) + cap(c.out)))
	c.in, c.out = nil, nil
	c.mu.Unlock()
	delete(l.conns, c.fd)
	l.handler.OnClose(c)
}

func (l *Loop) shutdown() {
	for _, c := range l.conns {
		l.closeConn(c)
	}
	l.releaseAborted()
	for fd, ln := range l.listeners {
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		ln.f.Close()
		ln.ln.Close()
	}
	l.mu.Lock()
	l.closed = true
	unix.Close(l.wakefd)
	l.mu.Unlock()
	l.epFile.Close()
}

func epollWaitRaw(epfd int, events []unix.EpollEvent) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	return int(r), e
}

// RawRead and RawWrite are read(2) and write(2) on a non-blocking socket, for
// Watchers: like the loop's own, they skip the scheduler's syscall
// bookkeeping, which costs microseconds per call and is not needed for a call
// that never blocks.
func RawRead(fd int, p []byte) (int, syscall.Errno) { return rawRead(fd, p) }

// RawWrite: see RawRead.
func RawWrite(fd int, p []byte) (int, syscall.Errno) { return rawWrite(fd, p) }

// rawRead and rawWrite are read(2) and write(2) without the scheduler's
// entersyscall/exitsyscall: the sockets are non-blocking, so they never block.
func rawRead(fd int, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}

func rawWrite(fd int, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}
