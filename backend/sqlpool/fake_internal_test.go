package sqlpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// The pool's unit tests run against scriptDriver, a fake SQL server whose
// every step the test takes: it answers a request when the test says so,
// and each Cancel and Terminate waits for the test's reply. No database, no
// sleeps: a test waits for the event it needs (a request sent, a Cancel
// asked, a request answered). Run them with -run Fake.

func init() {
	// A move the state table forbids fails the package's tests (move).
	panicOnIllegalMove.Store(true)
}

// scriptDriver is a Driver whose connections answer only when the test says.
type scriptDriver struct {
	mu    sync.Mutex
	conns []*scriptConn
	peers []int
	dials atomic.Int64
	// Each Cancel and Terminate sends a call here and returns what the test
	// replies (or its context's error).
	cancels chan *call
	terms   chan *call
	dialed  chan *scriptConn // every connection dialed
}

// call is one Cancel or Terminate waiting for the test's reply.
type call struct {
	conn  *scriptConn
	reply chan error
}

func newScriptDriver(t *testing.T) *scriptDriver {
	d := &scriptDriver{cancels: make(chan *call), terms: make(chan *call), dialed: make(chan *scriptConn, 64)}
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, fd := range d.peers {
			syscall.Close(fd)
		}
	})
	return d
}

func (d *scriptDriver) Name() string { return "fake" }

func (d *scriptDriver) Dial(ctx context.Context) (ServerConn, error) {
	// A real descriptor for the loop to poll; its peer never writes, so the
	// loop never calls OnReadable: the test answers instead.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		return nil, err
	}
	c := &scriptConn{fd: fds[0], id: d.dials.Add(1), sends: make(chan *Request, 256)}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.peers = append(d.peers, fds[1])
	d.mu.Unlock()
	d.dialed <- c
	return c, nil
}

func (d *scriptDriver) ask(ctx context.Context, ch chan *call, c ServerConn) error {
	k := &call{conn: c.(*scriptConn), reply: make(chan error, 1)}
	select {
	case ch <- k:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-k.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *scriptDriver) Cancel(ctx context.Context, c ServerConn) error {
	return d.ask(ctx, d.cancels, c)
}

func (d *scriptDriver) Terminate(ctx context.Context, c ServerConn) error {
	return d.ask(ctx, d.terms, c)
}

func (d *scriptDriver) Close() error { return nil }

func (d *scriptDriver) conn(i int) *scriptConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[i]
}

// scriptConn is one connection of a scriptDriver.
type scriptConn struct {
	fd     int
	id     int64
	pc     *Conn
	sent   []*Request    // loop goroutine only
	sends  chan *Request // every request sent, for the test to wait on
	closed atomic.Bool
	// auto answers (posted, as if read from the socket) the requests it
	// returns true for; the test answers the others. Set before Open.
	auto func(*Request) bool
}

func (c *scriptConn) Fd() int         { return c.fd }
func (c *scriptConn) Attach(pc *Conn) { c.pc = pc }
func (c *scriptConn) String() string  { return fmt.Sprintf("script conn %d", c.id) }
func (c *scriptConn) OnReadable()     {}
func (c *scriptConn) OnWritable()     {}
func (c *scriptConn) Close() {
	if !c.closed.Swap(true) {
		syscall.Close(c.fd)
	}
}

func (c *scriptConn) Send(r *Request) {
	c.sent = append(c.sent, r)
	if c.auto != nil && c.auto(r) {
		// Posted before the test hears of the send: what the test posts
		// next runs after this answer.
		c.pc.pool.loop.Post(func() { c.answer(nil) })
	}
	c.sends <- r
}

// answer answers the oldest request sent, with err. Loop goroutine.
func (c *scriptConn) answer(err error) {
	if c.closed.Load() || len(c.sent) == 0 {
		return
	}
	r := c.sent[0]
	c.sent = c.sent[1:]
	if err != nil {
		r.Err = err
	}
	if r.Tx != nil || r.Kind == KindBegin {
		r.Report = &Report{InTx: r.Err == nil && r.Kind != KindCommit && r.Kind != KindRollback}
	}
	c.pc.Done(r)
}

// probesOK answers the pool's own probes, resets and rollbacks at once.
func probesOK(r *Request) bool {
	return r.Kind == KindProbe || r.Kind == KindReset || r.Kind == KindRollback
}

// harness is one pool on its own loop, over a scriptDriver.
type harness struct {
	t *testing.T
	p *Pool
	d *scriptDriver
}

// openScripted opens a pool of minConns connections (at most maxConns),
// whose connections answer auto's requests by themselves.
func openScripted(t *testing.T, minConns, maxConns int, auto func(*Request) bool) *harness {
	t.Helper()
	d := newScriptDriver(t)
	cfg := tether.DefaultBackendConfig("fake", "")
	cfg.MinConns, cfg.MaxConns = minConns, maxConns
	p := New(&autoDriver{d, auto}, cfg)
	h := &harness{t: t, p: p, d: d}
	if err := p.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range max(minConns, 1) {
		<-d.dialed
	}
	t.Cleanup(func() {
		h.checkLists()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return h
}

// autoDriver sets auto on each connection dialed.
type autoDriver struct {
	*scriptDriver
	auto func(*Request) bool
}

func (d *autoDriver) Dial(ctx context.Context) (ServerConn, error) {
	s, err := d.scriptDriver.Dial(ctx)
	if err == nil {
		s.(*scriptConn).auto = d.auto
	}
	return s, err
}

// on runs fn on the pool's loop and waits for it.
func (h *harness) on(fn func()) {
	h.t.Helper()
	if err := h.p.post(fn); err != nil {
		h.t.Fatal(err)
	}
}

// submit submits a request of kind on the loop; its channel is closed once
// it is answered.
func (h *harness) submit(r *Request) <-chan struct{} {
	h.t.Helper()
	done := make(chan struct{})
	r.Done = func(*Request) { close(done) }
	h.on(func() { h.p.Submit(r) })
	return done
}

// answer makes c answer its oldest request, with err.
func (h *harness) answer(c *scriptConn, err error) {
	h.t.Helper()
	h.on(func() { c.answer(err) })
}

// stateOf returns c's state in the pool.
func (h *harness) stateOf(c *scriptConn) state {
	var s state
	h.on(func() { s = c.pc.state })
	return s
}

// checkLists fails the test unless every connection is in the list of its
// state at its slot, the live count matches the lists, and no move was
// refused.
func (h *harness) checkLists() {
	h.t.Helper()
	h.p.post(func() { checkLists(h.t, h.p) })
}

func checkLists(t *testing.T, p *Pool) {
	t.Helper()
	n := 0
	for s := stateNew; s < numStates; s++ {
		for i, c := range p.conns[s] {
			if c.state != s || c.slot != i {
				t.Errorf("conns[%s][%d] is in state %s at slot %d", s, i, c.state, c.slot)
			}
		}
		if s != stateNew && s != stateGone {
			n += len(p.conns[s])
		} else if len(p.conns[s]) > 0 {
			t.Errorf("%d connections listed as %s", len(p.conns[s]), s)
		}
	}
	if n != p.live {
		t.Errorf("live %d, lists hold %d", p.live, n)
	}
	if k := p.stIllegalMoves.Load(); k != 0 {
		t.Errorf("%d illegal moves", k)
	}
}

// wait returns the next value of ch; the time limit only stops a broken test
// from hanging, it synchronises nothing.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5 s", what)
		panic("unreachable")
	}
}

// TestFake_AcquireWaitWokenByRelease: a request that finds every connection
// busy waits in the queue, and the answer that frees a connection hands it
// over at once: no timer, no poll.
func TestFake_AcquireWaitWokenByRelease(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	c := h.d.conn(0)
	first := &Request{Kind: KindQuery, SQL: "SELECT 1"}
	done1 := h.submit(first)
	wait(t, c.sends, "first request sent")
	second := &Request{Kind: KindQuery, SQL: "SELECT 2"}
	done2 := h.submit(second)
	h.on(func() {
		if n := h.p.waiting.len(); n != 1 {
			t.Errorf("%d requests waiting, want the second", n)
		}
		if len(h.p.conns[stateBusy]) != 1 || len(h.p.conns[stateIdle]) != 0 {
			t.Errorf("busy %d, idle %d; want 1 and 0", len(h.p.conns[stateBusy]), len(h.p.conns[stateIdle]))
		}
	})
	h.answer(c, nil)
	wait(t, done1, "first answer")
	if r := wait(t, c.sends, "second request sent on the freed connection"); r != second {
		t.Fatalf("sent %v, want the waiting request", r)
	}
	if got := h.stateOf(c); got != stateBusy {
		t.Errorf("connection %s while running the second request, want busy", got)
	}
	h.answer(c, nil)
	wait(t, done2, "second answer")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("errors: %v, %v", first.Err, second.Err)
	}
	if got := h.stateOf(c); got != stateIdle {
		t.Errorf("connection %s once answered, want idle", got)
	}
	if h.d.dials.Load() != 1 {
		t.Errorf("%d dials, want 1 (max_conns 1)", h.d.dials.Load())
	}
}

// TestFake_TransactionPinsAndReleases: BEGIN pins the connection, a request
// of another client waits for it, and COMMIT frees it to that request.
func TestFake_TransactionPinsAndReleases(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	c := h.d.conn(0)
	begin := &Request{Kind: KindBegin}
	done := h.submit(begin)
	wait(t, c.sends, "BEGIN sent")
	h.answer(c, nil)
	wait(t, done, "BEGIN answered")
	if got := h.stateOf(c); got != statePinned || begin.NewTx == nil {
		t.Fatalf("after BEGIN: %s, tx %v; want pinned with a transaction", got, begin.NewTx)
	}
	other := &Request{Kind: KindQuery, SQL: "SELECT other"}
	doneOther := h.submit(other)
	commit := &Request{Kind: KindCommit, Tx: begin.NewTx}
	doneCommit := h.submit(commit)
	if r := wait(t, c.sends, "COMMIT sent"); r != commit {
		t.Fatalf("sent %v, want the COMMIT (the other request waits)", r)
	}
	h.answer(c, nil)
	wait(t, doneCommit, "COMMIT answered")
	if r := wait(t, c.sends, "the waiting request sent"); r != other {
		t.Fatalf("sent %v, want the waiting request", r)
	}
	h.answer(c, nil)
	wait(t, doneOther, "the waiting request answered")
	if commit.Err != nil || other.Err != nil {
		t.Fatalf("errors: %v, %v", commit.Err, other.Err)
	}
}

// TestFake_CancelRacesAnswer: a statement given up is cancelled on the
// server; its answer may come before the driver's Cancel returns or after.
// Either way the connection is probed only once both are back, then goes
// idle; the request is answered once, with the error it was given up with.
func TestFake_CancelRacesAnswer(t *testing.T) {
	gaveUp := errors.New("client gave up")

	t.Run("AnswerBeforeCancelReturns", func(t *testing.T) {
		h := openScripted(t, 1, 1, probesOK)
		c := h.d.conn(0)
		r := &Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)"}
		answered := 0
		var got error
		h.on(func() {
			r.Done = func(r *Request) { answered++; got = r.Err }
			h.p.Submit(r)
		})
		wait(t, c.sends, "statement sent")
		h.on(func() { h.p.Abandon(r, gaveUp) })
		k := wait(t, h.d.cancels, "Cancel")
		if got := h.stateOf(c); got != stateCancelling {
			t.Fatalf("connection %s while its statement is cancelled, want cancelling", got)
		}
		h.answer(c, errors.New("query interrupted")) // the answer, while Cancel runs
		h.on(func() {
			if len(c.sent) != 0 || c.pc.state != stateCancelling {
				t.Errorf("after the answer: %d in flight, %s; want 0, still cancelling (Cancel not back)", len(c.sent), c.pc.state)
			}
		})
		k.reply <- nil
		if p := wait(t, c.sends, "probe after the cancel"); p.Kind != KindProbe {
			t.Fatalf("sent %s after the cancel, want a probe", p.Kind)
		}
		h.on(func() {}) // the probe's answer was posted before this
		if got := h.stateOf(c); got != stateIdle {
			t.Errorf("connection %s after the probe, want idle", got)
		}
		if answered != 1 || got != gaveUp {
			t.Errorf("request answered %d times, err %v; want once, %v", answered, got, gaveUp)
		}
	})

	t.Run("AnswerAfterCancelReturns", func(t *testing.T) {
		h := openScripted(t, 1, 1, probesOK)
		c := h.d.conn(0)
		r := &Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)"}
		done := h.submit(r)
		wait(t, c.sends, "statement sent")
		h.on(func() { h.p.Abandon(r, gaveUp) })
		wait(t, done, "request answered when given up")
		// The server took the Cancel before the statement began: it still
		// runs, so another Cancel follows.
		wait(t, h.d.cancels, "Cancel").reply <- nil
		k := wait(t, h.d.cancels, "second Cancel, the statement still running")
		h.answer(c, errors.New("query interrupted"))
		select {
		case p := <-c.sends:
			t.Fatalf("%s sent before the second Cancel returned", p.Kind)
		default:
		}
		k.reply <- nil
		if p := wait(t, c.sends, "probe after the cancel"); p.Kind != KindProbe {
			t.Fatalf("sent %s after the cancel, want a probe", p.Kind)
		}
		h.on(func() {})
		if got := h.stateOf(c); got != stateIdle {
			t.Errorf("connection %s after the probe, want idle", got)
		}
		h.on(func() {
			if c.pc.kills != 2 {
				t.Errorf("%d Cancels, want 2", c.pc.kills)
			}
		})
	})

	t.Run("InTransaction", func(t *testing.T) {
		h := openScripted(t, 1, 1, probesOK)
		c := h.d.conn(0)
		begin := &Request{Kind: KindBegin}
		done := h.submit(begin)
		wait(t, c.sends, "BEGIN sent")
		h.answer(c, nil)
		wait(t, done, "BEGIN answered")
		r := &Request{Kind: KindExec, SQL: "UPDATE t SET x = SLEEP(10)", Tx: begin.NewTx}
		h.submit(r)
		wait(t, c.sends, "statement sent")
		h.on(func() { h.p.Abandon(r, gaveUp) })
		k := wait(t, h.d.cancels, "Cancel")
		if got := h.stateOf(c); got != stateCancelling {
			t.Fatalf("connection %s, want cancelling", got)
		}
		k.reply <- nil
		h.answer(c, errors.New("query interrupted"))
		// No probe in a transaction: its rollback stands in for it.
		if p := wait(t, c.sends, "rollback after the cancel"); p.Kind != KindRollback {
			t.Fatalf("sent %s after the cancel, want the transaction's rollback", p.Kind)
		}
		h.on(func() {})
		if got := h.stateOf(c); got != stateIdle {
			t.Errorf("connection %s after the rollback, want idle", got)
		}
		next := &Request{Kind: KindExec, SQL: "UPDATE t SET x = 1", Tx: begin.NewTx}
		wait(t, h.submit(next), "next statement of the transaction")
		if te := tether.AsError(next.Err); next.Err == nil || te.Code != tether.CodeTxAborted && !errors.Is(next.Err, tether.ErrTxDone) {
			t.Errorf("next statement of the rolled back transaction: %v, want it refused", next.Err)
		}
	})
}

// TestFake_TerminateTimesOut: a cancel that does not take within
// cancel_timeout terminates the connection: its socket closes at once, its
// slot stays taken while the driver cannot confirm the session gone (a
// Terminate that times out is tried again after a pause, doubling), and is
// freed only once it confirms; a request waiting meanwhile gets a new
// connection then.
func TestFake_TerminateTimesOut(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	h.p.cancelTimeout = 20 * time.Millisecond // before any cancel reads it
	h.p.firstTerminatePause = time.Millisecond
	c := h.d.conn(0)
	r := &Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)"}
	done := h.submit(r)
	wait(t, c.sends, "statement sent")
	h.on(func() { h.p.Abandon(r, errors.New("client gave up")) })
	wait(t, done, "request answered when given up")
	wait(t, h.d.cancels, "Cancel") // never answered: it times out with its context

	t1 := wait(t, h.d.terms, "Terminate after cancel_timeout")
	if !c.closed.Load() {
		t.Error("socket still open once terminating")
	}
	if got := h.stateOf(c); got != stateClosing {
		t.Fatalf("connection %s while terminated, want closing", got)
	}
	waiting := &Request{Kind: KindQuery, SQL: "SELECT 2"}
	doneWaiting := h.submit(waiting)
	t1.reply <- context.DeadlineExceeded // not confirmed: tried again
	t2 := wait(t, h.d.terms, "Terminate tried again")
	h.on(func() {
		if h.p.open != 1 || h.p.waiting.len() != 1 {
			t.Errorf("while unconfirmed: open %d, waiting %d; want the slot held (1) and the request waiting", h.p.open, h.p.waiting.len())
		}
	})
	if n := h.d.dials.Load(); n != 1 {
		t.Errorf("%d dials while the slot is held, want 1", n)
	}
	t2.reply <- nil // confirmed: the slot is freed, the waiting request dials
	c2 := wait(t, h.d.dialed, "a connection dialed for the waiting request")
	if r := wait(t, c2.sends, "waiting request sent on a new connection"); r != waiting {
		t.Fatalf("sent %v, want the waiting request", r)
	}
	h.answer(c2, nil)
	wait(t, doneWaiting, "waiting request answered")
	if got := h.stateOf(c); got != stateGone {
		t.Errorf("terminated connection %s once confirmed, want gone", got)
	}
}

// TestFake_CloseWaitsForBusy: Close lets a running statement finish (it is
// woken by the connection's move to gone, not a poll) and refuses new ones.
func TestFake_CloseWaitsForBusy(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	c := h.d.conn(0)
	r := &Request{Kind: KindQuery, SQL: "SELECT 1"}
	done := h.submit(r)
	wait(t, c.sends, "statement sent")
	closed := make(chan struct{})
	go func() { h.p.Close(context.Background()); close(closed) }()
	// Queued before Close began and failed by it, or refused by it: either
	// way Close has begun once it is answered.
	late := &Request{Kind: KindQuery, SQL: "SELECT late"}
	wait(t, h.submit(late), "a request after Close answered")
	if te := tether.AsError(late.Err); late.Err == nil || te.Code != tether.CodeUnavailable {
		t.Fatalf("a request while closing: %v, want unavailable", late.Err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned with a statement running")
	default:
	}
	h.answer(c, nil)
	wait(t, done, "running statement answered")
	wait(t, closed, "Close returning once the connection is gone")
	if r.Err != nil {
		t.Errorf("the statement running at Close: %v, want its answer", r.Err)
	}
	if !c.closed.Load() {
		t.Error("connection not closed")
	}
}

// TestFake_ClosePastDeadline: a Close whose deadline passes with a statement
// still running and a connection still being terminated drops the first
// (its request answered unavailable) and forgets the second, whose
// termination stops trying, and returns.
func TestFake_ClosePastDeadline(t *testing.T) {
	h := openScripted(t, 2, 2, nil)
	busy, terminated := h.d.conn(0), h.d.conn(1)
	r := &Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)"}
	done := h.submit(r)
	h.on(func() {
		c := h.p.takeIdle(nil)
		if c.srv != ServerConn(terminated) {
			busy, terminated = terminated, busy
		}
		h.p.move(c, stateCancelling)
		h.p.terminate(c, "test: a cancel that did not take")
	})
	k := wait(t, h.d.terms, "Terminate") // not confirmed before Close
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	closed := make(chan struct{})
	go func() { h.p.Close(ctx); close(closed) }()
	wait(t, closed, "Close past its deadline returning")
	wait(t, done, "running statement answered")
	if te := tether.AsError(r.Err); r.Err == nil || te.Code != tether.CodeUnavailable {
		t.Errorf("statement running at Close past its deadline: %v, want unavailable", r.Err)
	}
	if !busy.closed.Load() || !terminated.closed.Load() {
		t.Errorf("closed: busy %v, terminated %v; want both", busy.closed.Load(), terminated.closed.Load())
	}
	if busy.pc.state != stateGone || terminated.pc.state != stateGone {
		t.Errorf("states %s, %s; want gone", busy.pc.state, terminated.pc.state)
	}
	k.reply <- context.DeadlineExceeded // the termination stops trying: the pool closed
}

// TestFake_AcquireTimeout: a request that waits for a connection longer than
// acquire_timeout is answered busy by the sweep's timer, and not sent later.
func TestFake_AcquireTimeout(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	h.p.cfg.AcquireTimeout = tether.Duration(10 * time.Millisecond) // before any request reads it
	c := h.d.conn(0)
	h.submit(&Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)"})
	wait(t, c.sends, "first request sent")
	r := &Request{Kind: KindQuery, SQL: "SELECT 2"}
	wait(t, h.submit(r), "waiting request answered")
	if te := tether.AsError(r.Err); r.Err == nil || te.Code != tether.CodeBusy {
		t.Fatalf("request past acquire_timeout: %v, want busy", r.Err)
	}
	h.answer(c, nil)
	select {
	case s := <-c.sends:
		t.Fatalf("%q sent once the connection was free, after it was answered busy", s.SQL)
	default:
	}
	if got := h.stateOf(c); got != stateIdle {
		t.Errorf("connection %s, want idle", got)
	}
}

// TestFake_DeadlineCancels: a statement running past its deadline is
// answered timeout by the sweep and cancelled on the server; the connection
// comes back once the answer, the Cancel and the probe are in.
func TestFake_DeadlineCancels(t *testing.T) {
	h := openScripted(t, 1, 1, probesOK)
	c := h.d.conn(0)
	r := &Request{Kind: KindQuery, SQL: "SELECT SLEEP(10)", Deadline: time.Now().Add(10 * time.Millisecond)}
	done := h.submit(r)
	wait(t, c.sends, "statement sent")
	wait(t, done, "statement answered at its deadline")
	if te := tether.AsError(r.Err); r.Err == nil || te.Code != tether.CodeTimeout || te.Retry {
		t.Fatalf("statement past its deadline: %v, want timeout, not safe to retry", r.Err)
	}
	k := wait(t, h.d.cancels, "Cancel")
	h.answer(c, errors.New("query interrupted"))
	k.reply <- nil
	if p := wait(t, c.sends, "probe"); p.Kind != KindProbe {
		t.Fatalf("sent %s after the cancel, want a probe", p.Kind)
	}
	h.on(func() {})
	if got := h.stateOf(c); got != stateIdle {
		t.Errorf("connection %s after the probe, want idle", got)
	}
	if n := h.p.Stats().Cancels; n != 1 {
		t.Errorf("%d cancels counted, want 1", n)
	}
}

// TestFake_BatchWaitingPipelinesOnce: a batch whose requests all found the
// pool busy is written whole on the connection it is handed, before any of
// its answers (one round trip, not one per statement), and a request of
// another client that waited behind it gets the connection next.
func TestFake_BatchWaitingPipelinesOnce(t *testing.T) {
	h := openScripted(t, 1, 1, nil)
	c := h.d.conn(0)
	busy := &Request{Kind: KindQuery, SQL: "SELECT busy"}
	doneBusy := h.submit(busy)
	wait(t, c.sends, "the busy request sent")

	page, other := &Client{}, &Client{}
	group := new(int)
	var batch []*Request
	var dones []<-chan struct{}
	for i := range 5 {
		r := &Request{Kind: KindQuery, SQL: fmt.Sprintf("SELECT %d", i), Client: page, Group: group}
		batch = append(batch, r)
		dones = append(dones, h.submit(r))
	}
	later := &Request{Kind: KindQuery, SQL: "SELECT later", Client: other}
	doneLater := h.submit(later)
	h.on(func() {
		if n := h.p.waiting.len(); n != 6 {
			t.Errorf("%d requests waiting, want the batch's 5 and the other client's", n)
		}
	})

	h.answer(c, nil)
	wait(t, doneBusy, "the busy request's answer")
	for i, want := range batch {
		if r := wait(t, c.sends, "a request of the batch sent"); r != want {
			t.Fatalf("sent #%d: %q, want %q", i, r.SQL, want.SQL)
		}
	}
	h.on(func() {
		if got := len(c.sent); got != 5 {
			t.Errorf("%d requests in flight on the connection, want the whole batch (5) before any answer", got)
		}
		if n := h.p.waiting.len(); n != 1 {
			t.Errorf("%d requests waiting, want the other client's", n)
		}
	})
	for range batch {
		h.answer(c, nil)
	}
	for _, d := range dones {
		wait(t, d, "an answer of the batch")
	}
	if r := wait(t, c.sends, "the other client's request sent next"); r != later {
		t.Fatalf("sent %q, want the other client's", r.SQL)
	}
	h.answer(c, nil)
	wait(t, doneLater, "the other client's answer")
	for _, r := range append(batch, busy, later) {
		if r.Err != nil {
			t.Errorf("%s: %v", r.SQL, r.Err)
		}
	}
}
