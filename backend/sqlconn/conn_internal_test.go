package sqlconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
)

// The tests drive Conn through a real sqlpool.Pool and evloop.Loop with a
// protocol of their own, echo, over a socket pair: a request is its SQL
// framed by a 4-byte big-endian length; the server (a goroutine on the far
// end) answers each with a frame, the query's one cell.

// echoExp is echo's awaited answer.
type echoExp struct{ Await }

func (e *echoExp) Head() *Await { return &e.Await }

// echoConn is echo's sqlpool.ServerConn.
type echoConn struct {
	Conn[echoExp, *echoExp]
	drv     *echoDriver
	flushed chan bool // after each Flush: whether it waits for the socket to take more
}

func (c *echoConn) Attach(pc *sqlpool.Conn) { c.Start(pc, c.drv.pool.Loop(), c) }
func (c *echoConn) String() string          { return "echo" }
func (c *echoConn) Close()                  { c.CloseSocket([]byte{0, 0, 0, 0}) }

// Flush implements evloop.Flusher over Conn.Flush, to report wantOut.
func (c *echoConn) Flush() {
	c.Conn.Flush()
	select {
	case c.flushed <- c.wantOut:
	default:
	}
}

func (c *echoConn) WriteRequest(r *sqlpool.Request) {
	switch r.Kind {
	case sqlpool.KindQuery, sqlpool.KindExec:
		if r.SQL == "local" {
			c.Local(r, tether.Errorf(tether.CodeBadRequest, "answered locally"))
			return
		}
		c.Out = binary.BigEndian.AppendUint32(c.Out, uint32(len(r.SQL)))
		c.Out = append(c.Out, r.SQL...)
		c.Exp = append(c.Exp, echoExp{Await{R: r, Last: true}})
	default:
		c.Local(r, nil)
	}
}

func (c *echoConn) Parse() {
	for !c.Closed() {
		b := c.Peek(4)
		if b == nil {
			return
		}
		m, whole := c.Take(4 + int(binary.BigEndian.Uint32(b)))
		if !whole {
			return
		}
		r := c.Exp[0].R
		if r.Kind == sqlpool.KindQuery {
			r.Sink.Columns(1)
			r.Sink.Column([]byte("v"))
			r.Sink.BeginRow()
			r.Sink.Bytes(m[4:])
			r.Sink.EndRow()
		}
		c.Pop()
		c.Finish(r)
		c.DrainLocal()
	}
}

// echoDriver dials echo connections whose server reads nothing until open
// is closed (when gated), says on got each request it read, answers "hang"
// never, "big:N" with N bytes, anything else with itself.
type echoDriver struct {
	pool   *sqlpool.Pool
	gated  bool
	open   chan struct{}
	got    chan string
	sndbuf int // the socket buffers' size, when set
	// tls: the connection runs TLS (AdoptTLS) to a crypto/tls server;
	// burst: that server sends its answers to every burst requests in
	// one write (many records in one read of the socket).
	tls     bool
	burst   bool
	onServe func(io.ReadWriter) // given the server's end, when set

	mu    sync.Mutex
	conns []*echoConn
	peers []int
}

func (d *echoDriver) Name() string { return "echo" }

func (d *echoDriver) Dial(ctx context.Context) (sqlpool.ServerConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	if d.sndbuf > 0 {
		syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF, d.sndbuf)
		syscall.SetsockoptInt(fds[1], syscall.SOL_SOCKET, syscall.SO_RCVBUF, d.sndbuf)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		return nil, err
	}
	c := &echoConn{drv: d, flushed: make(chan bool, 1024)}
	var rw io.ReadWriter = fdReader(fds[1])
	var flush func()
	if d.tls {
		var err error
		if rw, flush, err = tlsPair(ctx, c, fds, d.burst); err != nil {
			return nil, err
		}
		syscall.Close(fds[0]) // the client works on its own duplicate (AdoptTLS)
	} else {
		c.Adopt(fds[0])
	}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.peers = append(d.peers, fds[1])
	d.mu.Unlock()
	if d.onServe != nil {
		d.onServe(rw)
	}
	go d.serve(rw, flush)
	return c, nil
}

// serve answers the requests read from f; flush, when set, after each
// answer.
func (d *echoDriver) serve(f io.ReadWriter, flush func()) {
	if d.gated {
		<-d.open
	}
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(f, hdr[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(f, req); err != nil {
			return
		}
		if d.got != nil {
			d.got <- string(req)
		}
		switch {
		case string(req) == "hang":
			continue
		case strings.HasPrefix(string(req), "big:"):
			var n int
			fmt.Sscanf(string(req), "big:%d", &n)
			req = bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		}
		ans := append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...)
		piece := len(ans)
		if strings.HasPrefix(string(req), "split:") {
			piece = 3 // over TLS, a record each
		}
		for len(ans) > 0 {
			n := min(piece, len(ans))
			if _, err := f.Write(ans[:n]); err != nil {
				return
			}
			ans = ans[n:]
		}
		if flush != nil {
			flush()
		}
	}
}

// fdReader reads and writes a blocking fd.
type fdReader int

func (f fdReader) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(int(f), p[done:])
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

func (f fdReader) Read(p []byte) (int, error) {
	n, err := syscall.Read(int(f), p)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	if n < 0 {
		n = 0
	}
	return n, err
}

func (d *echoDriver) Cancel(ctx context.Context, c sqlpool.ServerConn) error    { return nil }
func (d *echoDriver) Terminate(ctx context.Context, c sqlpool.ServerConn) error { return nil }
func (d *echoDriver) Close() error                                              { return nil }

// openEcho opens a pool of one echo connection and returns it with the
// connection and the server's end of its socket.
func openEcho(t *testing.T, d *echoDriver) (*sqlpool.Pool, *echoConn, int) {
	t.Helper()
	d.open = make(chan struct{})
	cfg := tether.DefaultBackendConfig("echo", "")
	cfg.MinConns, cfg.MaxConns = 1, 1
	d.pool = sqlpool.New(d, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.pool.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-d.open:
		default:
			close(d.open)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.pool.Close(ctx)
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, fd := range d.peers {
			syscall.Shutdown(fd, syscall.SHUT_RDWR) // the server's goroutine returns
		}
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) != 1 {
		t.Fatalf("%d connections dialled, want 1", len(d.conns))
	}
	return d.pool, d.conns[0], d.peers[0]
}

// onLoop runs fn on the pool's loop and waits for it.
func onLoop(t *testing.T, p *sqlpool.Pool, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := p.Loop().Post(func() { fn(); close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done
}

func query(p *sqlpool.Pool, sql string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Query(ctx, tether.Statement{SQL: sql})
	if err != nil {
		return nil, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return nil, fmt.Errorf("rows %v, want one of one cell", res.Rows)
	}
	b, _ := res.Rows[0][0].([]byte)
	return b, nil
}

// TestConn_PendingWritesFlushedOnWritable: a request larger than the socket
// takes is written in part, the rest once the socket is writable again,
// whole; then the connection stops polling for writability.
func TestConn_PendingWritesFlushedOnWritable(t *testing.T) {
	eachTransport(t, func(t *testing.T, withTLS bool) {
		d := &echoDriver{gated: true, sndbuf: 4096, tls: withTLS}
		p, c, _ := openEcho(t, d)
		big := bytes.Repeat([]byte("0123456789"), 100_000)
		type answer struct {
			b   []byte
			err error
		}
		res := make(chan answer, 1)
		go func() {
			b, err := query(p, string(big))
			res <- answer{b, err}
		}()
		// The server reads nothing yet: the flush stops short and waits.
		if w := <-c.flushed; !w {
			t.Fatal("the first flush wrote 1 MB into a socket nobody reads: the test did not fill it")
		}
		close(d.open)
		a := <-res
		if a.err != nil {
			t.Fatal(a.err)
		}
		if !bytes.Equal(a.b, big) {
			t.Fatalf("echoed %d bytes, want the %d sent", len(a.b), len(big))
		}
		var wantOut bool
		var pending int
		onLoop(t, p, func() {
			wantOut, pending = c.wantOut, len(c.Out)-c.wpos
			if c.ts != nil {
				pending += len(c.ts.out) - c.ts.opos
			}
		})
		if wantOut || pending != 0 {
			t.Errorf("after the answer: polling for writability %v, %d bytes unwritten; want false, 0", wantOut, pending)
		}
	})
}

// eachTransport runs test over a plain socket and over TLS.
func eachTransport(t *testing.T, test func(t *testing.T, withTLS bool)) {
	t.Run("Plain", func(t *testing.T) { test(t, false) })
	t.Run("TLS", func(t *testing.T) { test(t, true) })
}

// TestConn_ReadBufferGrowsAcrossReads: an answer many reads long grows the
// input buffer until it holds it whole; a buffer grown past keepBufSize is
// dropped once parsed, a smaller one kept.
func TestConn_ReadBufferGrowsAcrossReads(t *testing.T) {
	eachTransport(t, func(t *testing.T, withTLS bool) {
		d := &echoDriver{tls: withTLS}
		p, c, _ := openEcho(t, d)
		for _, tc := range []struct {
			n    int
			kept bool
		}{{100, true}, {200_000, true}, {3 << 20, false}, {10, true}} {
			b, err := query(p, fmt.Sprintf("big:%d", tc.n))
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.Repeat([]byte("0123456789abcdef"), tc.n/16+1)[:tc.n]
			if !bytes.Equal(b, want) {
				t.Fatalf("big:%d: got %d bytes, not the %d sent", tc.n, len(b), tc.n)
			}
			var size, rpos, rlen int
			onLoop(t, p, func() { size, rpos, rlen = len(c.in), c.rpos, c.rlen })
			if rpos != 0 || rlen != 0 {
				t.Errorf("big:%d: input at %d..%d once parsed, want rewound", tc.n, rpos, rlen)
			}
			switch {
			case tc.kept && size < 4+tc.n:
				t.Errorf("big:%d: buffer of %d bytes, too small for the answer it held", tc.n, size)
			case !tc.kept && size != 0:
				t.Errorf("big:%d: buffer of %d bytes kept, want it dropped past %d", tc.n, size, keepBufSize)
			}
		}
	})
}

// TestConn_CloseFailsRequestsInFlight: the server's end of the stream with
// a request in flight fails the connection, and the request with it (not
// safe to retry: it may have run).
func TestConn_CloseFailsRequestsInFlight(t *testing.T) {
	eachTransport(t, func(t *testing.T, withTLS bool) {
		d := &echoDriver{got: make(chan string, 1), tls: withTLS}
		p, c, peer := openEcho(t, d)
		errc := make(chan error, 1)
		go func() {
			_, err := query(p, "hang")
			errc <- err
		}()
		if got := <-d.got; got != "hang" {
			t.Fatalf("server read %q", got)
		}
		syscall.Shutdown(peer, syscall.SHUT_RDWR)
		err := <-errc
		if err == nil || !strings.Contains(err.Error(), "connection lost: EOF") {
			t.Fatalf("query on a connection the server closed: %v, want connection lost: EOF", err)
		}
		var closed bool
		onLoop(t, p, func() { closed = c.Closed() })
		if !closed {
			t.Error("the connection the server closed is still open")
		}
	})
}

// TestConn_LocalAnsweredInTurn: a request tetherd answers itself gets its
// error, and the connection goes on serving.
func TestConn_LocalAnsweredInTurn(t *testing.T) {
	eachTransport(t, func(t *testing.T, withTLS bool) {
		p, _, _ := openEcho(t, &echoDriver{tls: withTLS})
		if _, err := query(p, "local"); err == nil || !strings.Contains(err.Error(), "answered locally") {
			t.Fatalf("local: %v, want answered locally", err)
		}
		if b, err := query(p, "after"); err != nil || string(b) != "after" {
			t.Fatalf("after a local answer: %q, %v", b, err)
		}
	})
}
