package tether

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/internal/sqltables"
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

// maxReadMemo bounds the SQL texts whose analysis a backend remembers.
const maxReadMemo = 4096

// cacheBackend is what the cache knows of one SQL backend's tables.
type cacheBackend struct {
	name    string
	dialect sqltables.Dialect

	mu      sync.Mutex
	catalog *Catalog // nil: not known (not read yet, unreadable, or a DDL since)
	gen     uint64   // bumped by every DDL: a catalog read across one is not kept
	reload  chan struct{}

	memo map[string]readInfo // the analysis of each read's text; loop goroutine only
}

// readInfo is what a read's text says: whether it may be cached at all, and
// its analysis.
type readInfo struct {
	cacheable bool
	info      sqltables.Info
}

// newCacheBackends returns the per-table state of every MySQL and
// PostgreSQL backend of cfg.
func newCacheBackends(cfg Config) map[string]*cacheBackend {
	out := map[string]*cacheBackend{}
	for name, b := range cfg.Backends {
		var d sqltables.Dialect
		switch b.Type {
		case "mysql":
			d = sqltables.MySQL
		case "postgres":
			d = sqltables.PostgreSQL
		default:
			continue
		}
		out[name] = &cacheBackend{name: name, dialect: d, reload: make(chan struct{}, 1)}
	}
	return out
}

func (cb *cacheBackend) loadCatalog() *Catalog {
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
		if cb.memo == nil || len(cb.memo) >= maxReadMemo {
			cb.memo = make(map[string]readInfo, 64)
		}
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
// backend's whole cache must go); neither when it writes nothing. Safe from
// any goroutine.
func (s *Server) writeOf(backend, sql string) (tables []string, all bool) {
	cb := s.cacheBackends[backend]
	// Every statement of a backend whose cache is in use comes here, reads
	// most: the look at the first word, which allocates nothing, sends them
	// back before the lexer runs.
	if cb == nil || !mayWrite(sql) {
		return nil, cb == nil && mayWrite(sql)
	}
	info := sqltables.Analyze(cb.dialect, sql)
	if !info.Certain {
		// A CALL, an unknown statement: anything. (A SELECT calling a
		// function that writes is the text's blind spot: see the docs.)
		return nil, true
	}
	switch info.Kind {
	case sqltables.Read, sqltables.Other:
		return nil, false
	case sqltables.DDL:
		cb.catalogChanged()
		return nil, true
	}
	cat := cb.loadCatalog()
	if cat == nil || len(info.Tables) == 0 {
		return nil, true
	}
	for _, t := range info.Tables {
		if cat.WriteAll[t] || cat.ReadAll[t] { // an updatable view writes its base tables
			return nil, true
		}
	}
	return info.Tables, false
}

// invalidate drops what a write to tables (all: to anything) of backend made
// stale.
func (s *Server) invalidate(backend string, tables []string, all bool, cause resultcache.Cause) {
	switch {
	case all:
		s.cache.InvalidateBackend(backend, cause)
	case len(tables) > 0:
		s.cache.Invalidate(backend, tables, cause)
	}
}

// streamInvalidate drops what a commit seen in backend's change stream made
// stale: its tables, unless the catalog says their writes reach further
// (MySQL's binary log does not show the rows a cascading foreign key
// changed), or the whole cache (tables nil: a statement of unknown reach,
// perhaps DDL).
func (s *Server) streamInvalidate(backend string, tables []string) {
	cb := s.cacheBackends[backend]
	if tables == nil || cb == nil {
		if cb != nil {
			cb.catalogChanged()
		}
		s.cache.InvalidateBackend(backend, resultcache.CauseChangeStream)
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

// startCatalogs reads, in the background, the catalog of every backend that
// can tell it, again every catalogRefresh and after every DDL.
func (s *Server) startCatalogs(ctx context.Context) {
	for name, cb := range s.cacheBackends {
		cc, ok := s.backends[name].(CacheCatalog)
		if !ok {
			continue
		}
		s.bg.Add(1)
		go s.followCatalog(ctx, cb, cc)
	}
}

func (s *Server) followCatalog(ctx context.Context, cb *cacheBackend, cc CacheCatalog) {
	defer s.bg.Done()
	var logged string
	for {
		cb.mu.Lock()
		gen := cb.gen
		cb.mu.Unlock()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cat, err := cc.CacheCatalog(lctx)
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
	cb := s.cacheBackends[backend]
	return cb != nil && cb.loadCatalog() != nil
}

// writeSet gathers what the statements of a transaction may have written,
// for its end.
type writeSet struct {
	mu     sync.Mutex
	all    bool
	tables []string
}

func (w *writeSet) add(tables []string, all bool) {
	if !all && len(tables) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
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

func (w *writeSet) take() (tables []string, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tables, all = w.tables, w.all
	w.tables, w.all = nil, false
	return tables, all
}

// CacheStats returns the result cache's counters and size (zero when the
// cache is off).
func (s *Server) CacheStats() resultcache.Stats {
	if s.cache == nil {
		return resultcache.Stats{}
	}
	return s.cache.Stats()
}
