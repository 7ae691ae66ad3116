package server

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/wire"
)

// txState is one open transaction: a Tx pinned to a backend connection, owned
// by one session. Its operations run one at a time, in the order the client
// sent them, on a goroutine that exists only while work is queued.
type txState struct {
	id      uint64
	backend string       // its backend's name...
	live    *liveBackend // ... and the backend itself: a reload that replaces it waits for the transaction
	owner   *session
	tx      tether.Tx // a transaction run by goroutines (queue below)...

	// ... or one on a backend the event loop drives, whose connection runs
	// its statements in order itself.
	ltx    *sqlpool.Tx
	lb     sqlpool.Backend
	inLoop int // its loop requests in flight

	mu       sync.Mutex
	queue    []func()
	running  bool
	lastUsed time.Time
	ended    *tether.Error // set once the transaction is over; later ops get it
	// writes: what its statements may have written, whose cached results
	// its end drops (cache.go, cachetables.go).
	writes writeSet
}

// noteStatement records what a statement of t may have written. Whether or
// not its backend's cache is in use yet: a read cached before t commits
// must go when it does.
func (t *txState) noteStatement(s *Server, op wire.Op, sql string) {
	if s.cache == nil {
		return
	}
	tables, all, ddl := s.writeOf(t.backend, op, sql)
	if ddl {
		// MySQL's DDL commits at once; PostgreSQL's is seen by others at
		// commit, when the catalog is read again (endTx).
		s.noteDDL(t.backend)
	}
	t.writes.add(tables, all, ddl)
}

// submit queues op to run after every op submitted before it. The server's
// in-flight count covers it until it has run.
func (t *txState) submit(s *Server, op func()) {
	s.inflight.Add(1)
	t.mu.Lock()
	t.queue = append(t.queue, op)
	if t.running {
		t.mu.Unlock()
		return
	}
	t.running = true
	t.mu.Unlock()
	go t.drain(s)
}

func (t *txState) drain(s *Server) {
	// A panic in one op (tetherd's own code: a backend's is an error
	// already, execute) leaves the queue to a new drain goroutine, and the
	// transaction, in an unknown state, rolled back.
	defer func() {
		if v := recover(); v != nil {
			tether.RecoverPanic(s.log, t.backend, "transaction", v)
			s.inflight.Done()
			s.abortPanicked(t)
			go t.drain(s)
		}
	}()
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.running = false
			t.lastUsed = time.Now()
			t.mu.Unlock()
			return
		}
		op := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.mu.Unlock()
		op()
		s.inflight.Done()
	}
}

// endedErr returns why the transaction is over, or nil while it is open.
func (t *txState) endedErr() *tether.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// idleSince reports whether the transaction has had nothing to do since before
// cutoff.
func (t *txState) idleSince(cutoff time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.running && len(t.queue) == 0 && t.inLoop == 0 && t.ended == nil && t.lastUsed.Before(cutoff)
}

// started and finished count a loop transaction's requests in flight, for
// the idle reaper.
func (t *txState) started() {
	t.mu.Lock()
	t.inLoop++
	t.mu.Unlock()
}

func (t *txState) finished(now time.Time) {
	t.mu.Lock()
	t.inLoop--
	t.lastUsed = now
	t.mu.Unlock()
}

// submitTxOp queues a query, exec, commit or rollback on its transaction.
func (s *Server) submitTxOp(ss *session, r *wire.Request) {
	t, e := ss.lookupTx(r.Tx)
	if e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	if t.ltx != nil {
		s.runLoopTxOp(ss, r, t)
		return
	}
	req := *r
	deadline := s.deadline(r.TimeoutMS)
	ss.pending.Add(1)
	t.submit(s, func() {
		defer s.unpend(ss)
		defer func() {
			if v := recover(); v != nil {
				e := tether.RecoverPanic(s.log, t.backend, req.Op.String(), v)
				s.abortPanicked(t)
				s.reply(ss, func(buf []byte) []byte { return appendErr(buf, wire.Head{ID: req.ID}, e) })
			}
		}()
		if e := t.endedErr(); e != nil {
			s.reply(ss, func(buf []byte) []byte { return appendErr(buf, wire.Head{ID: req.ID}, e) })
			return
		}
		ctx, cancel := context.WithDeadline(ss.ctx, deadline)
		defer cancel()
		start := time.Now()
		switch req.Op {
		case wire.OpCommit, wire.OpRollback:
			var err error
			if req.Op == wire.OpCommit {
				err = t.tx.Commit(ctx)
			} else {
				err = t.tx.Rollback(ctx)
			}
			err = classify(ctx, err)
			s.endTx(t, nil)
			s.logFailure(&req, err)
			s.reply(ss, func(buf []byte) []byte {
				h := wire.Head{ID: req.ID, Took: time.Since(start)}
				if err != nil {
					return appendErr(buf, h, tether.AsError(err))
				}
				return wire.AppendOK(buf, h)
			})
		default:
			if req.Backend == "" {
				req.Backend = t.backend // for execute's panic report
			}
			res, err := s.execute(ctx, target{}, t.tx, &req)
			if req.Op == wire.OpQuery || req.Op == wire.OpExec {
				t.noteStatement(s, req.Op, req.SQL)
			}
			if errors.Is(err, tether.ErrPanic) {
				s.abortPanicked(t)
			}
			err = classify(ctx, err)
			s.logFailure(&req, err)
			took := time.Since(start)
			s.reply(ss, func(buf []byte) []byte {
				return s.appendOutcome(buf, wire.Head{ID: req.ID, Took: took}, &req, res, err)
			})
		}
	})
}

// endTx forgets a finished transaction. why, when not nil, is remembered for
// the owner's later requests on the handle.
func (s *Server) endTx(t *txState, why *tether.Error) {
	// Committed (or rolled back: MySQL's DDL commits on its own) before its
	// client hears of it: its backend's cached results go.
	// The backend it began on, or the one of its name now if a reload
	// replaced it meanwhile: what either cached may read what it wrote.
	if s.cache != nil && (t.live.cacheUsed.Load() || s.cacheUsedNow(t.backend)) {
		tables, all, ddl := t.writes.take()
		if ddl { // committed (or rolled back) now: the catalog as it stands
			s.noteDDL(t.backend)
		}
		s.invalidate(t.backend, tables, all, resultcache.CauseTxCommit)
	}
	t.mu.Lock()
	if t.ended == nil {
		t.ended = why
		if why == nil {
			t.ended = tether.Errorf(tether.CodeUnknownTx, "transaction %d is already finished", t.id)
		}
	}
	t.mu.Unlock()
	s.txMu.Lock()
	delete(s.txs, t.id)
	s.txMu.Unlock()
	ss := t.owner
	ss.mu.Lock()
	delete(ss.txs, t.id)
	if why != nil {
		if ss.aborted == nil || len(ss.aborted) >= maxAbortedRemembered {
			ss.aborted = map[uint64]string{}
		}
		ss.aborted[t.id] = why.Message
	}
	ss.mu.Unlock()
}

// rollbackCause is why the server rolled a transaction back on its own.
type rollbackCause int

const (
	rollbackClientGone  rollbackCause = iota // its client disconnected
	rollbackIdleTimeout                      // idle past tx_idle_timeout
	rollbackShutdown                         // still open when the shutdown grace ran out
	numRollbackCauses
)

var rollbackCauseNames = [numRollbackCauses]string{"client_gone", "idle_timeout", "shutdown"}

// cacheUsedNow reports whether the backend of that name now (a reload may
// have replaced the one a transaction began on) has cached results.
func (s *Server) cacheUsedNow(name string) bool {
	cur := s.live(name)
	return cur != nil && cur.cacheUsed.Load()
}

// txTable is every open transaction, for the idle reaper, and the count of
// those the server rolled back.
type txTable struct {
	nextTx     atomic.Uint64
	txMu       sync.Mutex
	txs        map[uint64]*txState // every open transaction
	rollbacks  rollbacks           // transactions the server rolled back, by cause
	reaperStop chan struct{}
	reaperDone chan struct{}
}

// rollbacks counts the transactions the server rolled back, by cause.
type rollbacks [numRollbackCauses]atomic.Uint64

func (r *rollbacks) snapshot() map[string]uint64 {
	out := make(map[string]uint64, numRollbackCauses)
	for i := range r {
		out[rollbackCauseNames[i]] = r[i].Load()
	}
	return out
}

// abortTx rolls t back on the server's initiative, after whatever is already
// queued on it; the owner's later requests on it get tx_aborted.
func (s *Server) abortTx(t *txState, cause rollbackCause, why string) {
	if t.ltx != nil {
		if t.endedErr() != nil {
			return
		}
		s.rollbacks[cause].Add(1)
		s.endTx(t, &tether.Error{Code: tether.CodeTxAborted, Message: why, Retry: true})
		// The backend cancels a statement of it still running, then rolls back.
		s.loop.Post(func() { t.lb.AbortTx(t.ltx, why) })
		s.log.Info("rolling back abandoned transaction", "tx", t.id, "backend", t.backend, "why", why)
		return
	}
	t.submit(s, func() {
		if t.endedErr() != nil {
			return // a commit queued before it ended the transaction
		}
		s.rollbacks[cause].Add(1)
		s.endTx(t, &tether.Error{Code: tether.CodeTxAborted, Message: why, Retry: true})
		s.rollbackDetached(t, why)
	})
}

// abortPanicked ends t after a panic while serving it: its connection's
// state is unknown, so it is discarded where the backend can (Discarder),
// rolled back otherwise; the owner's later requests on t get tx_aborted.
// Called from t's own queue (or its loop request's Done).
func (s *Server) abortPanicked(t *txState) {
	if t.endedErr() != nil {
		return
	}
	why := "tetherd hit an internal error serving it (a panic); it was rolled back"
	s.endTx(t, &tether.Error{Code: tether.CodeTxAborted, Message: why, Retry: true})
	if t.ltx != nil {
		s.loop.Post(func() { t.lb.AbortTx(t.ltx, why) })
		return
	}
	defer func() {
		if v := recover(); v != nil {
			tether.RecoverPanic(s.log, t.backend, "rollback", v)
		}
	}()
	if d, ok := t.tx.(tether.Discarder); ok {
		d.Discard()
		s.log.Warn("discarded the connection of a transaction after a panic", "tx", t.id, "backend", t.backend)
		return
	}
	s.rollbackDetached(t, why)
}

// rollbackDetached rolls back a transaction no client waits for.
func (s *Server) rollbackDetached(t *txState, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := t.tx.Rollback(ctx)
	switch {
	case err == nil, errors.Is(err, tether.ErrTxDone):
	case errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrBadConn):
		// The statement running when the client vanished was cancelled with
		// it, and its connection dropped: the server rolled back with it.
		s.log.Info("rolled back abandoned transaction (its connection was closed with its cancelled statement)",
			"tx", t.id, "backend", t.backend, "why", why)
		return
	default:
		s.log.Warn("roll back abandoned transaction", "tx", t.id, "why", why, "err", err)
		return
	}
	s.log.Info("rolled back abandoned transaction", "tx", t.id, "backend", t.backend, "why", why)
}

// reapIdleTransactions rolls back transactions idle past tx_idle_timeout.
func (s *Server) reapIdleTransactions() {
	defer close(s.reaperDone)
	idle := time.Duration(s.cfg.Server.TxIdleTimeout)
	tick := min(idle/4, time.Second)
	if tick < 10*time.Millisecond {
		tick = 10 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.reaperStop:
			return
		case now := <-t.C:
			var stale []*txState
			s.txMu.Lock()
			for _, tx := range s.txs {
				if tx.idleSince(now.Add(-idle)) {
					stale = append(stale, tx)
				}
			}
			s.txMu.Unlock()
			for _, tx := range stale {
				s.abortTx(tx, rollbackIdleTimeout, "idle longer than tx_idle_timeout ("+idle.String()+")")
			}
		}
	}
}

// openTxs counts the open transactions.
func (tt *txTable) openTxs() int {
	tt.txMu.Lock()
	defer tt.txMu.Unlock()
	return len(tt.txs)
}

// txsOn counts the open transactions on lb.
func (tt *txTable) txsOn(lb *liveBackend) int {
	tt.txMu.Lock()
	defer tt.txMu.Unlock()
	n := 0
	for _, t := range tt.txs {
		if t.live == lb {
			n++
		}
	}
	return n
}
