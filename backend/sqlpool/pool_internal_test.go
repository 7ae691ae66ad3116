package sqlpool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/internal/fault"
)

// fakeDriver is an in-process SQL server for fault injection: each
// connection is a socket pair whose far end answers every line written to it
// with "ok". A statement whose SQL contains "send-boom" makes the
// connection's Send panic.
type fakeDriver struct {
	mu      sync.Mutex
	fds     []int // the pool-side descriptor of each connection dialed
	conns   []*fakeConn
	peers   []int
	release chan struct{} // Terminate blocks until it is closed
	dials   atomic.Int64
}

func newFakeDriver(t *testing.T) *fakeDriver {
	d := &fakeDriver{release: make(chan struct{})}
	t.Cleanup(func() {
		close(d.release)
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, fd := range d.peers {
			syscall.Close(fd) // the server side ends: its goroutine returns
		}
	})
	return d
}

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Dial(ctx context.Context) (ServerConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		return nil, err
	}
	c := &fakeConn{fd: fds[0], id: d.dials.Add(1)}
	d.mu.Lock()
	d.fds = append(d.fds, fds[0])
	d.conns = append(d.conns, c)
	d.peers = append(d.peers, fds[1])
	d.mu.Unlock()
	go serveFake(fds[1])
	return c, nil
}

// serveFake answers each line read from fd with "ok\n", until the socket
// ends. The descriptor is left open (closed at the test's end), so that
// descriptor numbers change only when the pool's side closes.
func serveFake(fd int) {
	var b [4096]byte
	for {
		n, err := syscall.Read(fd, b[:])
		if n <= 0 || err != nil {
			return
		}
		for i := 0; i < bytes.Count(b[:n], []byte("\n")); i++ {
			syscall.Write(fd, []byte("ok\n"))
		}
	}
}

func (d *fakeDriver) Cancel(context.Context, ServerConn) error { return nil }

// Terminate stays unconfirmed until the test ends: the connection stays in
// stateClosing, its descriptor closed.
func (d *fakeDriver) Terminate(ctx context.Context, _ ServerConn) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.release:
		return nil
	}
}

func (d *fakeDriver) Close() error { return nil }

type fakeConn struct {
	fd     int
	id     int64
	pool   *Conn
	sent   []*Request
	in     []byte
	closed atomic.Bool // set on the loop goroutine, read by the test
}

func (c *fakeConn) Fd() int         { return c.fd }
func (c *fakeConn) Attach(pc *Conn) { c.pool = pc }
func (c *fakeConn) String() string  { return fmt.Sprintf("fake conn %d", c.id) }
func (c *fakeConn) OnWritable()     {}
func (c *fakeConn) Close() {
	if !c.closed.Swap(true) {
		syscall.Close(c.fd)
	}
}

func (c *fakeConn) Send(r *Request) {
	if strings.Contains(r.SQL, "send-boom") {
		panic("injected: send-boom")
	}
	c.sent = append(c.sent, r)
	evloop.RawWrite(c.fd, []byte(r.Kind.String()+" "+r.SQL+"\n"))
}

func (c *fakeConn) OnReadable() {
	var b [4096]byte
	n, errno := evloop.RawRead(c.fd, b[:])
	if errno == syscall.EAGAIN {
		return
	}
	if n <= 0 || errno != 0 {
		c.pool.Fail(errors.New("fake server hung up"))
		return
	}
	c.in = append(c.in, b[:n]...)
	for {
		i := bytes.IndexByte(c.in, '\n')
		if i < 0 {
			return
		}
		c.in = c.in[i+1:]
		r := c.sent[0]
		c.sent = c.sent[1:]
		if strings.Contains(r.SQL, "out-of-order") {
			r = &Request{Kind: KindQuery, SQL: "a request never sent"} // a protocol bug: the pool panics
		}
		if r.Tx != nil || r.Kind == KindBegin {
			r.Report = &Report{InTx: r.Kind != KindCommit && r.Kind != KindRollback}
		}
		c.pool.Done(r)
	}
}

func fakeConfig(minConns, maxConns int) tether.BackendConfig {
	cfg := tether.DefaultBackendConfig("fake", "")
	cfg.MinConns, cfg.MaxConns = minConns, maxConns
	return cfg
}

func startLoop(t *testing.T) *evloop.Loop {
	t.Helper()
	l, err := evloop.New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	go l.Run()
	t.Cleanup(func() { l.Stop(); <-l.Done() })
	return l
}

func openPool(t *testing.T, l *evloop.Loop, d *fakeDriver, cfg tether.BackendConfig) *Pool {
	t.Helper()
	p := New(d, cfg)
	p.UseLoop(l)
	if err := p.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func exec(p *Pool, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.Exec(ctx, tether.Statement{SQL: sql})
	return err
}

// TestPool_CloseLeavesAReusedDescriptorWatched: a pool closed past its
// deadline with a connection still being terminated (its socket closed, the
// server's confirmation awaited) must not unwatch that connection's old
// descriptor number: a reload's new pool on the same loop may have a
// connection on that number now, which would never be read again (its
// requests hang until their deadline). The test makes the number be reused.
func TestPool_CloseLeavesAReusedDescriptorWatched(t *testing.T) {
	l := startLoop(t)
	oldDrv, newDrv := newFakeDriver(t), newFakeDriver(t)
	old := openPool(t, l, oldDrv, fakeConfig(1, 1))
	if err := exec(old, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// Its only connection is terminated: socket closed, slot held until the
	// server confirms, which it does not.
	old.post(func() {
		c := old.takeIdle(nil)
		old.move(c, stateCancelling)
		old.terminate(c, "test: a cancel that did not take")
	})
	reused := oldDrv.fds[0]
	next := openPool(t, l, newDrv, fakeConfig(1, 1))
	if newDrv.fds[0] != reused {
		t.Fatalf("the new pool's connection has fd %d, not the terminated one's %d: the test needs the number reused", newDrv.fds[0], reused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	old.Close(ctx) // past its deadline with the terminated connection still there
	if err := exec(next, "SELECT 2"); err != nil {
		t.Fatalf("a statement on the new pool's connection (fd %d, reused) after the old pool closed: %v", reused, err)
	}
	watched := false
	next.post(func() {
		for _, c := range next.liveConns() {
			watched = c.watched && c.fd == reused
		}
	})
	if !watched {
		t.Error("the new pool's connection is not marked watched")
	}
}

// TestPool_DoAfterLoopStopped: a Go call on a pool whose loop has stopped
// returns ErrPoolClosed at once; it used to post to a loop that dropped the
// function, and wait forever.
func TestPool_DoAfterLoopStopped(t *testing.T) {
	l, err := evloop.New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	go l.Run()
	p := New(newFakeDriver(t), fakeConfig(1, 1))
	p.UseLoop(l)
	if err := p.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Stop()
	<-l.Done()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := p.Exec(ctx, tether.Statement{SQL: "SELECT 1"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPoolClosed) {
			t.Fatalf("Exec after the loop stopped: %v, want ErrPoolClosed", err)
		}
		if te := tether.AsError(err); te.Code != tether.CodeUnavailable {
			t.Errorf("code %s, want unavailable", te.Code)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Exec after the loop stopped did not return within 2 s")
	}
	closed := make(chan struct{})
	go func() { p.Close(context.Background()); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close after the loop stopped did not return within 2 s")
	}
}

// TestPool_PanicDropsTheConnection: a panic in a connection's protocol code
// (reading the server's answer, writing a request, answering a request out
// of order, on which the pool itself panics) answers the requests on
// that connection internal, closes the connection and frees its slot (the
// next request gets a new one), rolls back a transaction pinned to it, and
// leaves every other connection serving.
func TestPool_PanicDropsTheConnection(t *testing.T) {
	l := startLoop(t)
	d := newFakeDriver(t)
	p := openPool(t, l, d, fakeConfig(1, 4))
	restore := fault.Set(func(pt fault.Point, detail string) {
		if pt == fault.SQLConnRead && strings.Contains(detail, "read-boom") {
			panic("injected: read-boom")
		}
	})
	defer restore()
	var before []tether.PanicStats = tether.Panics()

	// Bystanders keep the pool's other connections busy meanwhile.
	stop := make(chan struct{})
	var bystanderErrs, bystanderOK atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := exec(p, "SELECT bystander"); err != nil {
					bystanderErrs.Add(1)
					t.Errorf("bystander: %v", err)
				} else {
					bystanderOK.Add(1)
				}
			}
		}()
	}

	for _, sql := range []string{"SELECT read-boom", "SELECT send-boom", "SELECT out-of-order"} {
		t.Run(sql, func(t *testing.T) {
			err := exec(p, sql)
			if !errors.Is(err, tether.ErrPanic) || tether.AsError(err).Code != tether.CodeInternal {
				t.Fatalf("%s: %v, want an internal error from the panic", sql, err)
			}
			var victim *fakeConn
			d.mu.Lock()
			for _, c := range d.conns {
				if c.closed.Load() && victim == nil {
					victim = c
				}
			}
			d.mu.Unlock()
			if victim == nil {
				t.Fatal("no connection was closed after the panic")
			}
			for i := 0; i < 20; i++ {
				if err := exec(p, "SELECT after"); err != nil {
					t.Fatal(err)
				}
			}
			inPool := false
			p.post(func() {
				for _, c := range p.liveConns() {
					if c.srv == ServerConn(victim) {
						inPool = true
					}
				}
			})
			if inPool {
				t.Error("the connection that panicked is still in the pool")
			}
			// Mark it seen so the next subtest finds its own victim.
			d.mu.Lock()
			for i, c := range d.conns {
				if c == victim {
					d.conns = append(d.conns[:i:i], d.conns[i+1:]...)
					break
				}
			}
			d.mu.Unlock()
		})
	}

	t.Run("InTransaction", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, tether.Statement{SQL: "UPDATE t SET read-boom"}); !errors.Is(err, tether.ErrPanic) {
			t.Fatalf("statement that panicked in a transaction: %v, want internal", err)
		}
		_, err = tx.Exec(ctx, tether.Statement{SQL: "UPDATE t SET x = 1"})
		if te := tether.AsError(err); err == nil || te.Code != tether.CodeTxAborted {
			t.Fatalf("next statement of the transaction: %v, want tx_aborted", err)
		}
	})
	close(stop)
	wg.Wait()
	if bystanderErrs.Load() > 0 || bystanderOK.Load() == 0 {
		t.Errorf("bystanders: %d ok, %d errors; want 0 errors", bystanderOK.Load(), bystanderErrs.Load())
	}
	got := map[string]uint64{}
	for _, s := range tether.Panics() {
		if s.Backend == "fake" {
			got[s.Op] += s.Count
		}
	}
	for _, s := range before {
		if s.Backend == "fake" {
			got[s.Op] -= s.Count
		}
	}
	if got["conn_read"] != 3 || got["conn_send"] != 1 {
		t.Errorf("panics counted: %v, want conn_read 3 (one in a transaction, one out of order), conn_send 1", got)
	}
}
