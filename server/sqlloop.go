package server

import (
	"sync"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/wire"
)

// The path of a SQL statement to a backend whose connections the event loop
// drives (sqlpool.Backend: MySQL, PostgreSQL). Everything here runs on the
// loop goroutine: the frame is decoded, the statement written to a server
// connection, its answer decoded into the reply and the reply written, with
// no goroutine hand-off (docs/benchmarks.md measures what that saves).

// encoders are reused ResultEncoders: a query's rows are encoded into one as
// they are decoded from the server.
// The reply encoder is the row sink of a loop request.
var _ tether.RowSink = (*wire.ResultEncoder)(nil)

var encoders = sync.Pool{New: func() any { return new(wire.ResultEncoder) }}

func getEncoder(h wire.Head, columnar bool, maxBytes int) *wire.ResultEncoder {
	e := encoders.Get().(*wire.ResultEncoder)
	e.Reset(h, columnar, maxBytes)
	return e
}

func putEncoder(e *wire.ResultEncoder) {
	e.Release(1 << 20)
	encoders.Put(e)
}

// sqlClient returns the session's pooled state on a loop backend (its session
// settings), creating it on first use. When a reload replaced the backend of
// that name, the session's settings go with it to its successor (profiles
// compare by their text, not by pool), and the state on backends closed
// since is forgotten.
func (ss *session) sqlClient(lb *liveBackend) *sqlpool.Client {
	if c, ok := ss.clients[lb]; ok {
		return c
	}
	if ss.clients == nil {
		ss.clients = map[*liveBackend]*sqlpool.Client{}
	}
	c := &sqlpool.Client{}
	var newest *liveBackend // the latest backend of the name before lb: its settings are the session's
	for old, oc := range ss.clients {
		if old.name == lb.name && old.cfg.Type == lb.cfg.Type && (newest == nil || old.seq > newest.seq) {
			// The session's settings, and the read-your-writes state a
			// replicated backend keeps for it, follow it to the reloaded
			// backend.
			newest, c.Profile, c.Route = old, oc.Profile, oc.Route
		}
		if old.closed.Load() {
			delete(ss.clients, old)
		}
	}
	ss.clients[lb] = c
	return c
}

// sqlCall is a client's query, exec, commit or rollback on a loop backend,
// with what its reply needs. Calls are reused (loop goroutine only): one
// answered the normal way is referenced by nobody once answered; one given up
// on (timeout, client gone) may still be referenced by its connection, and is
// left to the garbage collector.
type sqlCall struct {
	q     sqlpool.Request
	ss    *session
	h     wire.Head
	op    wire.Op
	enc   *wire.ResultEncoder
	be    string      // the backend's name, for logs and metrics
	start time.Time   // when it was received, for metrics
	tx    *txState    // set for a statement, commit or rollback of a transaction
	gen   *backendSet // what admit returned; nil for a transaction's
	// ticket, for a query that leads a cached read (cache.go): its outcome
	// goes to the cache and the reads that wait on it.
	ticket *resultcache.Ticket
	local  *localRead // the versions its reply carries (cachelocal.go), or nil
}

// maxFreeCalls bounds the calls kept for reuse.
const maxFreeCalls = 256

// newCall returns a call for a frame's query or exec (r is the loop's decode
// scratch: nothing of it is kept but what it owns, the SQL text and the
// parameters, which each decode allocates anew).
func (s *Server) newCall(ss *session, r *wire.Request, backend string) *sqlCall {
	var c *sqlCall
	if n := len(s.freeCalls); n > 0 {
		c = s.freeCalls[n-1]
		s.freeCalls[n-1] = nil
		s.freeCalls = s.freeCalls[:n-1]
	} else {
		c = &sqlCall{}
	}
	c.q = sqlpool.Request{Kind: sqlpool.KindExec, SQL: r.SQL, Params: r.Params, Deadline: s.deadline(r.TimeoutMS),
		Primary: r.Primary, Owner: c, Done: s.callDone}
	c.ss, c.h, c.op, c.be, c.start = ss, wire.Head{ID: r.ID}, r.Op, backend, time.Now()
	if r.Op == wire.OpQuery {
		c.q.Kind = sqlpool.KindQuery
		c.enc = getEncoder(c.h, r.Columnar, s.cfg.Server.MaxResultBytes)
		c.enc.SetTimeFormat(r.TimeFormat)
		c.q.Sink = c.enc
	}
	return c
}

// callDone answers a call: the Done of its request. A panic in it answers
// the call internal (unless its reply was written), and the call is not
// reused.
func (s *Server) callDone(q *sqlpool.Request) {
	c := q.Owner.(*sqlCall)
	replied := false
	defer func() {
		if v := recover(); v != nil {
			e := tether.RecoverPanic(s.log, c.be, c.op.String(), v)
			if !replied {
				s.replyErrorNow(c.ss, c.h.ID, e)
			}
		}
	}()
	s.release(c.gen)
	s.unpend(c.ss)
	if t := c.tx; t != nil {
		t.finished(time.Now())
		if c.op == wire.OpCommit || c.op == wire.OpRollback {
			s.endTx(t, nil)
		}
	}
	s.logSQLFailure(c.op, c.be, q.Err)
	c.h.Took = s.observed(c.ss, c.op, c.be, c.q.SQL, q.Err, c.start)
	if c.enc != nil {
		c.enc.SetTook(c.h.Took)
	}
	// The cache hears of a write before its client does (so that the client
	// reads its own writes), and of a leading read's outcome.
	switch {
	case c.ticket != nil:
		s.completeCachedRead(c)
	case c.tx != nil:
		if c.op == wire.OpQuery || c.op == wire.OpExec {
			c.tx.noteStatement(s, c.op, c.q.SQL)
		}
	default:
		s.noteWrite(c.be, c.op, c.q.SQL)
	}
	s.replyNow(c.ss, func(b []byte) []byte {
		if c.local != nil {
			return s.appendLeadVersions(b, c)
		}
		if q.Err == nil && (c.op == wire.OpCommit || c.op == wire.OpRollback) {
			return wire.AppendOK(b, c.h)
		}
		return s.appendSQLOutcome(b, c.h, c.op, q, c.enc)
	})
	replied = true
	if c.enc != nil {
		putEncoder(c.enc)
	}
	if !q.State.Abandoned && len(s.freeCalls) < maxFreeCalls {
		*c = sqlCall{}
		s.freeCalls = append(s.freeCalls, c)
	}
}

// newSQLRequest builds the loop request of a batch's query or exec, and its
// encoder.
func (s *Server) newSQLRequest(ss *session, r *wire.Request, lb *liveBackend, h wire.Head) (*sqlpool.Request, *wire.ResultEncoder) {
	q := &sqlpool.Request{Kind: sqlpool.KindExec, SQL: r.SQL, Params: r.Params, Deadline: s.deadline(r.TimeoutMS),
		Primary: r.Primary, Client: ss.sqlClient(lb)}
	var enc *wire.ResultEncoder
	if r.Op == wire.OpQuery {
		q.Kind = sqlpool.KindQuery
		enc = getEncoder(h, r.Columnar, s.cfg.Server.MaxResultBytes)
		enc.SetTimeFormat(r.TimeFormat)
		q.Sink = enc
	}
	return q, enc
}

// runLoopSQL runs a query or exec outside a transaction on a loop backend and
// answers it when the backend does.
func (s *Server) runLoopSQL(ss *session, r *wire.Request, t target, lb sqlpool.Backend) {
	if s.draining.Load() {
		s.replyErrorNow(ss, r.ID, errShuttingDown())
		return
	}
	if e := tether.RefusePaging(t.typ, int(r.Limit), r.Cursor); e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	if (r.CacheTTLMS > 0 || s.cfg.Cache.MergeUncached) && s.runCachedQuery(ss, r, t, lb) {
		return
	}
	s.runLoopSQLUncached(ss, r, t, lb)
}

// runLoopSQLUncached runs a query or exec on a loop backend, past the cache.
func (s *Server) runLoopSQLUncached(ss *session, r *wire.Request, t target, lb sqlpool.Backend) {
	c := s.newCall(ss, r, t.name)
	c.q.Client = ss.sqlClient(t.live)
	c.gen = s.admit()
	ss.pending.Add(1)
	lb.Submit(&c.q)
}

// appendSQLOutcome appends the reply to a loop request: its error, its exec
// result, or its rows from enc.
func (s *Server) appendSQLOutcome(b []byte, h wire.Head, op wire.Op, q *sqlpool.Request, enc *wire.ResultEncoder) []byte {
	if q.Err != nil {
		return appendErr(b, h, tether.AsError(q.Err))
	}
	if op == wire.OpExec {
		return wire.AppendExec(b, h, q.Affected, q.InsertID)
	}
	start := len(b)
	b = enc.AppendReply(b)
	if len(b)-start > s.cfg.Server.MaxResultBytes {
		return appendErr(b[:start], h, tether.Errorf(tether.CodeTooLarge, "result of %d bytes is over max_result_bytes (%d)", len(b)-start, s.cfg.Server.MaxResultBytes))
	}
	return b
}

func (s *Server) logSQLFailure(op wire.Op, backend string, err error) {
	if err == nil {
		return
	}
	if te := tether.AsError(err); te.Code == tether.CodeInternal {
		s.log.Error("request failed", "op", op.String(), "backend", backend, "err", err)
	} else {
		s.log.Debug("request failed", "op", op.String(), "backend", backend, "code", te.Code, "err", err)
	}
}

// beginLoop begins a transaction on a loop backend: the connection it pins
// is the only one its statements run on, until commit or rollback.
func (s *Server) beginLoop(ss *session, r *wire.Request, t target, lb sqlpool.Backend) {
	id, start := r.ID, time.Now()
	q := &sqlpool.Request{Kind: sqlpool.KindBegin, Client: ss.sqlClient(t.live), Deadline: s.deadline(r.TimeoutMS)}
	g := s.admit()
	ss.pending.Add(1)
	q.Done = func(q *sqlpool.Request) {
		// Released once the transaction is registered (or refused): a
		// reload's retiring of its backend waits for either.
		defer s.release(g)
		replied := false
		defer func() {
			if v := recover(); v != nil {
				e := tether.RecoverPanic(s.log, t.name, wire.OpBegin.String(), v)
				if q.NewTx != nil {
					lb.AbortTx(q.NewTx, "tetherd hit an internal error beginning it")
				}
				if !replied {
					s.replyNow(ss, func(b []byte) []byte { return appendErr(b, wire.Head{ID: id, Took: time.Since(start)}, e) })
				}
			}
		}()
		s.unpend(ss)
		// Counted as beginning until registered, before the reply goes out
		// (max_client_txs).
		defer ss.beginning.Add(-1)
		if q.Err != nil {
			s.logSQLFailure(wire.OpBegin, t.name, q.Err)
			e := tether.AsError(q.Err)
			replied = true
			s.replyNow(ss, func(b []byte) []byte { return appendErr(b, wire.Head{ID: id, Took: time.Since(start)}, e) })
			return
		}
		tx := &txState{id: s.nextTx.Add(1), backend: t.name, live: t.live, owner: ss, ltx: q.NewTx, lb: lb}
		tx.lastUsed = time.Now()
		ss.mu.Lock()
		closed := ss.closed
		if !closed {
			ss.txs[tx.id] = tx
		}
		ss.mu.Unlock()
		if closed {
			s.rollbacks[rollbackClientGone].Add(1)
			lb.AbortTx(q.NewTx, "client disconnected")
			return
		}
		s.txMu.Lock()
		s.txs[tx.id] = tx
		s.txMu.Unlock()
		replied = true
		s.replyNow(ss, func(b []byte) []byte { return wire.AppendTx(b, wire.Head{ID: id, Took: time.Since(start)}, tx.id) })
	}
	lb.Submit(q)
}

// runLoopTxOp runs a query, exec, commit or rollback of a transaction on a
// loop backend. Its connection runs them in the order they came.
func (s *Server) runLoopTxOp(ss *session, r *wire.Request, t *txState) {
	if e := t.endedErr(); e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	if e := tether.RefusePaging(t.live.cfg.Type, int(r.Limit), r.Cursor); e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	c := s.newCall(ss, r, t.backend)
	switch r.Op {
	case wire.OpCommit:
		c.q.Kind = sqlpool.KindCommit
	case wire.OpRollback:
		c.q.Kind = sqlpool.KindRollback
	}
	c.tx = t
	c.q.Tx, c.q.Client = t.ltx, t.ltx.Client
	t.started()
	s.inflight.Add(1)
	ss.pending.Add(1)
	t.lb.Submit(&c.q)
}
