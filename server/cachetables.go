package server

import (
	"context"
	"slices"
	"sync"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/internal/sqltables"
	"github.com/tether-php/tether/wire"
)

// Per-table invalidation (docs/operations.md, "Result cache"): a cached read
// is tagged with the tables internal/sqltables finds in its text, and a write
// drops only the results that read the tables it writes. What a statement's
// text does not show, the database's catalog does (CacheCatalog): a read of
// a view is dropped by a write to any table, a write to a table with
// triggers, rules, cascading foreign keys or inheritance drops the backend's
// whole cache, a read of a sequence is never cached. Whenever either is in
// doubt (a statement the lexer is not certain of, a catalog not read yet or
// not readable, a DDL statement since the catalog was read) the backend's
// whole cache goes, as it did before tables were known.

// catalogRefresh is how often a backend's catalog is read again: a view, a
// trigger or a foreign key made by another client is known within it (one
// made through tetherd at once). Until then, what it does is seen by the
// change stream, or within the TTL.
const catalogRefresh = 30 * time.Second

// maxReadMemo and maxReadMemoBytes bound the SQL texts whose analysis a
// backend remembers (WordPress's SQL carries its values: most texts come
// once).
const (
	maxReadMemo      = 4096
	maxReadMemoBytes = 1 << 20
)

// cacheBackend is what the cache knows of one SQL backend's tables.
type cacheBackend struct {
	name    string
	dialect sqltables.Dialect

	mu      sync.Mutex
	catalog *tether.Catalog // nil: not known (not read yet, unreadable, or a DDL since)
	gen     uint64          // bumped by every DDL: a catalog read across one is not kept
	reload  chan struct{}

	memo      map[string]readInfo // the analysis of each read's text; loop goroutine only
	memoBytes int
}

// readInfo is what a read's text says: whether it may be cached at all, and
// its analysis.
type readInfo struct {
	cacheable bool
	info      sqltables.Info
}

// newCacheBackend returns the table bookkeeping of a backend whose type
// names the SQL dialect its statements' tables are read in
// (tether.BackendType.Tables), or nil for another type.
func newCacheBackend(name string, cfg tether.BackendConfig) *cacheBackend {
	t, _ := tether.LookupBackendType(cfg.Type)
	if t.Tables == 0 {
		return nil
	}
	return &cacheBackend{name: name, dialect: t.Tables, reload: make(chan struct{}, 1)}
}

// tablesOf returns the table bookkeeping of the current backend of that
// name, or nil.
func (s *Server) tablesOf(backend string) *cacheBackend {
	if lb := s.live(backend); lb != nil {
		return lb.tables
	}
	return nil
}

func (cb *cacheBackend) loadCatalog() *tether.Catalog {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.catalog
}

// catalogChanged forgets the catalog (a DDL statement, through tetherd or
// in the change stream) and asks for it to be read again.
func (cb *cacheBackend) catalogChanged() {
	cb.mu.Lock()
	cb.catalog = nil
	cb.gen++
	cb.mu.Unlock()
	cb.askReload()
}

func (cb *cacheBackend) askReload() {
	select {
	case cb.reload <- struct{}{}:
	default:
	}
}

// readTags returns the tables a cacheable read's result depends on (all:
// any table), or ok false when it must not be cached. Loop goroutine only.
func (cb *cacheBackend) readTags(sql string) (tables []string, all, ok bool) {
	ri, seen := cb.memo[sql]
	if !seen {
		if cb.memo == nil || len(cb.memo) >= maxReadMemo || cb.memoBytes+len(sql) > maxReadMemoBytes {
			cb.memo, cb.memoBytes = make(map[string]readInfo, 64), 0
		}
		cb.memoBytes += len(sql)
		ri = readInfo{cacheable: cacheableRead(sql)}
		if ri.cacheable {
			ri.info = sqltables.Analyze(cb.dialect, sql)
		}
		cb.memo[sql] = ri
	}
	if !ri.cacheable {
		return nil, false, false
	}
	cat := cb.loadCatalog()
	if cat == nil {
		return nil, true, true
	}
	info := &ri.info
	all = !info.Certain || info.Kind != sqltables.Read || len(info.Tables) == 0
	for _, t := range info.Tables {
		if cat.NoCache[t] {
			return nil, false, false
		}
		if cat.ReadAll[t] {
			all = true
		}
	}
	if all {
		return nil, true, true
	}
	return info.Tables, false, true
}

// writeOf returns what a statement may write: the tables, or all (the
// backend's whole cache must go); neither when it writes nothing. ddl reports
// a DDL statement (which, inside a transaction, changes the catalog only once
// committed: see endTx). Safe from any goroutine.
func (s *Server) writeOf(backend string, op wire.Op, sql string) (tables []string, all, ddl bool) {
	cb := s.tablesOf(backend)
	if cb == nil {
		return nil, mayWrite(sql) || op != wire.OpQuery, false
	}
	// Every statement of a backend whose cache is in use comes here, reads
	// most: for a query, the look at the first word, which allocates
	// nothing, sends them back before the lexer runs. An exec of a SELECT
	// is run for its effect: the lexer tells whether it calls a function
	// that may write.
	if op == wire.OpQuery && !mayWrite(sql) {
		return nil, false, false
	}
	info := sqltables.Analyze(cb.dialect, sql)
	if !info.Certain {
		// A CALL, an unknown statement, a function that may write: anything.
		// (A query that calls a function that writes is the text's blind
		// spot: see the docs.)
		return nil, true, false
	}
	switch info.Kind {
	case sqltables.Read, sqltables.Other:
		return nil, false, false
	case sqltables.DDL:
		return nil, true, true
	}
	cat := cb.loadCatalog()
	if cat == nil || len(info.Tables) == 0 {
		return nil, true, false
	}
	for _, t := range info.Tables {
		if cat.WriteAll[t] || cat.ReadAll[t] { // an updatable view writes its base tables
			return nil, true, false
		}
	}
	return info.Tables, false, false
}

// noteDDL makes backend's catalog be read again after a DDL statement that
// has committed (outside a transaction: at once).
func (s *Server) noteDDL(backend string) {
	if cb := s.tablesOf(backend); cb != nil {
		cb.catalogChanged()
	}
}

// invalidate drops what a write to tables (all: to anything) of backend made
// stale: from the result cache, then from PHP's local caches (publish). Every
// drop goes through here.
func (c *cacheState) invalidate(backend string, tables []string, all bool, cause resultcache.Cause) {
	switch {
	case all:
		c.cache.InvalidateBackend(backend, cause)
	case len(tables) > 0:
		c.cache.Invalidate(backend, tables, cause)
	default:
		return
	}
	c.publish(backend, tables, all)
}

// streamInvalidate drops what a commit seen in backend's change stream made
// stale: its tables, unless the catalog says their writes reach further
// (MySQL's binary log does not show the rows a cascading foreign key
// changed), or the whole cache (tables nil: a statement of unknown reach,
// perhaps DDL).
func (s *Server) streamInvalidate(backend string, tables []string) {
	cb := s.tablesOf(backend)
	if tables == nil || cb == nil {
		if cb != nil {
			cb.catalogChanged()
		}
		s.invalidate(backend, nil, true, resultcache.CauseChangeStream)
		return
	}
	cat := cb.loadCatalog()
	all := cat == nil
	for _, t := range tables {
		if all || cat.WriteAll[t] || cat.ReadAll[t] {
			all = true
			break
		}
	}
	s.invalidate(backend, tables, all, resultcache.CauseChangeStream)
}

// startCatalog reads, in the background until ctx ends, lb's catalog when it
// can tell it, again every catalogRefresh and after every DDL.
func (s *Server) startCatalog(ctx context.Context, lb *liveBackend) {
	cc, ok := lb.b.(tether.CacheCatalog)
	if !ok || lb.tables == nil {
		return
	}
	s.bg.Add(1)
	go s.followCatalog(ctx, lb.tables, cc)
}

func (s *Server) followCatalog(ctx context.Context, cb *cacheBackend, cc tether.CacheCatalog) {
	defer s.bg.Done()
	var logged string
	for {
		cb.mu.Lock()
		gen := cb.gen
		cb.mu.Unlock()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var cat *tether.Catalog
		err := s.safeCall(cb.name, "catalog", func() (err error) {
			cat, err = cc.CacheCatalog(lctx)
			return err
		})
		cancel()
		if ctx.Err() != nil {
			return
		}
		cb.mu.Lock()
		if cb.gen == gen {
			cb.catalog = cat // nil on error
		}
		cb.mu.Unlock()
		switch {
		case err != nil && err.Error() != logged:
			s.log.Warn("result cache: per-table invalidation off: every write drops the backend's whole cache",
				"backend", cb.name, "err", err)
			logged = err.Error()
		case err == nil && logged != "":
			s.log.Info("result cache: per-table invalidation on", "backend", cb.name)
			logged = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-cb.reload:
		case <-time.After(catalogRefresh):
		}
	}
}

// CacheByTable reports whether writes to backend drop only the cached results
// that read the tables they write (its catalog is known), rather than the
// backend's whole cache.
func (s *Server) CacheByTable(backend string) bool {
	cb := s.tablesOf(backend)
	return cb != nil && cb.loadCatalog() != nil
}

// writeSet gathers what the statements of a transaction may have written,
// for its end.
type writeSet struct {
	mu     sync.Mutex
	all    bool
	ddl    bool
	tables []string
}

func (w *writeSet) add(tables []string, all, ddl bool) {
	if !all && len(tables) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ddl = w.ddl || ddl
	if w.all {
		return
	}
	if all || len(w.tables) > 64 {
		w.all, w.tables = true, nil
		return
	}
	for _, t := range tables {
		if !slices.Contains(w.tables, t) {
			w.tables = append(w.tables, t)
		}
	}
}

func (w *writeSet) take() (tables []string, all, ddl bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tables, all, ddl = w.tables, w.all, w.ddl
	w.tables, w.all, w.ddl = nil, false, false
	return tables, all, ddl
}

// CacheStats returns the result cache's counters and size (zero when the
// cache is off).
func (s *Server) CacheStats() resultcache.Stats {
	if s.cache == nil {
		return resultcache.Stats{}
	}
	return s.cache.Stats()
}
