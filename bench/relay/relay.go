package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"
)

// ErrNotTCP is what a Relay reports for a connection that is not a *net.TCPConn (it needs CloseWrite).
var ErrNotTCP = errors.New("not a TCP connection")

// chunkSize is the largest read, hence the largest chunk; queueLen is how many chunks a direction holds in
// flight before its reader waits (32 KiB x 256 = 8 MiB a direction: far more than a delay of 1 ms needs).
const (
	chunkSize = 32 << 10
	queueLen  = 256
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// Relay forwards TCP connections to Target, delivering each chunk Delay after the relay read it, in each
// direction: a pipe of constant latency whose bandwidth it does not limit.
//
// For every accepted connection it:
//  1. dials Target (on failure it logs and closes the client's connection);
//  2. runs, per direction, a reader that stamps each chunk with its deadline (read time + Delay) and queues it,
//     and a sender that writes each chunk at its deadline (deadlineTimer: a timerfd and a short spin), in
//     order;
//  3. on EOF from one side, closes the other side's write half once the chunks before the EOF are delivered
//     (the EOF is delayed too);
//  4. on a read or write error in either direction, logs it and closes both connections;
//  5. once both directions have delivered their EOF, closes both connections.
type Relay struct {
	Target string
	Delay  time.Duration
	Log    *log.Logger // nil: log.Default()
	Stats  Stats

	mu       sync.Mutex
	sessions map[*session]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Serve accepts connections on ln and relays them until ctx is done or ln fails; then it closes ln and every
// connection it relays and returns once their goroutines have ended. It returns nil after ctx is done, and the
// accept error otherwise.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		var c net.Conn
		c, err = ln.Accept()
		if err != nil {
			break
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(ctx, c)
		}()
	}
	ln.Close()
	r.closeAll()
	r.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
}

func (r *Relay) logf(format string, args ...any) {
	l := r.Log
	if l == nil {
		l = log.Default()
	}
	l.Printf(format, args...)
}

// handle relays one accepted connection until both directions end.
func (r *Relay) handle(ctx context.Context, client net.Conn) {
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(ctx, "tcp", r.Target)
	if err != nil {
		r.logf("relay: client %s: dial target %s: %v (closing the client)", client.RemoteAddr(), r.Target, err)
		client.Close()
		return
	}
	ct, ok1 := client.(*net.TCPConn)
	st, ok2 := server.(*net.TCPConn)
	if !ok1 || !ok2 {
		r.logf("relay: client %s: %v", client.RemoteAddr(), ErrNotTCP)
		client.Close()
		server.Close()
		return
	}
	s := &session{relay: r, client: ct, server: st, done: make(chan struct{})}
	s.name = fmt.Sprintf("%s -> %s", client.RemoteAddr(), r.Target)
	if !r.add(s) {
		s.abort()
		return
	}
	defer r.remove(s)

	var wg sync.WaitGroup
	up := &pipe{s: s, dir: "client to target", src: ct, dst: st}
	down := &pipe{s: s, dir: "target to client", src: st, dst: ct}
	for _, p := range []*pipe{up, down} {
		p.queue = make(chan chunk, queueLen)
		wg.Add(2)
		go func() { defer wg.Done(); p.read() }()
		go func() { defer wg.Done(); p.send() }()
	}
	wg.Wait()
	ct.Close()
	st.Close()
}

func (r *Relay) add(s *session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.sessions == nil {
		r.sessions = make(map[*session]struct{})
	}
	r.sessions[s] = struct{}{}
	return true
}

func (r *Relay) remove(s *session) {
	r.mu.Lock()
	delete(r.sessions, s)
	r.mu.Unlock()
}

// closeAll aborts every session and refuses new ones.
func (r *Relay) closeAll() {
	r.mu.Lock()
	r.closed = true
	ss := make([]*session, 0, len(r.sessions))
	for s := range r.sessions {
		ss = append(ss, s)
	}
	r.mu.Unlock()
	for _, s := range ss {
		s.abort()
	}
}

// session is one relayed connection: the client's and the target's sockets.
type session struct {
	relay          *Relay
	name           string
	client, server *net.TCPConn
	once           sync.Once
	done           chan struct{} // closed by abort
}

// abort closes both sockets at once, dropping whatever is still queued; it is idempotent.
func (s *session) abort() {
	s.once.Do(func() {
		close(s.done)
		s.client.Close()
		s.server.Close()
	})
}

func (s *session) aborted() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// chunk is a read's bytes and the time they are due at the other side; a chunk with err set ends its direction
// (io.EOF: close the write half; anything else: abort the session).
type chunk struct {
	due time.Time
	buf *[]byte
	n   int
	err error
}

// pipe is one direction of a session.
type pipe struct {
	s        *session
	dir      string
	src, dst *net.TCPConn
	queue    chan chunk
}

// read reads src into chunks stamped with their deadline and queues them until src ends or the session aborts.
func (p *pipe) read() {
	delay := p.s.relay.Delay
	for {
		bp := bufPool.Get().(*[]byte)
		n, err := p.src.Read(*bp)
		due := time.Now().Add(delay)
		if n > 0 {
			select {
			case p.queue <- chunk{due: due, buf: bp, n: n}:
			case <-p.s.done:
				return
			}
		} else {
			bufPool.Put(bp)
		}
		if err != nil {
			select {
			case p.queue <- chunk{due: due, err: err}:
			case <-p.s.done:
			}
			return
		}
	}
}

// send writes each queued chunk to dst at its deadline, until the direction ends or the session aborts.
func (p *pipe) send() {
	st := &p.s.relay.Stats
	timer, err := newDeadlineTimer()
	if err != nil {
		p.s.relay.logf("relay: %s: %s: %v (closing both)", p.s.name, p.dir, err)
		p.s.abort()
		return
	}
	defer timer.Close()
	for {
		var c chunk
		select {
		case c = <-p.queue:
		case <-p.s.done:
			return
		}
		timer.sleepUntil(c.due)
		if c.err == nil {
			st.Late.record(time.Since(c.due))
			_, err := p.dst.Write((*c.buf)[:c.n])
			bufPool.Put(c.buf)
			if err != nil {
				if !p.s.aborted() {
					p.s.relay.logf("relay: %s: %s: write: %v (closing both)", p.s.name, p.dir, err)
				}
				p.s.abort()
				return
			}
			st.Chunks.Add(1)
			st.Bytes.Add(int64(c.n))
			continue
		}
		if errors.Is(c.err, io.EOF) {
			if err := p.dst.CloseWrite(); err != nil && !p.s.aborted() {
				p.s.relay.logf("relay: %s: %s: close write: %v (closing both)", p.s.name, p.dir, err)
				p.s.abort()
			}
			return
		}
		if !p.s.aborted() {
			p.s.relay.logf("relay: %s: %s: read: %v (closing both)", p.s.name, p.dir, c.err)
		}
		p.s.abort()
		return
	}
}
