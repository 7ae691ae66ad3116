// Package sqlroute is a SQL backend over several servers of one database, a
// primary and its replicas: one loop-driven pool per host (backend/sqlpool),
// a monitor that asks every host what it is (backend/topology), and a router
// that sends each request to a host by what the hosts say, never by the
// configuration alone.
//
// Routing, decided on the loop goroutine for every request (route.go):
//
//   - a statement of a transaction goes to its transaction's pool; a begin,
//     and every statement that is not a replica-safe read
//     (sqltables.Info.ReplicaSafe: a single certain read that takes no lock
//     and leaves nothing on the session), goes to the primary;
//   - a replica-safe read outside a transaction goes to a replica that is
//     reachable, replicating and no further behind than max_replica_lag,
//     in turn; when none qualifies, to the primary;
//   - read-your-writes: after a client's write, its reads go to the primary
//     until a replica has applied what the primary had written once the
//     write was answered (a probe of the primary that started after the
//     answer gives that position, and a replica qualifies once its own
//     position covers it). The client's later reads then spread again;
//   - a read a replica refuses as a replica (a PostgreSQL standby and an
//     unlogged table) runs again on the primary: the replica did not run it.
//
// The primary is the host that says it takes writes (MariaDB read_only off,
// PostgreSQL not in recovery; hosts.go). Until the monitor's first answers it
// is the host of the backend's dsn; when another host says so and the
// current one no longer does (a promotion), writes move to it. A host that
// says it is read-only gets no write from the router, and a write a host
// refuses as read-only (it did not run) waits for the next primary. While no
// host takes writes, and while the primary cannot be connected to (a request
// on it failed to connect, and no probe since reached it), what needs the
// primary waits up to primary_wait for one, then is answered unavailable
// (retry).
package sqlroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/backend/topology"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/internal/sqltables"
)

// Host is one server of a replicated backend.
type Host struct {
	// Addr names the host in logs, statuses and metrics.
	Addr string
	// Pool is the host's own pool (max_conns is per host).
	Pool *sqlpool.Pool
	// Prober asks the host what it is.
	Prober topology.Prober
}

// Config is what a Router needs besides its hosts.
type Config struct {
	// Type names the backend type in messages ("mysql").
	Type string
	// Dialect is the SQL dialect statements are read in to tell reads that
	// may run on a replica.
	Dialect sqltables.Dialect
	// MaxReplicaLag takes a replica out of reads while it is further behind
	// than this or cannot say; 0: no bound.
	MaxReplicaLag time.Duration
	// Interval is how often each host is probed.
	Interval time.Duration
	// PrimaryWait bounds how long what needs the primary waits while no
	// host takes writes (a failover); 0: answered unavailable at once.
	PrimaryWait time.Duration
	// RefuseReadsWithoutReplica answers a replica-safe read unavailable
	// (retry) while no replica qualifies, instead of running it on the
	// primary (reads_without_replica = "refuse"); a client's reads held for
	// read-your-writes still go to the primary.
	RefuseReadsWithoutReplica bool
	// Covers reports whether position have (a replica's) includes
	// everything in position want (the primary's), in the protocol's form.
	Covers func(have, want string) bool
	// ReadOnlyRefusal reports whether err is a server refusing a statement
	// because it is read-only: it did not run it.
	ReadOnlyRefusal func(err error) bool
	// ReplicaRefusal reports whether err is a replica refusing, before any
	// row, a read it cannot run as a replica: it did not run it.
	ReplicaRefusal func(err error) bool
	// TxReadOnlyRefusal reports whether err is the server itself being
	// read-only (a switchover: MariaDB's --read-only), never the session's
	// or transaction's own read-only mode: a definitive refusal, which
	// demotes the host at once and answers a transaction's statement
	// tx_aborted (retry). nil: none is (PostgreSQL's 25006 may be the
	// client's own; a PostgreSQL primary cannot turn read-only under an
	// open transaction).
	TxReadOnlyRefusal func(err error) bool
	// PositionSQL asks the primary its position now (one row, one column):
	// what a client's causal token carries when its last write reported
	// none (Position).
	PositionSQL string
	// Merge returns a position that covers both a and b (MariaDB: each
	// replication domain's highest sequence number; PostgreSQL: the higher
	// LSN).
	Merge func(a, b string) string
	// ValidPosition reports whether pos is a position of the protocol's
	// form (a token given to After).
	ValidPosition func(pos string) bool
	Log           *slog.Logger
}

// Router is a replicated SQL backend. It implements tether.Backend,
// tether.Querier and tether.Transactor (through the primary),
// tether.TopologyReporter, and the loop API of sqlpool.Backend, routing each
// request to a host's pool.
type Router struct {
	cfg   Config
	hosts []*host
	mon   *topology.Monitor
	log   *slog.Logger
	label string

	// primary is the host writes go to, nil while no host takes writes. Set
	// on the loop goroutine, read from any (the Go API, Topology).
	primary atomic.Pointer[host]

	loop    *evloop.Loop
	ownLoop bool // Open made loop (no server gave one): Close stops it

	// Loop goroutine only.
	an       sqltables.Analyzer
	replicas []*host  // the replicas reads may go to now
	next     int      // the replica the next read goes to, in turn
	waiting  []waiter // what needs the primary while none takes writes
	closing  bool     // Close began: nothing waits any more
	// onPrimary and onReplica are the Intercepts of requests sent to the
	// primary and to a replica, bound once (no closure per request).
	onPrimary, onReplica, onCommit, onTx func(*sqlpool.Request) bool

	// Counters and the operators' view, read by Topology from any goroutine.
	causalToPrimary, causalToReplica  atomic.Uint64
	primaryWaits, primaryWaitTimeouts atomic.Uint64
	failoversTotal                    atomic.Uint64
	viewMu                            sync.Mutex
	failovers                         []tether.Failover // the last maxFailovers, oldest first
	stop                              chan struct{}
	wg                                sync.WaitGroup
	openOnce                          sync.Once
}

type host struct {
	Host
	index int
	// Loop goroutine only.
	status   topology.HostStatus
	readable bool // a replica reads go to now
	// downSince is when the host's probes began to fail (zero while it
	// answers): a primary keeps the writes through a few failed probes.
	downSince time.Time
	// demotedAt is when it refused a statement as a read-only server (a
	// definitive refusal: TxReadOnlyRefusal); only a probe made after that
	// can make it the primary again.
	demotedAt time.Time
	// downAt is when a request on it as the primary failed to connect;
	// zero once a probe made after that reaches it. While set, what needs
	// the primary waits, as while no host takes writes.
	downAt time.Time
	// The operators' view, under Router.viewMu.
	state, why string
	// Counters, read by Topology from any goroutine.
	reads, writes, shunned atomic.Uint64
}

const (
	// probeTimeout is the least time a probe is given.
	probeTimeout = 2 * time.Second
	// maxFailovers bounds the failovers kept for operators.
	maxFailovers = 16
	// maxWaiting bounds the requests waiting for a primary; past it they are
	// answered unavailable at once.
	maxWaiting = 4096
)

// ErrNoPrimary: no host says it takes writes now.
var ErrNoPrimary = errors.New("no host takes writes")

// New returns a router over hosts, the first the backend's dsn. It connects
// nothing: Open does.
func New(cfg Config, hosts []Host) (*Router, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: replicated backend without hosts", cfg.Type)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Router{cfg: cfg, log: cfg.Log, label: cfg.Type, stop: make(chan struct{})}
	r.onPrimary, r.onReplica, r.onCommit, r.onTx = r.primaryAnswered, r.replicaAnswered, r.commitAnswered, r.txAnswered
	mh := make([]topology.Host, len(hosts))
	for i, h := range hosts {
		r.hosts = append(r.hosts, &host{Host: h, index: i, state: "unprobed"})
		mh[i] = topology.Host{Addr: h.Addr, Prober: h.Prober}
	}
	// A probe may take longer than a short interval (a connect, a loaded
	// host): it is given at least probeTimeout before its host counts as
	// unreachable.
	mon, err := topology.NewMonitor(topology.MonitorConfig{Interval: cfg.Interval, Timeout: max(cfg.Interval, probeTimeout)}, mh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Type, err)
	}
	r.mon = mon
	r.primary.Store(r.hosts[0])
	return r, nil
}

// NewFromConfig builds a router from a backend's config: one host for its
// dsn and one for each of its replicas, each made by newHost from a copy of
// cfg with that DSN (its pool, unopened, its prober and its address).
func NewFromConfig(cfg tether.BackendConfig, rc Config, newHost func(tether.BackendConfig) (*sqlpool.Pool, topology.Prober, string, error)) (*Router, error) {
	dsns := append([]string{cfg.DSN}, cfg.Replicas...)
	hosts := make([]Host, 0, len(dsns))
	for i, dsn := range dsns {
		hc := cfg
		hc.DSN, hc.Replicas = dsn, nil
		p, pr, addr, err := newHost(hc)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("replicas[%d]: %w", i-1, err)
		}
		hosts = append(hosts, Host{Addr: addr, Pool: p, Prober: pr})
	}
	rc.MaxReplicaLag = time.Duration(cfg.MaxReplicaLag)
	rc.Interval = time.Duration(cfg.MonitorInterval)
	rc.PrimaryWait = time.Duration(cfg.PrimaryWait)
	rc.RefuseReadsWithoutReplica = cfg.ReadsWithoutReplica == "refuse"
	return New(rc, hosts)
}

// SetName names the backend in logs and in the panics its pools count.
func (r *Router) SetName(name string) {
	r.label = name
	for _, h := range r.hosts {
		h.Pool.SetName(name)
	}
}

// UseLoop makes every host's pool run on l.
func (r *Router) UseLoop(l *evloop.Loop) {
	r.loop = l
	for _, h := range r.hosts {
		h.Pool.UseLoop(l)
	}
}

// Open opens the first host's pool, which must answer (as a backend of one
// host), and the others', which may be down (the monitor keeps them out of
// routing until they answer); then starts the monitor.
func (r *Router) Open(ctx context.Context) error {
	if r.loop == nil {
		// A Go caller without a server: one loop of the router's own, shared
		// by every host's pool, since routing state lives on one goroutine.
		l, err := evloop.New(nil, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", r.label, err)
		}
		r.UseLoop(l)
		r.ownLoop = true
		go l.Run()
	}
	// Any host that answers will do: after a failover the dsn's host may be
	// the one that is down, and the monitor finds who takes writes.
	var errs []error
	for _, h := range r.hosts {
		if err := h.Pool.Open(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.Addr, err))
			r.log.Warn("host not reachable at start", "backend", r.label, "host", h.Addr, "err", err)
		}
	}
	if len(errs) == len(r.hosts) {
		if r.ownLoop {
			r.loop.Stop()
			r.loop, r.ownLoop = nil, false
		}
		return errors.Join(errs...)
	}
	r.openOnce.Do(func() {
		r.mon.Start()
		r.wg.Add(1)
		go r.watch()
	})
	return nil
}

// PrimaryIndex returns the index of the host writes go to now (0 is the
// dsn's), or -1 while none takes writes. Any goroutine.
func (r *Router) PrimaryIndex() int {
	if h := r.primary.Load(); h != nil {
		return h.index
	}
	return -1
}

// Query runs s on the primary (the Go API: key operations, catalog reads).
func (r *Router) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	p, err := r.goPrimary()
	if err != nil {
		return nil, err
	}
	return p.Query(ctx, s)
}

// Exec runs s on the primary.
func (r *Router) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	p, err := r.goPrimary()
	if err != nil {
		return nil, err
	}
	return p.Exec(ctx, s)
}

// Begin starts a transaction on the primary.
func (r *Router) Begin(ctx context.Context) (tether.Tx, error) {
	p, err := r.goPrimary()
	if err != nil {
		return nil, err
	}
	return p.Begin(ctx)
}

func (r *Router) goPrimary() (*sqlpool.Pool, error) {
	if h := r.primary.Load(); h != nil {
		return h.Pool, nil
	}
	return nil, fmt.Errorf("%s: %w: %w", r.label, ErrNoPrimary, tether.ErrUnavailable)
}

// Do routes req as Submit does and waits for its answer, from any goroutine
// but the loop's (the Go API of routing: tests, tools). When ctx ends first,
// req is abandoned with ctx's error.
func (r *Router) Do(ctx context.Context, req *sqlpool.Request) error {
	done := make(chan struct{})
	req.Done = func(*sqlpool.Request) { close(done) }
	if err := r.loop.Post(func() { r.Submit(req) }); err != nil {
		return fmt.Errorf("%s: %w: %w", r.label, err, tether.ErrUnavailable)
	}
	select {
	case <-done:
		return req.Err
	case <-ctx.Done():
		err := ctx.Err()
		if r.loop.Post(func() { r.Abandon(req, err) }) == nil {
			<-done
		}
		return err
	}
}

// Stats sums the hosts' pools.
func (r *Router) Stats() tether.PoolStats {
	var t tether.PoolStats
	for _, h := range r.hosts {
		addPool(&t, h.Pool.Stats())
	}
	return t
}

func addPool(t *tether.PoolStats, s tether.PoolStats) {
	t.Open += s.Open
	t.InUse += s.InUse
	t.Idle += s.Idle
	t.Waiting += s.Waiting
	t.Resets += s.Resets
	t.Dials += s.Dials
	t.DialErrors += s.DialErrors
	t.Cancels += s.Cancels
	t.IllegalMoves += s.IllegalMoves
}

// Retire gives back every host's idle connections.
func (r *Router) Retire() {
	for _, h := range r.hosts {
		h.Pool.Retire()
	}
}

// Close stops the monitor and closes every host's pool, in parallel.
func (r *Router) Close(ctx context.Context) error {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
	errs := []error{r.mon.Close()}
	if r.loop != nil {
		// What waits for a primary is answered now: nothing will route it.
		done := make(chan struct{})
		if r.loop.Post(func() { r.closing = true; r.failWaiting(r.closedErr()); close(done) }) == nil {
			<-done
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, h := range r.hosts {
		wg.Add(1)
		go func(h *host) {
			defer wg.Done()
			if err := h.Pool.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", h.Addr, err))
				mu.Unlock()
			}
		}(h)
	}
	wg.Wait()
	if r.ownLoop {
		r.loop.Stop()
	}
	return errors.Join(errs...)
}

func (r *Router) closedErr() error {
	return fmt.Errorf("%s: %w", r.label, sqlpool.ErrPoolClosed)
}

var (
	_ tether.Backend          = (*Router)(nil)
	_ tether.Querier          = (*Router)(nil)
	_ tether.Transactor       = (*Router)(nil)
	_ tether.Retirer          = (*Router)(nil)
	_ tether.Namer            = (*Router)(nil)
	_ tether.TopologyReporter = (*Router)(nil)
	_ sqlpool.Backend         = (*Router)(nil)
	_ sqlpool.Causal          = (*Router)(nil)
)

// CausalToken is Position from any goroutine but the loop's (the Go API:
// tests, tools).
func (r *Router) CausalToken(ctx context.Context, cl *sqlpool.Client) (string, error) {
	type answer struct {
		pos string
		err error
	}
	ch := make(chan answer, 1)
	if err := r.loop.Post(func() { r.Position(cl, func(p string, err error) { ch <- answer{p, err} }) }); err != nil {
		return "", fmt.Errorf("%s: %w: %w", r.label, err, tether.ErrUnavailable)
	}
	select {
	case a := <-ch:
		return a.pos, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// CausalAfter is After from any goroutine but the loop's.
func (r *Router) CausalAfter(cl *sqlpool.Client, pos string) error {
	ch := make(chan error, 1)
	if err := r.loop.Post(func() { ch <- r.After(cl, pos) }); err != nil {
		return fmt.Errorf("%s: %w: %w", r.label, err, tether.ErrUnavailable)
	}
	return <-ch
}
