package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/internal/shmversions"
	"github.com/tether-php/tether/internal/sqltext"
	"github.com/tether-php/tether/wire"
)

// The shared result cache (internal/resultcache; docs/operations.md, "Result
// cache"), on the backends the event loop drives (MySQL/MariaDB, PostgreSQL):
// a query that sets cache_ttl_ms outside a transaction is answered from the
// cache when an identical one (same backend, SQL, typed parameters, session
// settings and reply form) was stored less than its TTL ago and no write
// through tetherd has touched its backend since; identical ones in flight at
// once run once. Every statement that may write, through tetherd on that
// backend, drops the backend's cached results after the database acknowledged
// it and before its client is answered, so that a client reads its own writes.
//
// This first cut drops a backend's whole cache on any write to it: the
// statement's tables are not read yet (internal/sqltables will), which the
// issue allows ("when in doubt, drop the backend's whole cache").

// cacheState is the shared result cache, nil when off, and its background
// work (change streams, catalogs): its context is bgCtx, stopped by bgStop,
// waited for by bg.
type cacheState struct {
	cache   *resultcache.Cache
	bgCtx   context.Context
	bgStop  context.CancelFunc
	bg      sync.WaitGroup
	bodyBuf []byte // scratch of resultBody; loop goroutine only

	// versions is where table versions are published for PHP's local
	// cache (cachelocal.go), nil when cache.local is off; its heartbeat
	// goroutine stops on versionsStop and closes versionsDone.
	versions     atomic.Pointer[shmversions.Segment]
	versionsStop chan struct{}
	versionsDone chan struct{}
}

// newResultCache returns the cache cfg asks for, or nil when both caching and
// merging are off. It holds at most a quarter of the memory budget
// (server.max_memory_bytes), whatever max_bytes says, so that a small budget
// set without a thought for the cache still leaves the clients room.
func newResultCache(cfg tether.CacheConfig, memoryBudget int64) *resultcache.Cache {
	if cfg.MaxBytes == 0 && !cfg.Merge {
		return nil
	}
	maxBytes := cfg.MaxBytes
	if memoryBudget > 0 && maxBytes > memoryBudget/4 {
		maxBytes = memoryBudget / 4
	}
	entry := cfg.MaxEntryBytes
	if maxBytes > 0 && int64(entry) > maxBytes {
		entry = int(maxBytes)
	}
	return resultcache.New(resultcache.Config{MaxBytes: maxBytes, MaxEntryBytes: entry, Merge: cfg.Merge})
}

// cachedRead is a query that asked for the cache, while it waits for an
// identical read in flight (a resultcache.Waiter), and what it needs to run
// on its own if that read is abandoned. It owns its SQL text and parameters
// (each frame's decode allocates them anew).
type cachedRead struct {
	s     *Server
	ss    *session
	t     target
	lb    sqlpool.Backend
	req   wire.Request
	read  resultcache.Read
	done  atomic.Bool // served once
	start time.Time   // when it was received, for metrics
	gen   *backendSet // what admit returned, while it waits
	local *localRead  // the versions its reply carries, if it asked (cachelocal.go)
}

// runCachedQuery answers a query that set cache_ttl_ms outside a transaction
// (or any, with merge_uncached): from the cache, by waiting on an identical
// read in flight, or by running it as the leader of those that come
// meanwhile. It reports false when the query
// is not one the cache may hold (then the caller runs it as usual).
func (s *Server) runCachedQuery(ss *session, r *wire.Request, t target, lb sqlpool.Backend) bool {
	read, ok := s.cacheRead(ss, r, t)
	if !ok {
		return false
	}
	cr := &cachedRead{s: s, ss: ss, t: t, lb: lb, read: read, start: time.Now(), req: wire.Request{ID: r.ID, Op: r.Op, Backend: r.Backend, SQL: r.SQL,
		Params: r.Params, Columnar: r.Columnar, TimeFormat: r.TimeFormat, CacheTTLMS: r.CacheTTLMS, TimeoutMS: r.TimeoutMS, Versions: r.Versions,
		Primary: r.Primary}}
	if r.Versions {
		cr.local = s.localVersions(r, &cr.read, ss.sqlClient(t.live).Profile.Key())
	}
	return s.beginCachedRead(cr)
}

// cacheRead returns what the cache needs of a query outside a transaction on
// t's backend, or false when the cache may not hold it (not asked for, not
// cacheable, caching off). Loop goroutine.
func (s *Server) cacheRead(ss *session, r *wire.Request, t target) (resultcache.Read, bool) {
	if s.cache == nil || t.live == nil || t.live.tables == nil || r.Op != wire.OpQuery {
		return resultcache.Read{}, false
	}
	if r.CacheTTLMS <= 0 && !(s.cfg.Cache.MergeUncached && s.cfg.Cache.Merge) {
		return resultcache.Read{}, false
	}
	tables, all, ok := t.live.tables.readTags(r.SQL)
	if !ok {
		return resultcache.Read{}, false
	}
	if t.live.startCaching() { // before Begin: from now on, writes to t drop what it stores
		tables, all = nil, true
	}
	return resultcache.Read{
		Key: resultcache.Key{Backend: t.name, SQL: r.SQL, Params: r.Params, Profile: ss.sqlClient(t.live).Profile,
			Columnar: r.Columnar, TimeFormat: r.TimeFormat},
		Tables:    tables,
		AllTables: all,
		TTL:       time.Duration(r.CacheTTLMS) * time.Millisecond,
	}, true
}

// batchCachedRead answers a batch's query from the cache (true, with the
// stored body), or returns the ticket under which its result is to be
// stored when it has run (nil: it runs past the cache). In a batch a read
// never waits on an identical one in flight: the batch's other operations
// run meanwhile. Loop goroutine.
func (s *Server) batchCachedRead(ss *session, op *wire.Request, t target) (hit []byte, ticket *resultcache.Ticket) {
	read, ok := s.cacheRead(ss, op, t)
	if !ok || read.TTL <= 0 {
		return nil, nil
	}
	out, value, ticket := s.cache.Begin(&read, nil)
	if out == resultcache.Hit {
		return value, nil
	}
	return nil, ticket
}

// completeBatchRead stores a batch query's result under its ticket (its
// encoder's body, when it succeeded within max_result_bytes).
func (s *Server) completeBatchRead(t *resultcache.Ticket, q *sqlpool.Request, enc *wire.ResultEncoder) {
	if q.Err != nil {
		s.cache.Abandon(t)
		return
	}
	body := s.resultBody(enc)
	if len(body) > s.cfg.Server.MaxResultBytes {
		s.cache.Abandon(t)
		return
	}
	s.cache.Complete(t, body, nil)
}

// resultBody returns enc's result body in the loop's scratch buffer:
// Complete copies what it stores, and its waiters' replies copy it too, so
// the body of a leading read need not be a buffer of its own. Loop goroutine
// only; valid until the next call.
func (c *cacheState) resultBody(enc *wire.ResultEncoder) []byte {
	if cap(c.bodyBuf) > keepBodyBuf {
		c.bodyBuf = nil
	}
	c.bodyBuf = enc.AppendBody(c.bodyBuf[:0])
	return c.bodyBuf
}

// keepBodyBuf bounds the scratch buffer resultBody keeps between reads.
const keepBodyBuf = 1 << 20

// beginCachedRead asks the cache about cr and answers, waits or leads.
func (s *Server) beginCachedRead(cr *cachedRead) bool {
	out, value, ticket := s.cache.Begin(&cr.read, cr)
	switch out {
	case resultcache.Hit:
		took := s.observed(cr.ss, wire.OpQuery, cr.t.name, cr.req.SQL, nil, cr.start)
		id, columnar := cr.req.ID, cr.req.Columnar
		s.replyNow(cr.ss, func(b []byte) []byte {
			return wire.AppendCachedResult(b, wire.Head{ID: id, Took: took}, columnar, value)
		})
	case resultcache.Wait:
		// Counted as in flight, like the read it waits on: the drain waits
		// for it, and so does max_client_requests.
		cr.gen = s.admit()
		cr.ss.pending.Add(1)
	case resultcache.Lead:
		if ticket == nil {
			return false // not keyable: run it as usual
		}
		r := &cr.req
		c := s.newCall(cr.ss, r, cr.t.name)
		c.ticket = ticket
		c.local = cr.local
		c.q.Client = cr.ss.sqlClient(cr.t.live)
		if _, replicated := cr.lb.(sqlpool.Causal); replicated {
			// What the cache keeps (and those who wait on this read get)
			// is current: a replica could be behind a write another client
			// just made, and the entry would outlive it.
			c.q.Primary = true
		}
		c.gen = s.admit()
		cr.ss.pending.Add(1)
		cr.lb.Submit(&c.q)
	}
	return true
}

// Served implements resultcache.Waiter: the read cr waited on is over. It is
// called on the event loop's goroutine (the leader's callDone).
func (cr *cachedRead) Served(value []byte, err error) {
	if !cr.done.CompareAndSwap(false, true) {
		return
	}
	s := cr.s
	if err == resultcache.ErrRetry {
		// Its leader gave up for reasons of its own (its deadline, its client
		// gone): run it again, merged anew with the others that waited, on
		// the backend of its name now (a reload may have replaced the one it
		// began on). Still counted until it is admitted again.
		defer s.release(cr.gen)
		defer s.unpend(cr.ss)
		t, lb, ok := s.loopBackend(cr.ss, &cr.req)
		if !ok {
			e := tether.Errorf(tether.CodeUnknownBackend, "no backend named %q", cr.req.Backend)
			if t.live != nil {
				e = tether.Errorf(tether.CodeUnavailable, "backend %q changed type in a reload", cr.req.Backend)
			}
			s.replyErrorNow(cr.ss, cr.req.ID, e)
			return
		}
		again := &cachedRead{s: s, ss: cr.ss, t: t, lb: lb, req: cr.req, start: cr.start}
		if read, ok := s.cacheRead(cr.ss, &again.req, t); ok {
			again.read = read
			if again.req.Versions {
				again.local = s.localVersions(&again.req, &again.read, cr.ss.sqlClient(t.live).Profile.Key())
			}
			if s.beginCachedRead(again) {
				return
			}
		}
		s.runLoopSQLUncached(cr.ss, &again.req, t, lb)
		return
	}
	s.release(cr.gen)
	s.unpend(cr.ss)
	id, columnar := cr.req.ID, cr.req.Columnar
	took := s.observed(cr.ss, wire.OpQuery, cr.t.name, cr.req.SQL, err, cr.start)
	if err != nil {
		s.replyErrorNow(cr.ss, id, tether.AsError(err))
		return
	}
	if lr := cr.local; lr != nil {
		s.replyNow(cr.ss, func(b []byte) []byte {
			return wire.AppendCachedResultVersions(b, wire.Head{ID: id, Took: took}, columnar, value, &lr.v)
		})
		return
	}
	s.replyNow(cr.ss, func(b []byte) []byte {
		return wire.AppendCachedResult(b, wire.Head{ID: id, Took: took}, columnar, value)
	})
}

// completeCachedRead hands the outcome of a leading read to the cache (and so
// to its waiters): a result within max_result_bytes is shared and stored; a
// database's error is shared; an outcome of the leader's own (its deadline,
// its client gone, no connection free in time) lets the waiters run it
// themselves.
func (s *Server) completeCachedRead(c *sqlCall) {
	t := c.ticket
	c.ticket = nil
	q := &c.q
	if q.Err == nil {
		body := s.resultBody(c.enc)
		if len(body) <= s.cfg.Server.MaxResultBytes {
			s.cache.Complete(t, body, nil)
			return
		}
		s.cache.Complete(t, nil, tether.Errorf(tether.CodeTooLarge, "result of %d bytes is over max_result_bytes (%d)", len(body), s.cfg.Server.MaxResultBytes))
		return
	}
	switch tether.AsError(q.Err).Code {
	case tether.CodeBackendError, tether.CodeTooLarge:
		s.cache.Complete(t, nil, q.Err)
	default:
		s.cache.Abandon(t)
	}
}

// noteWrite drops the cached results of backend after an operation outside a
// transaction that may have written there (a statement: what read the tables
// it writes, see cachetables.go; the key API's writes: the backend's whole
// cache), before its reply goes out. Until a query has asked for the cache
// on that backend there is nothing to drop, and nothing is looked at.
func (s *Server) noteWrite(backend string, op wire.Op, sql string) {
	if s.cache == nil {
		return
	}
	if lb := s.live(backend); lb == nil || !lb.cacheUsed.Load() {
		return
	}
	switch op {
	case wire.OpQuery, wire.OpExec:
		tables, all, ddl := s.writeOf(backend, op, sql)
		if ddl {
			s.noteDDL(backend)
		}
		s.invalidate(backend, tables, all, resultcache.CauseWrite)
	case wire.OpPut, wire.OpDelete, wire.OpMutateRow, wire.OpIncrement, wire.OpCheckAndMutate:
		s.invalidate(backend, nil, true, resultcache.CauseKeyAPI)
	}
}

// cacheableRead reports whether a query's result may be cached: a plain
// SELECT (or SHOW) that names none of the functions whose results change
// without a write (time, randomness, sequences, the session's own state) and
// takes no locks. It is a look at the text, erring towards "no".
func cacheableRead(sql string) bool {
	if !strings.EqualFold(sqltext.First(sql), "SELECT") {
		return false
	}
	for _, n := range uncacheable {
		if sqltext.ContainsFold(sql, n) {
			return false
		}
	}
	return true
}

// uncacheable are the names whose presence in a SELECT keeps it out of the
// cache: functions whose value changes without a write, session state, locking
// reads, SELECT ... INTO, and the servers' own catalogs.
var uncacheable = []string{
	"NOW(", "CURRENT_TIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "CURDATE", "CURTIME", "SYSDATE", "UNIX_TIMESTAMP",
	"UTC_", "LOCALTIME", "RAND(", "RANDOM(", "UUID", "NEXTVAL", "CURRVAL", "LASTVAL", "SETVAL", "LAST_INSERT_ID",
	"FOUND_ROWS", "ROW_COUNT", "CONNECTION_ID", "USER(", "CURRENT_USER", "SESSION_USER", "DATABASE(", "SCHEMA(",
	"CURRENT_SETTING", "CLOCK_TIMESTAMP", "STATEMENT_TIMESTAMP", "TIMEOFDAY", "TXID_", "PG_", "SLEEP", "BENCHMARK",
	"GET_LOCK", "IS_FREE_LOCK", "IS_USED_LOCK", "RELEASE_LOCK", "@", "FOR UPDATE", "FOR SHARE", "FOR NO KEY",
	"FOR KEY SHARE", "LOCK IN SHARE MODE", "INTO", "INFORMATION_SCHEMA", "PERFORMANCE_SCHEMA", "MYSQL.", "SYS.",
}

// mayWrite reports whether a statement may change what a cached read
// returns, by its first keyword, whether it runs as a query or an exec: a
// SELECT only with INTO (a PostgreSQL SELECT ... INTO makes a table);
// SHOW, DESCRIBE and EXPLAIN (not EXPLAIN ANALYZE, which runs its
// statement) never; SET never (session settings and variables: a
// framework's connect-time SET NAMES must not empty the cache on every page);
// everything else may (a PostgreSQL WITH may hold an UPDATE; INSERT ...
// RETURNING is a query). A function that writes, called from a SELECT or a
// SET, is not seen (docs/operations.md says so).
func mayWrite(sql string) bool {
	// Called on every statement once a backend's results are cached: a look
	// that does not allocate.
	switch w := sqltext.First(sql); {
	case strings.EqualFold(w, "SELECT"):
		return sqltext.ContainsFold(sql, "INTO")
	case strings.EqualFold(w, "EXPLAIN"):
		return sqltext.ContainsFold(sql, "ANALYZE")
	case strings.EqualFold(w, "SHOW"), strings.EqualFold(w, "DESCRIBE"), strings.EqualFold(w, "DESC"), strings.EqualFold(w, "SET"):
		return false
	}
	return true
}
