package server

import (
	"context"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/internal/sqltables"
	"github.com/tether-php/tether/wire"
)

// The result cache for the key API's reads (get, multi_get, scan, read_rows)
// and for joins, on any backend: the same cache as SQL queries (cache.go),
// for requests that set cache_ttl_ms outside a transaction. They run on
// worker goroutines; a hit or a merged read is answered without one.
//
// What invalidates them:
//   - a read of a table of a MySQL or PostgreSQL backend is tagged with that
//     table (as the SQL lexer names it: unqualified, lower case), so that a
//     statement that writes the table drops it, as it drops the SQL reads of
//     it; on other backends a read depends on the whole backend;
//   - every key-API write drops its backend's whole cache (noteWrite);
//   - a join is tagged on its left backend like the read that makes its left
//     side, and depends on its right backend as a whole (resultcache's
//     Read.Also): any write there drops it.
//
// A result with a cursor (a page of a scan or a paged query) is not cached.

// cachedKeyRead is a key-API read or a join waiting on an identical one in
// flight: a resultcache.Waiter.
type cachedKeyRead struct {
	s       *Server
	ss      *session
	req     wire.Request
	backend string // its label in the request metrics (metricsBackend)
	start   time.Time
	gen     *backendSet
	done    atomic.Bool
}

// metricsBackend is a cached key read's backend label in the request
// metrics: the backend it ran on, or none for a join, as when it runs
// uncached (docs/operations.md, tether_requests_total).
func metricsBackend(r *wire.Request, t target) string {
	if r.Op == wire.OpJoin {
		return ""
	}
	return t.name
}

// columnarReply reports whether r's result goes out column-oriented (every
// join does).
func columnarReply(r *wire.Request) bool { return r.Columnar || r.Op == wire.OpJoin }

// runCachedKeyRead answers a key-API read or a join that set cache_ttl_ms:
// from the cache, by waiting on an identical read in flight, or by running
// it as the leader. It reports false when the request is not one the cache
// may hold (the caller runs it as usual). Loop goroutine.
func (s *Server) runCachedKeyRead(ss *session, r *wire.Request) bool {
	if s.draining.Load() {
		return false
	}
	read, t, ok := s.keyRead(ss, r)
	if !ok {
		return false
	}
	// Counted before Begin: once registered, cr may be served at once from
	// the leader's worker goroutine.
	cr := &cachedKeyRead{s: s, ss: ss, req: *r, backend: metricsBackend(r, t), start: time.Now(), gen: s.admit()}
	ss.pending.Add(1)
	out, value, ticket := s.cache.Begin(&read, cr)
	switch out {
	case resultcache.Hit:
		s.release(cr.gen)
		s.unpend(ss)
		took := s.observed(ss, r.Op, cr.backend, "", nil, cr.start)
		id, columnar := r.ID, columnarReply(r)
		s.replyNow(ss, func(b []byte) []byte {
			return wire.AppendCachedResult(b, wire.Head{ID: id, Took: took}, columnar, value)
		})
	case resultcache.Wait:
		// Counted until Served.
	case resultcache.Lead:
		if ticket == nil {
			s.release(cr.gen)
			s.unpend(ss)
			return false
		}
		// Counted already: the worker ends it.
		s.onWorkerAdmitted(ss, r, t, cr.gen, func(ss *session, req *wire.Request, t target, deadline time.Time) {
			s.leadKeyRead(ss, req, t, deadline, ticket, cr.start)
		})
	}
	return true
}

// keyRead returns what the cache needs of r, and r's backend (a join's left
// one), or false when the cache may not hold it.
func (s *Server) keyRead(ss *session, r *wire.Request) (resultcache.Read, target, bool) {
	main := r
	if r.Op == wire.OpJoin {
		main = r.Left
	}
	t, e := s.backendFor(main.Backend)
	if e != nil || t.live == nil {
		return resultcache.Read{}, t, false
	}
	tables, all, ok := s.readTables(t.live, main)
	if !ok {
		return resultcache.Read{}, t, false
	}
	var also *liveBackend
	if r.Op == wire.OpJoin {
		rt, e := s.backendFor(r.Right.Backend)
		if e != nil || rt.live == nil {
			return resultcache.Read{}, t, false
		}
		if rt.live == t.live {
			// Both sides on one backend: its writes to the right table
			// must drop the join too.
			rtables, rall, ok := s.readTables(rt.live, &wire.Request{Op: wire.OpGet, Table: r.Right.Table})
			if !ok {
				return resultcache.Read{}, t, false
			}
			all = all || rall
			tables = append(append([]string(nil), tables...), rtables...)
		} else {
			also = rt.live
		}
	}
	// Encoded whole, less what does not change its result: the key. The
	// leading NUL keeps it apart from every SQL text.
	k := *r
	k.ID, k.TimeoutMS, k.CacheTTLMS, k.HasID = 0, 0, 0, false
	read := resultcache.Read{Key: resultcache.Key{Backend: t.name, SQL: "\x00" + string(wire.AppendRequest(nil, &k)),
		Columnar: columnarReply(r), TimeFormat: r.TimeFormat},
		Tables: tables, AllTables: all, TTL: time.Duration(r.CacheTTLMS) * time.Millisecond}
	for _, lb := range []*liveBackend{t.live, also} {
		if lb != nil && lb.startCaching() {
			read.Tables, read.AllTables = nil, true
		}
	}
	if also != nil {
		read.Also = also.name
	}
	return read, t, true
}

// readTables returns the tables r reads on lb, as writes name them (all:
// unknown, any write to lb drops it), or false when it may not be cached.
func (s *Server) readTables(lb *liveBackend, r *wire.Request) (tables []string, all, ok bool) {
	cb := lb.tables
	if r.Op == wire.OpQuery {
		if cb == nil {
			if !cacheableRead(r.SQL) {
				return nil, false, false
			}
			return nil, true, true
		}
		return cb.readTags(r.SQL)
	}
	if cb == nil {
		return nil, true, true // not a catalogued SQL backend: the whole backend
	}
	name := sqltables.TableName(r.Table)
	cat := cb.loadCatalog()
	switch {
	case cat == nil:
		return nil, true, true
	case cat.NoCache[name]:
		return nil, false, false
	case cat.ReadAll[name]:
		return nil, true, true
	}
	return []string{name}, false, true
}

// leadKeyRead runs a cached key-API read or join as the leader of those that
// wait on it, stores its result and answers. Worker goroutine.
func (s *Server) leadKeyRead(ss *session, r *wire.Request, t target, deadline time.Time, ticket *resultcache.Ticket, start time.Time) {
	ctx, cancel := context.WithDeadline(ss.ctx, deadline)
	run := t
	if r.Op == wire.OpJoin {
		run = target{} // a join names its backends itself
	}
	res, err := s.execute(ctx, run, nil, r)
	err = classify(ctx, err)
	cancel()
	took := s.observed(ss, r.Op, metricsBackend(r, t), "", err, start)
	s.logFailure(r, err)
	columnar := columnarReply(r)
	if err == nil && res.Cursor == nil {
		body, encErr := wire.AppendResultBody(nil, columnar, res.Columns, res.Rows)
		if encErr == nil && len(body) <= s.cfg.Server.MaxResultBytes {
			s.cache.Complete(ticket, body, nil)
			s.reply(ss, func(b []byte) []byte {
				return wire.AppendCachedResult(b, wire.Head{ID: r.ID, Took: took}, columnar, body)
			})
			return
		}
	}
	// Not stored: the waiters run it themselves (ErrRetry).
	s.cache.Abandon(ticket)
	s.reply(ss, func(buf []byte) []byte { return s.appendOutcome(buf, wire.Head{ID: r.ID, Took: took}, r, res, err) })
}

// Served implements resultcache.Waiter: the read cr waited on is over. It is
// called on the leader's worker goroutine.
func (cr *cachedKeyRead) Served(value []byte, err error) {
	if !cr.done.CompareAndSwap(false, true) {
		return
	}
	s, ss, r := cr.s, cr.ss, &cr.req
	if err == resultcache.ErrRetry {
		// Its leader stored nothing (an error, a cursor, a result too
		// large): run it again, past the cache, from the loop. It stays
		// counted until then, so that no drain or hand-over sees its
		// connection idle meanwhile.
		req := *r
		s.loop.Post(func() {
			if req.Op == wire.OpJoin {
				s.runJoin(ss, &req)
			} else {
				s.spawn(ss, &req, s.runOp)
			}
			s.release(cr.gen)
			s.unpend(ss)
		})
		return
	}
	defer s.release(cr.gen)
	defer s.unpend(ss)
	took := s.observed(ss, r.Op, cr.backend, "", err, cr.start)
	if err != nil {
		e := tether.AsError(err)
		s.reply(ss, func(b []byte) []byte { return appendErr(b, wire.Head{ID: r.ID, Took: took}, e) })
		return
	}
	columnar := columnarReply(r)
	s.reply(ss, func(b []byte) []byte {
		return wire.AppendCachedResult(b, wire.Head{ID: r.ID, Took: took}, columnar, value)
	})
}
