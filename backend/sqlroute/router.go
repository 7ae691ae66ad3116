// Package sqlroute is a SQL backend over several servers of one database, a
// primary and its replicas: one loop-driven pool per host (backend/sqlpool),
// a monitor that asks every host what it is (backend/topology), and a router
// that sends each request to a host by what the hosts say, never by the
// configuration alone.
//
// Routing, decided on the loop goroutine for every request:
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
//     position covers it). The client's later reads then spread again.
//
// The primary is the host that says it takes writes (MariaDB read_only off,
// PostgreSQL not in recovery). Until the monitor's first answers it is the
// host of the backend's dsn; when another host says so and the current one
// no longer does (a promotion), writes move to it; a host that says it is
// read-only gets no write from the router. While no host says it takes
// writes, writes are answered unavailable (retry) rather than sent.
package sqlroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	// Covers reports whether position have (a replica's) includes
	// everything in position want (the primary's), in the protocol's form.
	Covers func(have, want string) bool
	Log    *slog.Logger
}

// Router is a replicated SQL backend. It implements tether.Backend,
// tether.Querier and tether.Transactor (through the primary), and the loop
// API of sqlpool.Backend, routing each request to a host's pool.
type Router struct {
	cfg   Config
	hosts []*host
	mon   *topology.Monitor
	log   *slog.Logger
	label string

	// primary is the host writes go to, nil while no host says it takes
	// writes. Set on the loop goroutine, read from any (the Go API).
	primary atomic.Pointer[host]

	loop    *evloop.Loop
	ownLoop bool // Open made loop (no server gave one): Close stops it

	// Loop goroutine only.
	an       sqltables.Analyzer
	replicas []*host // the replicas reads may go to now
	next     int     // the replica the next read goes to, in turn
	stats    []topology.HostStatus

	stop     chan struct{}
	wg       sync.WaitGroup
	openOnce sync.Once
}

type host struct {
	Host
	index int
	// Loop goroutine only.
	status topology.HostStatus
	// Counters, read by Stats from any goroutine.
	reads, writes atomic.Uint64
}

// clientRoute is the router's state of one client (sqlpool.Client.Route).
type clientRoute struct {
	// writing counts the client's writes sent and not answered yet.
	writing int
	// wroteAt is when the client's last write was answered; zero when its
	// reads may go to any replica.
	wroteAt time.Time
	// want, once known, is the primary's position after that write: a
	// replica that covers it has the write.
	want string
}

// probeTimeout is the least time a probe is given.
const probeTimeout = 2 * time.Second

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
	mh := make([]topology.Host, len(hosts))
	for i, h := range hosts {
		r.hosts = append(r.hosts, &host{Host: h, index: i})
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
	r.stats = make([]topology.HostStatus, len(hosts))
	return r, nil
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
	if err := r.hosts[0].Pool.Open(ctx); err != nil {
		return err
	}
	for _, h := range r.hosts[1:] {
		if err := h.Pool.Open(ctx); err != nil {
			r.log.Warn("replica not reachable at start", "backend", r.label, "host", h.Addr, "err", err)
		}
	}
	r.openOnce.Do(func() {
		r.mon.Start()
		r.wg.Add(1)
		go r.watch()
	})
	return nil
}

// watch hands the monitor's statuses to the loop a few times an interval, so
// that routing follows lag as well as roles.
func (r *Router) watch() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.Interval / 4)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			st := r.mon.Statuses()
			if r.loop == nil || r.loop.Post(func() { r.update(st) }) != nil {
				return
			}
		}
	}
}

// update takes the hosts' latest statuses: who takes writes, which replicas
// take reads. Loop goroutine.
func (r *Router) update(st []topology.HostStatus) {
	r.stats = st
	for i, h := range r.hosts {
		h.status = st[i]
	}
	cur := r.primary.Load()
	var writable []*host
	for _, h := range r.hosts {
		if h.status.Reachable() && h.status.Role == topology.RolePrimary && !h.status.ReadOnly {
			writable = append(writable, h)
		}
	}
	var next *host
	switch {
	case len(writable) == 0:
		// Nothing says it takes writes. The current primary keeps them while
		// it has not answered (before the first probe, or a probe that
		// failed: a slow or dead host fails its writes by itself, as a
		// backend of one host does); once it answers that it is read-only
		// or a replica, it gets none.
		if cur != nil && (!answered(cur.status) || !cur.status.Reachable()) {
			next = cur
		}
	case cur != nil && contains(writable, cur):
		next = cur
	default:
		next = writable[0]
		if len(writable) > 1 {
			r.log.Warn("several hosts say they take writes; writes go to the first configured",
				"backend", r.label, "hosts", addrs(writable), "primary", next.Addr)
		}
	}
	if next != cur {
		switch {
		case next == nil:
			r.log.Warn("no host takes writes; writes are refused until one does", "backend", r.label, "was", cur.Addr,
				"status", describe(cur.status))
		case cur == nil:
			r.log.Info("a host takes writes again", "backend", r.label, "primary", next.Addr)
		default:
			r.log.Warn("writes move to a new primary", "backend", r.label, "from", cur.Addr, "to", next.Addr)
		}
		r.primary.Store(next)
	}
	r.replicas = r.replicas[:0]
	for _, h := range r.hosts {
		if h != next && r.readable(h.status) {
			r.replicas = append(r.replicas, h)
		}
	}
}

// readable reports whether a host may serve reads as a replica now.
func (r *Router) readable(s topology.HostStatus) bool {
	if !s.Reachable() || s.Role != topology.RoleReplica || !s.Replicating {
		return false
	}
	return r.cfg.MaxReplicaLag == 0 || s.LagKnown && s.Lag <= r.cfg.MaxReplicaLag
}

// Submit routes req to a host's pool. Loop goroutine.
func (r *Router) Submit(req *sqlpool.Request) {
	if req.Tx != nil {
		if p := req.Tx.Pool; p != nil {
			p.Submit(req)
			return
		}
	}
	if (req.Kind == sqlpool.KindQuery || req.Kind == sqlpool.KindExec) && req.Tx == nil {
		if h := r.replicaFor(req); h != nil {
			h.reads.Add(1)
			h.Pool.Submit(req)
			return
		}
	}
	p := r.primary.Load()
	if p == nil {
		req.State.Finished = true
		req.Err = r.noPrimaryErr()
		req.Done(req)
		return
	}
	p.writes.Add(1)
	if req.Kind == sqlpool.KindExec || req.Kind == sqlpool.KindQuery {
		r.noteWrite(req)
	}
	p.Pool.Submit(req)
}

// replicaFor returns the replica req may run on, or nil for the primary.
func (r *Router) replicaFor(req *sqlpool.Request) *host {
	if len(r.replicas) == 0 {
		return nil
	}
	if !r.an.Analyze(r.cfg.Dialect, req.SQL).ReplicaSafe {
		return nil
	}
	var cr *clientRoute
	if req.Client != nil {
		cr, _ = req.Client.Route.(*clientRoute)
	}
	if cr != nil && (cr.writing > 0 || !cr.wroteAt.IsZero()) {
		return r.causalReplica(cr)
	}
	h := r.replicas[r.next%len(r.replicas)]
	r.next++
	return h
}

// causalReplica returns a replica that has the client's last write, or nil.
func (r *Router) causalReplica(cr *clientRoute) *host {
	if cr.writing > 0 {
		return nil
	}
	if cr.want == "" {
		p := r.primary.Load()
		if p == nil || !p.status.Reachable() || !p.status.CheckedAt.After(cr.wroteAt) || p.status.Position == "" {
			return nil // no probe of the primary since the write was answered
		}
		cr.want = p.status.Position
	}
	for i := range r.replicas {
		h := r.replicas[(r.next+i)%len(r.replicas)]
		if r.cfg.Covers != nil && r.cfg.Covers(h.status.Position, cr.want) {
			r.next += i + 1
			cr.wroteAt, cr.want = time.Time{}, ""
			return h
		}
	}
	return nil
}

// noteWrite marks req's client as writing until req is answered, when its
// reads start waiting for a replica that has the write.
func (r *Router) noteWrite(req *sqlpool.Request) {
	cl := req.Client
	if cl == nil || len(r.hosts) < 2 {
		return
	}
	cr, _ := cl.Route.(*clientRoute)
	if cr == nil {
		cr = &clientRoute{}
		cl.Route = cr
	}
	cr.writing++
	done := req.Done
	req.Done = func(q *sqlpool.Request) {
		cr.writing--
		cr.wroteAt, cr.want = time.Now(), ""
		q.Done = done
		done(q)
	}
}

func (r *Router) noPrimaryErr() error {
	var b strings.Builder
	for i, h := range r.hosts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(h.Addr + ": " + describe(h.status))
	}
	return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable,
		Message: fmt.Sprintf("%s: %v (%s)", r.label, ErrNoPrimary, b.String())}
}

// Abandon answers req with err now through the pool it was given to.
func (r *Router) Abandon(req *sqlpool.Request, err error) {
	p := req.State.Pool
	if p == nil {
		if req.State.Finished {
			return
		}
		req.State.Abandoned, req.State.Finished, req.Err = true, true, err
		req.Done(req)
		return
	}
	p.Abandon(req, err)
}

// CancelClient gives up every request of a client that went away, on every
// host.
func (r *Router) CancelClient(c *sqlpool.Client, err error) {
	for _, h := range r.hosts {
		h.Pool.CancelClient(c, err)
	}
}

// AbortTx rolls tx back on its host.
func (r *Router) AbortTx(tx *sqlpool.Tx, why string) {
	if tx.Pool != nil {
		tx.Pool.AbortTx(tx, why)
	}
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

// Stats sums the hosts' pools.
func (r *Router) Stats() tether.PoolStats {
	var t tether.PoolStats
	for _, h := range r.hosts {
		s := h.Pool.Stats()
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
	return t
}

// HostStats is one host's view for operators.
type HostStats struct {
	Addr    string
	Primary bool // writes go to it now
	Status  topology.HostStatus
	Pool    tether.PoolStats
	// Reads and Writes count the requests routed to it as a replica read
	// and as a primary's request.
	Reads, Writes uint64
}

// Hosts reports every host, in the configured order. Any goroutine.
func (r *Router) Hosts() []HostStats {
	st := r.mon.Statuses()
	p := r.primary.Load()
	out := make([]HostStats, len(r.hosts))
	for i, h := range r.hosts {
		out[i] = HostStats{Addr: h.Addr, Primary: h == p, Status: st[i], Pool: h.Pool.Stats(),
			Reads: h.reads.Load(), Writes: h.writes.Load()}
	}
	return out
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

func answered(s topology.HostStatus) bool { return !errors.Is(s.Err, topology.ErrNotProbed) }

func contains(hs []*host, h *host) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

func addrs(hs []*host) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Addr
	}
	return out
}

func describe(s topology.HostStatus) string {
	switch {
	case errors.Is(s.Err, topology.ErrNotProbed):
		return "not probed yet"
	case s.Err != nil:
		return "unreachable: " + s.Err.Error()
	case s.ReadOnly:
		return s.Role.String() + ", read-only"
	}
	return s.Role.String()
}

var (
	_ tether.Backend    = (*Router)(nil)
	_ tether.Querier    = (*Router)(nil)
	_ tether.Transactor = (*Router)(nil)
	_ tether.Retirer    = (*Router)(nil)
	_ tether.Namer      = (*Router)(nil)
	_ sqlpool.Backend   = (*Router)(nil)
)

// NewFromConfig builds a router from a backend's config: one host for its
// dsn and one for each of its replicas, each made by newHost from a copy of
// cfg with that DSN (its pool, unopened, and its prober).
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
	return New(rc, hosts)
}

// PrimaryIndex returns the index of the host writes go to now (0 is the
// dsn's), or -1 while none takes writes. Any goroutine.
func (r *Router) PrimaryIndex() int {
	if h := r.primary.Load(); h != nil {
		return h.index
	}
	return -1
}
