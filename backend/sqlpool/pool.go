// Package sqlpool is the connection pool of the SQL backends whose server
// connections are driven by tetherd's event loop (backend/mysql,
// backend/postgres): statements go from a client's frame to the server's
// socket and back on one goroutine, without a hand-off.
//
// A pool is a state machine, as PgBouncer's is. Every server connection is
// in exactly one state (states.go: the table of legal moves and its
// diagram), in the pool's list of that state, and moves only through move,
// which refuses a move the table does not allow. The files say who moves it:
// acquire.go (a request takes a connection, release places it once answered),
// answer.go (the server's answers), cancel.go (statements given up, sessions
// terminated), deadline.go (deadlines, cancel_timeout), dial.go, janitor.go
// (idle_timeout, min_conns), close.go (Close, Retire), cost.go (what
// statements take, for deadlines too near to run them).
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
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
)

// ErrPoolClosed: the pool is closed, or the event loop it runs on has
// stopped, so the request was not run. It wraps tether.ErrUnavailable.
var ErrPoolClosed = fmt.Errorf("pool closed: %w", tether.ErrUnavailable)

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
	// conns lists the connections of each state (move), idle ones in the
	// order of use, the most recently used last.
	conns    [numStates][]*Conn
	live     int       // connections with a server session: in any state but new and gone
	scratch  []*Conn   // liveConns's
	waiting  waitQueue // requests waiting for a connection, per client, in turn
	open     int       // connections counted against max_conns (dialing ones too)
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
	// drained is closed once the pool is closed and holds no connection
	// (checkDrained): Close waits for it.
	drained        chan struct{}
	drainSignalled bool // loop goroutine only

	stIllegalMoves atomic.Int64 // moves the state table refused (move): bugs

	// Tuning, the constants' values but in the package's tests.
	cancelTimeout       time.Duration // cancelTimeout
	firstTerminatePause time.Duration // firstTerminatePause
}

var _ Backend = (*Pool)(nil)

// New returns a pool for a backend; Open connects it. It has no side effects.
func New(drv Driver, cfg tether.BackendConfig) *Pool {
	return &Pool{drv: drv, cfg: cfg, name: drv.Name(), label: drv.Name(), log: slog.Default(),
		closeBegun: make(chan struct{}), drained: make(chan struct{}), cancelTimeout: cancelTimeout, firstTerminatePause: firstTerminatePause}
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
		Resets: p.stResets.Load(), Dials: p.stDials.Load(), DialErrors: p.stDialErrors.Load(), Cancels: p.stCancels.Load(),
		IllegalMoves: p.stIllegalMoves.Load()}
}

func (p *Pool) updateStats() {
	p.stOpen.Store(int64(p.open))
	p.stIdle.Store(int64(len(p.conns[stateIdle])))
	p.stInUse.Store(int64(p.live - len(p.conns[stateIdle])))
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
