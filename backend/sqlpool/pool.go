// Package sqlpool is the connection pool of the SQL backends whose server
// connections are driven by tetherd's event loop (backend/mysql,
// backend/postgres): statements go from a client's frame to the server's
// socket and back on one goroutine, without a hand-off.
//
// A pool is a state machine, as PgBouncer's is. Every server connection is
// in exactly one state, and moves only through the functions of this file:
//
//	           dial ok                       run                           answered, clean
//	dialing ──────────► idle ◄───────────────────────────────── busy ◄──────────┐
//	   │ failed          │  ▲                      begin ┌──────────┘ ▲            │
//	   ▼                 │  └──── reset done ─── resetting ◄─ dirty ──┤            │
//	 gone                │                                           pinned (tx) ──┘ commit/rollback
//	                     │ idle_timeout, broken                          │
//	                     ▼                                               │ deadline passed,
//	                  closing ──(server confirms the session gone)──► gone │ client gone
//	                     ▲                                               ▼
//	                     └───────────── cancel_timeout ─────────── cancelling ── answered, kill done,
//	                                                                             probe ok ──► idle
//
// Every state but gone counts against max_conns, closing and cancelling
// included: a connection whose statement is being cancelled is still a
// server session, and so is one closed until the server says it has let it
// go. So the sessions tetherd holds never exceed max_conns (plus a driver's
// documented side connection for cancels), whatever clients do.
//
// The server's own reports decide where a connection goes after a request
// (Report: MySQL's OK packet status and session tracker, PostgreSQL's
// ReadyForQuery and ParameterStatus): clean goes back to idle; pooled session
// settings move into the client's Profile; anything else that lives as long
// as the session (an open transaction, a temporary table, a lock) sends it
// through a reset first. A client's settings are applied to whichever
// connection runs its next statement when they differ (KindApply).
//
// Threading: the pool lives on the loop goroutine. Submit, Abandon,
// CancelClient and AbortTx are called there; Query, Exec and Begin (the Go
// API, goapi.go) may be called from any goroutine and post to the loop.
package sqlpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/internal/fault"
)

// ErrPoolClosed: the pool is closed, or the event loop it runs on has
// stopped, so the request was not run. It wraps tether.ErrUnavailable.
var ErrPoolClosed = fmt.Errorf("pool closed: %w", tether.ErrUnavailable)

// state is where a server connection is in the pool's state machine.
type state uint8

const (
	stateIdle       state = iota // clean, waiting for work
	stateBusy                    // running requests
	statePinned                  // pinned to a transaction (with or without requests running)
	stateResetting               // running the pool's reset before it is reused
	stateCancelling              // a statement of it was given up: waiting for the server to stop it
	stateClosing                 // closed; waiting for the server to confirm the session is gone
	stateGone                    // no longer counted
)

var stateNames = [...]string{"idle", "busy", "pinned", "resetting", "cancelling", "closing", "gone"}

func (s state) String() string { return stateNames[s] }

// Tuning that is not configuration.
const (
	// maxPipeline bounds the requests of one batch written back to back on
	// one connection before their answers.
	maxPipeline = 16
	// cancelTimeout is how long a cancelled statement may take to stop
	// before its connection is closed and its session terminated.
	cancelTimeout = 5 * time.Second
	// dialLogEvery spaces the log lines of failed dials.
	dialLogEvery = time.Second
	// maxCosts bounds the statements whose cost the pool remembers.
	maxCosts = 4096
	// maxProbes bounds the probes after a cancel.
	maxProbes = 3
)

// Pool is the pool of one SQL backend. It implements the Go API of a SQL
// backend (tether.Querier and tether.Transactor, in goapi.go) and the loop
// API the server uses (Submit).
type Pool struct {
	drv  Driver
	cfg  tether.BackendConfig
	name string // the backend type, for messages
	// label is the backend's name in the config (SetName), for the panics
	// it counts; the type until set.
	label string
	log   *slog.Logger

	loop    *evloop.Loop
	ownLoop bool

	// Loop goroutine only.
	conns    map[*Conn]struct{} // every connection with a server session, in any state but gone
	idle     []*Conn            // idle connections, most recently used last
	waiting  waitQueue          // requests waiting for a connection, per client, in turn
	open     int                // connections counted against max_conns (dialing ones too)
	dialing  int
	closed   bool
	retiring bool // a reload replaced the pool: no idle connections kept, no warming (Retire)
	profiles profiles
	timer    *time.Timer
	timerAt  time.Time
	lastDial error // the last dial failure, for the errors of requests that could not be served
	// Dial failures are logged at most once per dialLogEvery, with how many
	// were not: while a server is down, every waiting request may dial.
	dialLoggedAt time.Time
	dialUnlogged int
	// What statements take here (from sent to answered, a moving average
	// by SQL text), learnt while requests wait: a waiting request whose
	// deadline is nearer than its statement takes is answered timeout
	// instead of being sent. Under overload with deadlines, a queue served
	// in turn otherwise starts mostly statements that are cancelled before
	// they finish: the server works, nobody gets an answer (the fault
	// suite's overload campaign measured 8-21% goodput).
	costs   map[string]time.Duration
	maxCost time.Duration

	// For Stats, from any goroutine.
	stOpen, stInUse, stIdle atomic.Int64
	stWaits                 atomic.Int64
	stResets                atomic.Int64 // connections reset for session state a client left
	stDials, stDialErrors   atomic.Int64 // connections dialed, and dials that failed
	stCancels               atomic.Int64 // statements cancelled on the server (deadline, client gone)

	janitorStop chan struct{}
	janitorDone chan struct{}
	closeOnce   sync.Once
	closeBegun  chan struct{} // closed when Close begins: terminations stop retrying
}

var _ Backend = (*Pool)(nil)

// Conn is the pool's side of one server connection.
type Conn struct {
	pool  *Pool
	srv   ServerConn
	state state
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

// New returns a pool for a backend; Open connects it. It has no side effects.
func New(drv Driver, cfg tether.BackendConfig) *Pool {
	return &Pool{drv: drv, cfg: cfg, name: drv.Name(), label: drv.Name(), log: slog.Default(), conns: map[*Conn]struct{}{}, closeBegun: make(chan struct{})}
}

// SetName implements tether.Namer: name is the backend's name in the config.
// Call before Open.
func (p *Pool) SetName(name string) { p.label = name }

// UseLoop makes the pool run on the server's event loop. Without it, Open
// starts a loop of the pool's own (for Go callers and tests). Call before Open.
func (p *Pool) UseLoop(l *evloop.Loop) { p.loop = l }

// Loop returns the loop the pool runs on.
func (p *Pool) Loop() *evloop.Loop { return p.loop }

// Open implements tether.Backend: it connects min_conns connections (at
// least one, to verify the backend can be reached) and starts the janitor.
// It returns an unavailable error when the backend cannot be reached.
func (p *Pool) Open(ctx context.Context) error {
	if p.loop == nil {
		l, err := evloop.New(nil, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		p.loop, p.ownLoop = l, true
		go l.Run()
	}
	n := max(p.cfg.MinConns, 1)
	cctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.ConnectTimeout))
	defer cancel()
	srvs := make([]ServerConn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range srvs {
		wg.Add(1)
		go func() { defer wg.Done(); srvs[i], errs[i] = p.drv.Dial(cctx) }()
	}
	wg.Wait()
	p.stDials.Add(int64(len(srvs)))
	if err := errors.Join(errs...); err != nil {
		for _, err := range errs {
			if err != nil {
				p.stDialErrors.Add(1)
			}
		}
		for _, s := range srvs {
			if s != nil {
				s.Close()
			}
		}
		p.stopOwnLoop()
		return p.unavailable(err)
	}
	err := p.post(func() {
		for _, s := range srvs {
			p.open++
			p.adopt(s)
		}
	})
	if err != nil {
		for _, s := range srvs {
			s.Close()
		}
		return p.unavailable(err)
	}
	p.janitorStop, p.janitorDone = make(chan struct{}), make(chan struct{})
	go p.janitor()
	return nil
}

// Close implements tether.Backend: new requests get unavailable, idle
// connections close at once, busy ones once their requests are answered or
// ctx is done, whichever comes first; then the driver's side connections.
func (p *Pool) Close(ctx context.Context) error {
	if p.loop == nil {
		return nil
	}
	p.closeOnce.Do(func() {
		close(p.closeBegun)
		if p.janitorStop != nil {
			close(p.janitorStop)
			<-p.janitorDone
		}
		// Every post below fails at once if the loop has stopped: then
		// nothing is left to close on it.
		err := p.post(func() { p.closed = true; p.failQueue(p.closedErr()); p.closeIdle() })
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for err == nil {
			n := 0
			if err = p.post(func() { n = len(p.conns) }); err != nil || n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				p.post(func() {
					for c := range p.conns {
						if c.state == stateClosing {
							// Its socket is closed (and its number maybe
							// reused): only its termination is left, which
							// stops trying now (closeBegun).
							delete(p.conns, c)
							continue
						}
						p.drop(c, p.closedErr())
					}
				})
			case <-t.C:
				continue
			}
			break
		}
		p.drv.Close()
		p.stopOwnLoop()
	})
	return nil
}

// errRetired is why a retiring pool closes a connection it no longer needs.
var errRetired = errors.New("pool retired by a reload")

// Retire implements tether.Retirer: a reload replaced the pool. It goes on
// serving the requests and transactions it was given, but closes its idle
// connections now and every other one as soon as nothing waits for it, so
// that the pools a burst of reloads leaves draining hold no more server
// connections than their requests in flight. Safe from any goroutine.
func (p *Pool) Retire() {
	if p.loop == nil {
		return
	}
	p.loop.Post(func() {
		p.retiring = true
		for len(p.idle) > 0 {
			p.drop(p.idle[len(p.idle)-1], errRetired)
		}
	})
}

// post runs fn on the loop and waits for it. It returns ErrPoolClosed,
// having run nothing, when the loop has stopped.
func (p *Pool) post(fn func()) error {
	done := make(chan struct{})
	if err := p.loop.Post(func() { defer close(done); fn() }); err != nil {
		return fmt.Errorf("%s: %w", p.name, ErrPoolClosed)
	}
	select {
	case <-done:
		return nil
	case <-p.loop.Done():
		select {
		case <-done: // it ran as the loop stopped
			return nil
		default:
			return fmt.Errorf("%s: %w", p.name, ErrPoolClosed)
		}
	}
}

func (p *Pool) stopOwnLoop() {
	if p.ownLoop {
		p.loop.Stop()
		<-p.loop.Done()
	}
}

func (p *Pool) closedErr() error {
	return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable, Message: p.name + ": backend is closing"}
}

// Stats implements tether.Backend.
func (p *Pool) Stats() tether.PoolStats {
	return tether.PoolStats{Open: int(p.stOpen.Load()), InUse: int(p.stInUse.Load()), Idle: int(p.stIdle.Load()), Waiting: p.stWaits.Load(),
		Resets: p.stResets.Load(), Dials: p.stDials.Load(), DialErrors: p.stDialErrors.Load(), Cancels: p.stCancels.Load()}
}

func (p *Pool) updateStats() {
	p.stOpen.Store(int64(p.open))
	p.stIdle.Store(int64(len(p.idle)))
	p.stInUse.Store(int64(len(p.conns) - len(p.idle)))
}

// unavailable wraps a failure to connect, keeping the backend's code when it
// gave one (bad credentials, too many connections).
func (p *Pool) unavailable(err error) error {
	e := &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: err, Message: fmt.Sprintf("connect %s: %v", p.name, err)}
	var te *tether.Error
	if errors.As(err, &te) {
		e.BackendCode = te.BackendCode
	}
	return e
}

// Submit runs r: on its transaction's connection, on an idle connection, or
// after the requests waiting before it. r.Done is called once, on the loop
// goroutine. Loop goroutine only.
func (p *Pool) Submit(r *Request) {
	if p.closed {
		r.Err = p.closedErr()
		p.finish(r)
		return
	}
	if r.Tx != nil {
		p.runInTx(r)
		return
	}
	if c := p.takeIdle(r.Client); c != nil {
		c.run(r)
		return
	}
	if c := p.pipelineFor(r); c != nil {
		c.run(r)
		return
	}
	p.enqueue(r)
}

// takeIdle returns an idle connection, preferring the most recently used one
// whose settings are the client's already.
func (p *Pool) takeIdle(cl *Client) *Conn {
	if len(p.idle) == 0 {
		return nil
	}
	var want *Profile
	if cl != nil {
		want = cl.Profile
	}
	i := len(p.idle) - 1
	for j := i; j >= 0; j-- {
		if Equal(p.idle[j].profile, want) {
			i = j
			break
		}
	}
	c := p.idle[i]
	copy(p.idle[i:], p.idle[i+1:])
	p.idle[len(p.idle)-1] = nil
	p.idle = p.idle[:len(p.idle)-1]
	c.state = stateBusy
	p.updateStats()
	return c
}

// pipelineFor returns a busy connection running requests of r's batch, the
// least loaded one, to write r after them.
func (p *Pool) pipelineFor(r *Request) *Conn {
	if r.Group == nil || r.Kind != KindQuery && r.Kind != KindExec {
		return nil
	}
	var best *Conn
	for c := range p.conns {
		if c.state != stateBusy || c.next != nil || c.dirty != "" || len(c.sent) == 0 || len(c.sent) >= maxPipeline {
			continue
		}
		if c.sent[len(c.sent)-1].Group != r.Group {
			continue
		}
		if best == nil || len(c.sent) < len(best.sent) {
			best = c
		}
	}
	return best
}

func (p *Pool) enqueue(r *Request) {
	r.State.Queued = time.Now()
	p.waiting.push(r)
	p.stWaits.Add(1)
	p.armTimer(r.State.Queued.Add(time.Duration(p.cfg.AcquireTimeout)))
	if !r.Deadline.IsZero() {
		p.armTimer(r.Deadline)
	}
	p.maybeDial()
}

// maybeDial dials one more connection when requests wait and max_conns allows.
func (p *Pool) maybeDial() {
	waiting := 0
	p.waiting.each(func(r *Request) {
		if !r.State.Abandoned {
			waiting++
		}
	})
	if waiting <= p.dialing || p.open >= p.cfg.MaxConns || p.closed {
		return
	}
	p.dial()
}

func (p *Pool) dial() {
	p.open++
	p.dialing++
	p.stDials.Add(1)
	p.updateStats()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.cfg.ConnectTimeout))
		s, err := p.drv.Dial(ctx)
		cancel()
		if p.loop.Post(func() { p.dialed(s, err) }) != nil && s != nil {
			s.Close() // the loop has stopped: nobody will use it
		}
	}()
}

func (p *Pool) dialed(s ServerConn, err error) {
	p.dialing--
	if err != nil {
		p.stDialErrors.Add(1)
		p.open--
		p.updateStats()
		p.lastDial = err
		if now := time.Now(); now.Sub(p.dialLoggedAt) >= dialLogEvery {
			p.log.Warn("connect failed", "backend", p.name, "err", err, "failures_not_logged", p.dialUnlogged)
			p.dialLoggedAt, p.dialUnlogged = now, 0
		} else {
			p.dialUnlogged++
		}
		if p.open == 0 {
			// Nothing else will serve the waiting requests.
			p.failQueue(p.unavailable(err))
		}
		return
	}
	if p.closed {
		s.Close()
		p.open--
		p.updateStats()
		return
	}
	p.adopt(s)
}

// adopt takes a freshly dialled connection into the pool as idle. Its slot
// (p.open) is counted already.
func (p *Pool) adopt(s ServerConn) {
	c := &Conn{pool: p, srv: s, state: stateBusy, used: time.Now(), fd: s.Fd()}
	if err := p.loop.Watch(c.fd, c); err != nil {
		s.Close()
		p.open--
		p.updateStats()
		p.log.Error("watch connection", "backend", p.name, "err", err)
		return
	}
	c.watched = true
	p.conns[c] = struct{}{}
	s.Attach(c)
	p.release(c)
}

// failQueue answers every waiting request with err.
func (p *Pool) failQueue(err error) {
	for _, r := range p.waiting.clear() {
		if !r.State.Abandoned {
			r.Err = err
			p.finish(r)
		}
	}
}

// release decides where a connection goes once it has nothing in flight.
func (p *Pool) release(c *Conn) {
	if c.broken != nil {
		p.drop(c, c.broken)
		return
	}
	if len(c.sent) > 0 || c.next != nil || c.state == stateCancelling || c.state == stateClosing {
		return
	}
	if p.closed && c.tx == nil {
		p.drop(c, p.closedErr())
		return
	}
	if c.tx != nil {
		if c.abortingTx {
			c.abortingTx = false
			c.state = statePinned
			p.send(c, &Request{Kind: KindRollback, Tx: c.tx, Done: func(*Request) {}})
			return
		}
		c.state = statePinned
		p.updateStats()
		return
	}
	if c.dirty != "" {
		c.state = stateResetting
		p.stResets.Add(1)
		why := c.dirty
		p.send(c, &Request{Kind: KindReset, Done: func(r *Request) {
			if r.Err != nil {
				p.log.Warn("reset failed; closing the connection", "backend", p.name, "conn", c.srv.String(), "reason", why, "err", r.Err)
				c.broken = r.Err
				return
			}
			c.dirty = ""
			c.profile = nil
		}})
		return
	}
	c.state = stateIdle
	c.used = time.Now()
	// Hand it to the next waiting client, if any.
	for r := p.waiting.pop(); r != nil; r = p.waiting.pop() {
		if err := p.tooLate(r); err != nil {
			r.Err = err
			p.finish(r)
			continue
		}
		c.state = stateBusy
		c.run(r)
		p.updateStats()
		return
	}
	if p.retiring {
		p.drop(c, errRetired)
		return
	}
	p.idle = append(p.idle, c)
	p.updateStats()
}

// run starts r on c, first applying r's client's settings when c's differ.
func (c *Conn) run(r *Request) {
	p := c.pool
	r.State.Conn = c
	if r.Kind == KindBegin {
		c.tx = &Tx{Conn: c, Client: r.Client}
		c.state = statePinned
	}
	var want *Profile
	if r.Client != nil {
		want = r.Client.Profile
	}
	if r.Tx == nil && !Equal(c.profile, want) {
		// Not pipelined: the statement must not run if the settings could
		// not be applied.
		c.next = r
		p.send(c, &Request{Kind: KindApply, Profile: want, Done: func(ar *Request) {
			c.next = nil
			if ar.Err != nil {
				c.dirty = "settings not applied"
				if !r.State.Abandoned {
					r.Err = fmt.Errorf("%s: apply the client's session settings: %w", p.name, ar.Err)
					p.finish(r)
				}
				if r.Kind == KindBegin {
					c.tx = nil
				}
				return
			}
			c.profile = want
			if r.State.Abandoned {
				if r.Kind == KindBegin {
					c.tx = nil
				}
				return
			}
			p.send(c, r)
		}})
		return
	}
	p.send(c, r)
}

// send writes r on c and arms the deadline timer for it.
func (p *Pool) send(c *Conn, r *Request) {
	r.State.Conn = c
	if p.waiting.len() > 0 && (r.Kind == KindQuery || r.Kind == KindExec) {
		r.State.Sent = time.Now()
	}
	c.sent = append(c.sent, r)
	if !r.Deadline.IsZero() {
		p.armTimer(r.Deadline)
	}
	// A panic in the protocol's Send leaves the connection's stream in an
	// unknown state: it is dropped, and r, in c.sent now, answered internal.
	defer func() {
		if v := recover(); v != nil {
			p.panicked(c, "conn_send", v)
		}
	}()
	c.srv.Send(r)
}

// learnCost folds one run of sql into what its statements take here.
func (p *Pool) learnCost(sql string, d time.Duration) {
	if p.costs == nil {
		p.costs = make(map[string]time.Duration)
	}
	old, ok := p.costs[sql]
	switch {
	case ok:
		d = old - old/4 + d/4
	case len(p.costs) >= maxCosts:
		return
	}
	p.costs[sql] = d
	p.maxCost = max(p.maxCost, d)
}

// tooLate returns the error for a waiting request that cannot be answered
// before its deadline if sent now (its deadline passed, or its statement
// takes longer than is left), or nil.
func (p *Pool) tooLate(r *Request) error {
	if r.Deadline.IsZero() {
		return nil
	}
	left := time.Until(r.Deadline)
	if left <= 0 {
		return p.timeoutErr(false) // passed, and the sweep has not come by yet
	}
	if left >= p.maxCost {
		return nil
	}
	cost, known := p.costs[r.SQL]
	if !known || left >= cost {
		return nil
	}
	return &tether.Error{Code: tether.CodeTimeout, Retry: true, Err: context.DeadlineExceeded,
		Message: fmt.Sprintf("%s: deadline too near to run the statement (%s left after waiting for a connection, it takes about %s here); it was not sent",
			p.name, left.Round(time.Millisecond), cost.Round(time.Millisecond))}
}

// runInTx runs a statement, commit or rollback on its transaction's connection.
func (p *Pool) runInTx(r *Request) {
	tx := r.Tx
	c, _ := tx.Conn.(*Conn)
	if c == nil {
		r.Err = tx.Ended
		if r.Err == nil {
			r.Err = fmt.Errorf("%s: %w", p.name, tether.ErrTxDone)
		}
		p.finish(r)
		return
	}
	if c.state == stateCancelling || c.abortingTx {
		r.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: p.name + ": the transaction is being rolled back"}
		p.finish(r)
		return
	}
	p.send(c, r)
}

// Done is called by the ServerConn when the oldest request it was sent has
// its whole answer, with the outcome and the server's report in r.
func (c *Conn) Done(r *Request) {
	p := c.pool
	if len(c.sent) == 0 || c.sent[0] != r {
		panic(fmt.Sprintf("sqlpool: %s answered a request out of order", c.srv))
	}
	// Shift down rather than reslice, so that the slice keeps its room.
	n := copy(c.sent, c.sent[1:])
	c.sent[n] = nil
	c.sent = c.sent[:n]
	p.settle(c, r)
	if !r.State.Sent.IsZero() && r.Err == nil {
		p.learnCost(r.SQL, time.Since(r.State.Sent))
	}
	p.finish(r)
	if c.state == stateCancelling {
		if c.givenUpRuns() {
			// Another statement given up runs now: it needs a Cancel of its own.
			if c.killAgain {
				p.kill(c)
			}
			return
		}
		if c.killAgain {
			c.killing, c.killAgain = false, false // answered: the Cancel due is not needed
		}
		p.afterCancel(c)
		return
	}
	if len(c.sent) > 0 && c.sent[0].State.Abandoned {
		p.cancel(c) // the next one to run was given up while it waited behind others
		return
	}
	p.release(c)
}

// Fail is called by the ServerConn when the connection broke: every request
// in flight on it fails with err, and the connection is dropped.
func (c *Conn) Fail(err error) {
	if c.broken == nil {
		c.broken = err
	}
	c.pool.drop(c, err)
}

// settle applies the server's report on the session after r to the pool's
// view of the connection and of r's client, and turns a statement that left
// a transaction or table locks behind (outside a transaction of tetherd's)
// into an error: they cannot hold across pooled connections.
func (p *Pool) settle(c *Conn, r *Request) {
	rep := r.Report
	switch r.Kind {
	case KindBegin:
		if r.Err != nil {
			c.tx = nil
		} else {
			r.NewTx = c.tx
		}
	case KindCommit, KindRollback:
		tx := c.tx
		if tx != nil {
			tx.Conn, tx.Ended = nil, fmt.Errorf("%s: %w", p.name, tether.ErrTxDone)
			c.tx = nil
		}
		if r.Err != nil {
			// The server may have ended it or not: do not trust the session.
			c.dirty = "transaction did not end cleanly"
		} else if tx != nil && tx.EndedBy != "" {
			what := "commit"
			if r.Kind == KindRollback {
				what = "roll back"
			}
			r.Err = tether.Errorf(tether.CodeBadRequest, "%s: no transaction to %s: the server reports that the statement %s ended it "+
				"(COMMIT or ROLLBACK sent as SQL, or a statement that commits implicitly, such as DDL on MySQL); what ran "+
				"before that statement was ended with it, and every statement after it was committed on its own; use "+
				"commit and rollback, and keep such statements out of transactions", p.name, what, tx.EndedBy)
		}
	case KindQuery, KindExec:
		// A transaction that the server reports over after one of its
		// statements succeeded was ended by that statement, whatever its text.
		if tx := c.tx; tx != nil && r.Err == nil && tx.EndedBy == "" && (rep == nil || !rep.InTx) {
			tx.EndedBy = excerpt(r.SQL)
		}
	}
	if rep == nil {
		return
	}
	if (len(rep.Settings) > 0 || rep.Snapshot) && r.Kind != KindApply && r.Kind != KindReset {
		base := c.profile
		if rep.Snapshot {
			base = nil
		}
		c.profile = p.profiles.with(base, rep.Settings)
		if r.Client != nil {
			r.Client.Profile = c.profile
		} else if r.Tx != nil && r.Tx.Client != nil {
			r.Tx.Client.Profile = c.profile
		}
	}
	// tetherd's own statements that set the pooled variables to a profile
	// (KindApply) or set a reset session up (KindReset) leave nothing but
	// those: what the report makes of them (MariaDB does not report the
	// collation a character set change brings) must not send the connection
	// to a reset, which would also drop its prepared statements.
	if rep.Unpooled != "" && c.dirty == "" && r.Kind != KindApply && r.Kind != KindReset {
		c.dirty = rep.Unpooled
	}
	if c.tx == nil && (r.Kind == KindQuery || r.Kind == KindExec) {
		switch {
		case rep.InTx:
			c.dirty = "a transaction left open"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: the statement left a transaction open (the server reports it), which cannot hold across pooled connections: tetherd rolled it back; use begin and commit", p.name)
			}
		case rep.Locked:
			c.dirty = "table locks held"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: LOCK TABLES outside a transaction cannot hold across pooled connections: tetherd released the locks; run it inside begin and commit", p.name)
			}
		case rep.AutocommitOff:
			c.dirty = "autocommit off"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: the statement turned autocommit off (the server reports it), which cannot hold across pooled connections: tetherd reset the session; use begin and commit", p.name)
			}
		}
	}
}

// finish calls r.Done once.
func (p *Pool) finish(r *Request) {
	if r.State.Finished {
		return
	}
	r.State.Finished = true
	r.Done(r)
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
	c.state = stateGone
	if prev != stateClosing { // terminate closed it already
		p.closeSocket(c)
	}
	delete(p.conns, c)
	p.removeIdle(c)
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

func (p *Pool) removeIdle(c *Conn) {
	for i, x := range p.idle {
		if x == c {
			copy(p.idle[i:], p.idle[i+1:])
			p.idle[len(p.idle)-1] = nil
			p.idle = p.idle[:len(p.idle)-1]
			return
		}
	}
}

func (p *Pool) closeIdle() {
	for len(p.idle) > 0 {
		p.drop(p.idle[len(p.idle)-1], p.closedErr())
	}
}

// Abandon answers r with err now, if it has not been answered; a statement of
// it still running on the server is cancelled there. Loop goroutine only.
func (p *Pool) Abandon(r *Request, err error) {
	if r.State.Finished {
		return
	}
	r.State.Abandoned = true
	r.Err = err
	// The caller may reuse its sink once answered: whatever still arrives
	// for r goes nowhere.
	if r.Sink != nil {
		r.Sink = discard{}
	}
	p.finish(r)
	c, _ := r.State.Conn.(*Conn)
	if c == nil || c.state == stateGone {
		return // it was waiting in the queue, which skips it
	}
	if c.next == r {
		return // its settings are being applied; it will not be sent
	}
	if len(c.sent) > 0 && c.sent[0] == r {
		p.cancel(c)
	}
	// Otherwise it waits behind others on c, and is cancelled if it is
	// still there when they are answered (Done).
}

// cancel starts cancelling the statement c runs now.
func (p *Pool) cancel(c *Conn) {
	if c.state == stateCancelling || c.state == stateClosing || c.state == stateGone {
		return
	}
	c.state = stateCancelling
	p.stCancels.Add(1)
	c.cancelAt = time.Now()
	c.cancelGen++
	c.kills = 0
	c.probes = 0
	p.armTimer(c.cancelAt.Add(cancelTimeout))
	p.kill(c)
}

// Pauses between the tries of a termination the server has not confirmed.
const (
	firstTerminatePause = 100 * time.Millisecond
	maxTerminatePause   = 5 * time.Second
)

// Pauses between the Cancels of one cancel: the first soon, then less often.
const (
	firstKillPause = 10 * time.Millisecond
	maxKillPause   = 200 * time.Millisecond
)

// kill sends the driver's Cancel for the statement c runs now. Once it is
// done, if the statement given up is still unanswered, another follows after
// a pause, until it is answered or cancel_timeout terminates the connection:
// a cancel that reaches the server before the statement has begun is dropped
// (MySQL's KILL QUERY and PostgreSQL's CancelRequest both only stop a
// statement that is running; a statement pipelined behind the first, or
// sent just as its predecessor ended, may not have begun), and each
// statement given up behind the first needs one of its own. A Cancel that
// arrives once nothing runs is absorbed by the probe (afterCancel).
func (p *Pool) kill(c *Conn) {
	c.killing, c.killAgain = true, false
	c.kills++
	srv, gen := c.srv, c.cancelGen
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
		err := p.drv.Cancel(ctx, srv)
		cancel()
		p.loop.Post(func() {
			if err != nil {
				p.log.Warn("cancel failed", "backend", p.name, "conn", srv.String(), "err", err)
			}
			if c.state != stateCancelling || c.cancelGen != gen {
				c.killing = false
				return
			}
			if !c.givenUpRuns() {
				c.killing = false
				p.afterCancel(c)
				return
			}
			c.killAgain = true
			pause := min(firstKillPause<<(c.kills-1), maxKillPause)
			time.AfterFunc(pause, func() {
				p.loop.Post(func() {
					if !c.killAgain || c.state != stateCancelling || c.cancelGen != gen {
						return // answered meanwhile (Done), or over
					}
					if c.givenUpRuns() {
						p.kill(c)
						return
					}
					c.killing, c.killAgain = false, false
					p.afterCancel(c)
				})
			})
		})
	}()
}

// givenUpRuns reports whether the statement c runs now, as far as tetherd
// knows, is one that was given up.
func (c *Conn) givenUpRuns() bool {
	return len(c.sent) > 0 && c.sent[0].State.Abandoned
}

// afterCancel moves a cancelling connection on once the server has both
// answered what was given up and taken the cancel: a probe absorbs a cancel
// that arrived after the statement ended.
func (p *Pool) afterCancel(c *Conn) {
	if c.killing || len(c.sent) > 0 || c.next != nil {
		return
	}
	if c.tx != nil {
		// A transaction whose statement was cancelled is rolled back: its
		// ROLLBACK stands in for the probe (a late cancel cannot harm it,
		// and a failed one sends the connection through a reset).
		c.abortingTx = true
		c.state = statePinned
		p.release(c)
		return
	}
	if c.probes >= maxProbes {
		p.terminate(c, "probes after a cancel kept failing")
		return
	}
	c.probes++
	p.send(c, &Request{Kind: KindProbe, Done: func(r *Request) {
		if r.Err != nil {
			return // Done calls afterCancel again: another probe
		}
		c.state = stateBusy
		if c.tx != nil && c.abortingTx {
			c.state = statePinned
		}
	}})
}

// terminate closes a connection whose session the server must end for good,
// and frees its slot only when the driver confirms the session is gone.
func (p *Pool) terminate(c *Conn, why string) {
	if c.state == stateClosing || c.state == stateGone {
		return
	}
	p.log.Warn("terminating connection", "backend", p.name, "conn", c.srv.String(), "why", why)
	srv := c.srv
	c.state = stateClosing
	p.closeSocket(c)
	sent := c.sent
	c.sent = nil
	for _, r := range sent {
		if !r.State.Abandoned {
			r.Err = p.lostErr(errors.New(why))
		}
		p.finish(r)
	}
	if tx := c.tx; tx != nil {
		tx.Conn = nil
		tx.Ended = &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: p.name + ": the transaction was rolled back: " + why}
		c.tx = nil
	}
	go func() {
		// The slot stays taken until the server confirms: tried again, less
		// and less often, while the confirmation fails (the side connection
		// busy with slow KILLs for longer than a try's deadline, the server
		// unreachable), until the pool closes.
		pause := firstTerminatePause
		var err error
	tries:
		for {
			ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			err = p.drv.Terminate(ctx, srv)
			cancel()
			if err == nil {
				break
			}
			p.log.Warn("terminate session: not confirmed yet; its slot stays taken", "backend", p.name, "conn", srv.String(), "err", err, "next_try_in", pause)
			select {
			case <-time.After(pause):
				pause = min(2*pause, maxTerminatePause)
			case <-p.closeBegun:
				break tries
			}
		}
		p.loop.Post(func() {
			if err != nil {
				p.log.Error("terminate session", "backend", p.name, "conn", srv.String(), "err", err)
			}
			delete(p.conns, c)
			c.state = stateGone
			p.open--
			p.updateStats()
			if !p.closed {
				p.maybeDial()
			}
		})
	}()
	p.updateStats()
}

// CancelClient gives up every request of a client that went away: waiting
// ones are dropped, running ones cancelled on the server. Its transactions
// are the caller's to abort (AbortTx). Loop goroutine only.
func (p *Pool) CancelClient(cl *Client, err error) {
	for _, r := range p.waiting.of(cl) {
		if !r.State.Finished {
			p.Abandon(r, err)
		}
	}
	for c := range p.conns {
		if r := c.next; r != nil && r.Client == cl {
			p.Abandon(r, err)
		}
		for _, r := range c.sent {
			if r.Client == cl && !r.State.Finished {
				p.Abandon(r, err)
			}
		}
	}
}

// AbortTx rolls tx back on the pool's initiative (its client went away, it
// idled too long, tetherd shuts down): a statement of it still running is
// cancelled on the server first. Loop goroutine only.
func (p *Pool) AbortTx(tx *Tx, why string) {
	c, _ := tx.Conn.(*Conn)
	if c == nil {
		return
	}
	aborted := &tether.Error{Code: tether.CodeTxAborted, Retry: true, Message: "transaction was rolled back: " + why}
	tx.Ended = aborted
	c.abortingTx = true
	for _, r := range c.sent {
		if !r.State.Finished && r.Kind != KindRollback && r.Kind != KindCommit {
			p.Abandon(r, aborted)
		}
	}
	if len(c.sent) == 0 && c.state != stateCancelling {
		p.release(c)
	}
}

// armTimer makes sure the sweep runs at or before at.
func (p *Pool) armTimer(at time.Time) {
	if !p.timerAt.IsZero() && !at.Before(p.timerAt) {
		return
	}
	p.timerAt = at
	d := time.Until(at)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, func() { p.loop.Post(p.sweep) })
		return
	}
	p.timer.Reset(d)
}

// sweep answers the requests whose wait or deadline passed, cancels the
// statements whose deadline passed, and terminates connections whose cancel
// did not take. It re-arms the timer for the next deadline.
func (p *Pool) sweep() {
	p.timerAt = time.Time{}
	now := time.Now()
	var next time.Time
	later := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	acquire := time.Duration(p.cfg.AcquireTimeout)
	p.waiting.each(func(r *Request) {
		if r.State.Finished {
			return
		}
		switch {
		case !r.Deadline.IsZero() && !now.Before(r.Deadline):
			p.Abandon(r, p.timeoutErr(false))
		case now.Sub(r.State.Queued) >= acquire:
			p.Abandon(r, p.busyErr())
		default:
			later(r.State.Queued.Add(acquire))
			later(r.Deadline)
		}
	})
	for c := range p.conns {
		if c.state == stateCancelling {
			if now.Sub(c.cancelAt) >= cancelTimeout {
				p.terminate(c, fmt.Sprintf("a cancelled statement did not stop within %s", cancelTimeout))
				continue
			}
			later(c.cancelAt.Add(cancelTimeout))
		}
		for _, r := range c.sent {
			if r.State.Finished || r.Deadline.IsZero() {
				continue
			}
			if !now.Before(r.Deadline) {
				p.Abandon(r, p.timeoutErr(true))
				if c.tx != nil {
					// A transaction whose statement was cancelled cannot be
					// trusted to go on (PostgreSQL aborts it anyway).
					p.AbortTx(c.tx, "a statement of it passed its deadline")
				}
			} else {
				later(r.Deadline)
			}
		}
		if r := c.next; r != nil && !r.State.Finished && !r.Deadline.IsZero() {
			if !now.Before(r.Deadline) {
				p.Abandon(r, p.timeoutErr(false))
			} else {
				later(r.Deadline)
			}
		}
	}
	if !next.IsZero() {
		p.armTimer(next)
	}
}

func (p *Pool) busyErr() error {
	return &tether.Error{Code: tether.CodeBusy, Retry: true, Err: tether.ErrBusy,
		Message: fmt.Sprintf("%s: all %d connections busy for %s (acquire_timeout)", p.name, p.cfg.MaxConns, p.cfg.AcquireTimeout)}
}

func (p *Pool) timeoutErr(sent bool) error {
	if sent {
		return &tether.Error{Code: tether.CodeTimeout, Err: context.DeadlineExceeded,
			Message: p.name + ": deadline exceeded; the statement may or may not have run (tetherd cancelled it on the server)"}
	}
	return &tether.Error{Code: tether.CodeTimeout, Retry: true, Err: context.DeadlineExceeded,
		Message: p.name + ": deadline exceeded while waiting for a connection; the statement did not run"}
}

// janitor closes connections idle past idle_timeout (down to min_conns) and
// dials back up to min_conns, so the first request after a quiet spell does
// not pay a connect.
func (p *Pool) janitor() {
	defer close(p.janitorDone)
	idle := time.Duration(p.cfg.IdleTimeout)
	period := time.Second
	if idle > 0 && idle/4 < period {
		period = max(idle/4, 10*time.Millisecond)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.janitorStop:
			return
		case <-t.C:
			p.loop.Post(func() {
				if p.closed {
					return
				}
				now := time.Now()
				for i := 0; idle > 0 && i < len(p.idle) && p.open > p.cfg.MinConns; {
					c := p.idle[i]
					if now.Sub(c.used) >= idle {
						p.drop(c, errors.New("idle_timeout"))
						continue
					}
					i++
				}
				if p.open < p.cfg.MinConns && !p.retiring {
					p.dial()
				}
			})
		}
	}
}

// InTx reports whether the connection is pinned to a transaction.
func (c *Conn) InTx() bool { return c.tx != nil }

// Profile returns the session settings the server connection has now.
func (c *Conn) Profile() *Profile { return c.profile }

// discard is the sink of a request given up on.
type discard struct{}

func (discard) Columns(int)     {}
func (discard) Column([]byte)   {}
func (discard) BeginRow()       {}
func (discard) Nil()            {}
func (discard) Bool(bool)       {}
func (discard) Int(int64)       {}
func (discard) Uint(uint64)     {}
func (discard) Float(float64)   {}
func (discard) Text([]byte)     {}
func (discard) Bytes([]byte)    {}
func (discard) DateTime([]byte) {}
func (discard) EndRow() error   { return nil }

// excerpt quotes the start of a statement for an error message.
func excerpt(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 60 {
		sql = sql[:57] + "..."
	}
	return strconv.Quote(sql)
}
