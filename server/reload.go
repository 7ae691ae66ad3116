package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/resultcache"
)

// A reload swaps the server's backends without dropping a client (Caddy's
// transactional reload, PgBouncer's RELOAD):
//
//  1. The new config has been validated (the caller did it).
//  2. Every backend that is new, or whose settings changed, is built and
//     opened beside the running ones. If one fails, those opened are closed
//     and nothing changes: the error says which and why.
//  3. The new set of backends is swapped in on the event loop, between two
//     requests: every request admitted from then on uses it. Unchanged
//     backends are the same objects, pools and all.
//  4. The backends it replaced or removed retire: requests admitted before
//     the swap finish on them, their open transactions run to commit or
//     rollback (or tx_idle_timeout), and then they close.
//
// What a reload cannot change ([server] but default_backend, [admin],
// [cache], log file and format) is left as it was and reported, so that the
// operator knows a restart is needed for it.

// liveBackend is a configured backend as the server runs it. A reload that
// changes or removes it retires it; one that leaves it as it was keeps it.
type liveBackend struct {
	seq  uint64 // newer backends of a name have higher ones
	name string
	cfg  tether.BackendConfig
	b    tether.Backend
	loop sqlpool.Backend // b, when the event loop drives it; else nil

	// cacheUsed: a query has asked the result cache for this backend's
	// results (until then writes have nothing to drop, and their text is not
	// looked at). tables: MySQL's and PostgreSQL's catalog, for per-table
	// invalidation (cachetables.go); nil for other types.
	cacheUsed atomic.Bool
	tables    *cacheBackend

	stopBG context.CancelFunc // its change stream and catalog reader; nil when none
	closed atomic.Bool        // retired and closed
}

// startCaching marks lb's cache as used, and reports whether this call did
// it: then writes until now went unseen, and what the caller stores must be
// dropped by any write to lb (tables nil, all true) until the catalog, read
// again here, says otherwise. Loop goroutine or not: the swap decides.
func (lb *liveBackend) startCaching() bool {
	if lb.cacheUsed.Load() || lb.cacheUsed.Swap(true) {
		return false
	}
	if lb.tables != nil {
		lb.tables.catalogChanged()
	}
	return true
}

// liveSeq numbers the liveBackends made.
var liveSeq atomic.Uint64

func newLiveBackend(name string, cfg tether.BackendConfig, b tether.Backend) *liveBackend {
	lb := &liveBackend{seq: liveSeq.Add(1), name: name, cfg: cfg, b: b, tables: newCacheBackend(name, cfg)}
	lb.loop, _ = b.(sqlpool.Backend)
	if n, ok := b.(tether.Namer); ok {
		n.SetName(name)
	}
	return lb
}

// backendSet is the server's backends at one time; a reload swaps in a new
// one whole. inflight counts the requests admitted while it was the current
// set: when a reload replaced it, the backends it retired wait for them.
type backendSet struct {
	byName      map[string]*liveBackend
	defaultName string
	slowNanos   int64 // log.slow_statement
	inflight    inflight
	// prev is the set it replaced, until that one has drained; drained is
	// closed once this set, replaced, has nothing in flight and neither has
	// any set before it.
	prev    *backendSet
	drained chan struct{}
}

func newBackendSet(cfg tether.Config, byName map[string]*liveBackend) *backendSet {
	return &backendSet{byName: byName, defaultName: cfg.Server.DefaultBackend,
		slowNanos: int64(cfg.Log.SlowStatement), drained: make(chan struct{})}
}

// live returns the current backend of that name, or nil. Safe from any
// goroutine.
func (s *Server) live(name string) *liveBackend { return s.set.Load().byName[name] }

// admit counts a request in flight, on the server (for the drain) and on the
// current backend set (for a reload's retiring of the backends it replaced);
// release, given what admit returned, ends it. Loop goroutine: the set only
// changes there, between two requests.
func (s *Server) admit() *backendSet {
	g := s.set.Load()
	g.inflight.Add(1)
	s.inflight.Add(1)
	return g
}

// release ends what admit began; g may be nil for a request that admit did
// not count on a set (a transaction's statements: the transaction holds its
// backend).
func (s *Server) release(g *backendSet) {
	if g != nil {
		g.inflight.Done()
	}
	s.inflight.Done()
}

// ReloadReport says what a reload did.
type ReloadReport struct {
	Added     []string `json:"added"`
	Changed   []string `json:"changed"`
	Removed   []string `json:"removed"`
	Unchanged []string `json:"unchanged"`
	// NeedRestart lists the settings that differ from the running ones and
	// that a reload does not change (by their TOML names).
	NeedRestart []string `json:"need_restart,omitempty"`
	Took        string   `json:"took"`
}

// NewBackendFunc builds (without connecting) a backend of a config.
type NewBackendFunc func(name string, cfg tether.BackendConfig) (tether.Backend, error)

// Reload applies cfg (validated by the caller) to the running server: see the
// top of this file. It returns an error, having changed nothing, when a new
// or changed backend cannot be built or opened within ctx. Reloads run one at
// a time.
func (s *Server) Reload(ctx context.Context, cfg tether.Config, build NewBackendFunc) (ReloadReport, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	start := time.Now()
	if s.draining.Load() {
		return ReloadReport{}, errors.New("reload: the server is shutting down")
	}
	cur := s.set.Load()
	var rep ReloadReport
	next := map[string]*liveBackend{}
	var opened []*liveBackend
	var retired []*liveBackend
	for _, name := range sortedKeys(cfg.Backends) {
		bc := cfg.Backends[name]
		if old := cur.byName[name]; old != nil && reflect.DeepEqual(old.cfg, bc) {
			next[name] = old
			rep.Unchanged = append(rep.Unchanged, name)
			continue
		} else if old != nil {
			rep.Changed = append(rep.Changed, name)
			retired = append(retired, old)
		} else {
			rep.Added = append(rep.Added, name)
		}
		b, err := build(name, bc)
		if err != nil {
			return ReloadReport{}, fmt.Errorf("reload: backend %s: %w (nothing changed)", name, err)
		}
		lb := newLiveBackend(name, bc, b)
		next[name] = lb
		opened = append(opened, lb)
	}
	for _, name := range sortedKeys(cur.byName) {
		if _, ok := cfg.Backends[name]; !ok {
			rep.Removed = append(rep.Removed, name)
			retired = append(retired, cur.byName[name])
		}
	}
	for _, lb := range opened {
		if lb.loop != nil {
			lb.loop.UseLoop(s.loop)
		}
	}
	if err := s.openBackends(ctx, opened); err != nil {
		return ReloadReport{}, fmt.Errorf("reload: %w (nothing changed)", err)
	}
	rep.NeedRestart = needRestart(s.cfg, cfg)

	set := newBackendSet(cfg, next)
	set.prev = cur
	s.metrics.addBackends(sortedKeys(next))
	swapped := make(chan struct{})
	s.loop.Post(func() {
		// The set and the retiring backends change together, so that a
		// snapshot counts each pool once (poolSnapshots).
		s.retireMu.Lock()
		s.set.Store(set)
		for _, old := range retired {
			s.retiringSet[old] = struct{}{}
		}
		s.retireMu.Unlock()
		// What the replaced backends cached may not be what their
		// successors would read: gone before any request reaches those.
		for _, old := range retired {
			if s.cache != nil {
				s.cache.InvalidateBackend(old.name, resultcache.CauseAdmin)
			}
		}
		s.noteReload()
		close(swapped)
	})
	select {
	case <-swapped:
	case <-s.loop.Done():
		closeBackends(context.Background(), opened)
		return rep, errors.New("reload: the event loop stopped")
	}
	go cur.drain()

	// The replaced backends' background work stops, their successors'
	// starts.
	for _, old := range retired {
		if r, ok := old.b.(tether.Retirer); ok {
			r.Retire()
		}
		if old.stopBG != nil {
			old.stopBG()
		}
	}
	for _, lb := range opened {
		s.startBackground(lb)
	}
	s.retiring.Add(len(retired))
	for _, old := range retired {
		go s.retire(cur, old)
	}
	rep.Took = time.Since(start).Round(time.Microsecond).String()
	s.log.Info("reloaded", "added", rep.Added, "changed", rep.Changed, "removed", rep.Removed,
		"unchanged", len(rep.Unchanged), "need_restart", rep.NeedRestart, "took", rep.Took)
	return rep, nil
}

// drain waits, once g has been replaced, until nothing admitted under it or
// any set before it is in flight, then closes g.drained.
func (g *backendSet) drain() {
	if g.prev != nil {
		<-g.prev.drained
		g.prev = nil
	}
	g.inflight.waitZero(context.Background())
	close(g.drained)
}

// retire closes lb, replaced or removed by a reload that replaced set g, once
// the requests admitted before the swap are over and its transactions have
// ended. A shutdown meanwhile closes it itself (Shutdown, which takes it
// with takeRetiring).
func (s *Server) retire(g *backendSet, lb *liveBackend) {
	defer s.retiring.Done()
	select {
	case <-g.drained:
	case <-s.closing:
		return
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.txsOn(lb) > 0 {
		select {
		case <-t.C:
		case <-s.closing:
			return
		}
	}
	if !s.takeRetiring(lb) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	lb.closed.Store(true) // closing: sessions stop reaching it (OnClose, sqlClient)
	err := s.safeCall(lb.name, "close", func() error { return lb.b.Close(ctx) })
	if err != nil {
		s.log.Warn("reload: close retired backend", "backend", lb.name, "err", err)
		return
	}
	s.log.Info("reload: retired backend closed", "backend", lb.name, "took", time.Since(start).Round(time.Millisecond))
}

// takeRetiring removes lb from the retiring backends; it reports false when
// someone else (a shutdown) took it first.
func (b *backendTable) takeRetiring(lb *liveBackend) bool {
	b.retireMu.Lock()
	defer b.retireMu.Unlock()
	if _, ok := b.retiringSet[lb]; !ok {
		return false
	}
	delete(b.retiringSet, lb)
	if b.retiredTotals == nil {
		b.retiredTotals = map[string]tether.PoolStats{}
	}
	total := b.retiredTotals[lb.name]
	addCounters(&total, lb.b.Stats())
	b.retiredTotals[lb.name] = total
	return true
}

// poolSnapshots returns the current pools, then the retiring ones. A
// current pool's counters count since tetherd started: those of the pools a
// reload replaced for its backend (closed or still retiring) are added to
// its own. All under retireMu, which a reload's swap also holds, so that each
// pool is counted once.
func (s *Server) poolSnapshots() (current, retiring []PoolSnapshot) {
	s.retireMu.Lock()
	defer s.retireMu.Unlock()
	since := make(map[string]tether.PoolStats, len(s.retiredTotals))
	for name, st := range s.retiredTotals {
		since[name] = st
	}
	for lb := range s.retiringSet {
		st := lb.b.Stats()
		retiring = append(retiring, PoolSnapshot{Backend: lb.name, Type: lb.cfg.Type, Stats: st, Retiring: true, Limits: s.poolLimits(lb.cfg)})
		total := since[lb.name]
		addCounters(&total, st)
		since[lb.name] = total
	}
	sort.Slice(retiring, func(i, j int) bool { return retiring[i].Backend < retiring[j].Backend })
	for _, lb := range s.backends() {
		st := lb.b.Stats()
		addCounters(&st, since[lb.name])
		current = append(current, PoolSnapshot{Backend: lb.name, Type: lb.cfg.Type, Stats: st, Limits: s.poolLimits(lb.cfg)})
	}
	return current, retiring
}

// retiringBackends lists the backends a reload retired that are not closed
// yet.
func (b *backendTable) retiringBackends() []*liveBackend {
	b.retireMu.Lock()
	defer b.retireMu.Unlock()
	out := make([]*liveBackend, 0, len(b.retiringSet))
	for lb := range b.retiringSet {
		out = append(out, lb)
	}
	return out
}

// startBackground starts lb's change stream and catalog reader, when the
// result cache is on and lb has them.
func (s *Server) startBackground(lb *liveBackend) {
	if s.cache == nil || s.bgCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(s.bgCtx)
	lb.stopBG = cancel
	s.startChangeStream(ctx, lb)
	s.startCatalog(ctx, lb)
}

// needRestart lists the settings that differ between the running config and
// next and that a reload leaves as they were.
func needRestart(running, next tether.Config) []string {
	var out []string
	r, n := running, next
	r.Server.DefaultBackend, n.Server.DefaultBackend = "", ""
	r.Log.Level, n.Log.Level = "", ""
	r.Log.SlowStatement, n.Log.SlowStatement = 0, 0
	out = diffFields("server", reflect.ValueOf(r.Server), reflect.ValueOf(n.Server), out)
	out = diffFields("admin", reflect.ValueOf(r.Admin), reflect.ValueOf(n.Admin), out)
	out = diffFields("cache", reflect.ValueOf(r.Cache), reflect.ValueOf(n.Cache), out)
	out = diffFields("log", reflect.ValueOf(r.Log), reflect.ValueOf(n.Log), out)
	return out
}

// diffFields appends section.key for every field of the structs a and b
// that differs, named by its toml tag.
func diffFields(section string, a, b reflect.Value, out []string) []string {
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, section+"."+name)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// backendTable is the server's backends: the set requests use now, which a
// reload swaps whole, and the backends a reload replaced, retiring until what
// they were given is done.
type backendTable struct {
	set         atomic.Pointer[backendSet] // the backends requests use now
	reloadMu    sync.Mutex                 // one reload at a time
	retireMu    sync.Mutex
	retiringSet map[*liveBackend]struct{}
	// retiredTotals: by backend name, the counters of the pools a reload
	// replaced and that are closed, so that a backend's counters keep
	// counting across reloads (Prometheus counters never go down).
	retiredTotals map[string]tether.PoolStats
	retiring      sync.WaitGroup // retire goroutines
	closing       chan struct{}  // closed when the server shuts down
}

// addCounters adds o's counters (not its gauges) to s.
func addCounters(s *tether.PoolStats, o tether.PoolStats) {
	s.Waiting += o.Waiting
	s.Resets += o.Resets
	s.Dials += o.Dials
	s.DialErrors += o.DialErrors
	s.Cancels += o.Cancels
	s.IllegalMoves += o.IllegalMoves
}

// backends returns the current backends.
func (b *backendTable) backends() []*liveBackend {
	set := b.set.Load()
	out := make([]*liveBackend, 0, len(set.byName))
	for _, name := range sortedKeys(set.byName) {
		out = append(out, set.byName[name])
	}
	return out
}
