package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/wire"
)

// The evloop.Handler methods below run on the event loop goroutine. They
// answer on the loop whatever needs no backend (ping, hello, every error found
// in the request itself) and hand backend work to a goroutine, which writes
// its own reply: one hand-off per request at most.

// OnOpen implements evloop.Handler.
func (s *Server) OnOpen(c *evloop.Conn, tcp bool) {
	ctx, cancel := context.WithCancel(context.Background())
	ss := &session{conn: c, tcp: tcp, ctx: ctx, cancel: cancel, txs: map[uint64]*txState{}}
	c.Context = ss
	ss.identify()
	s.onOpenLimits(ss)
}

// OnClose implements evloop.Handler: the client is gone, so its requests are
// canceled and its open transactions rolled back.
func (s *Server) OnClose(c *evloop.Conn) {
	ss := c.Context.(*session)
	delete(s.sessions, ss)
	s.clients.Store(int64(len(s.sessions)))
	ss.cancel()
	for lb, cl := range ss.clients {
		if !lb.closed.Load() {
			lb.loop.CancelClient(cl, errClientGone)
		}
	}
	ss.mu.Lock()
	ss.closed = true
	open := make([]*txState, 0, len(ss.txs))
	for _, t := range ss.txs {
		open = append(open, t)
	}
	ss.mu.Unlock()
	for _, t := range open {
		s.abortTx(t, rollbackClientGone, "client disconnected")
	}
}

// OnAcceptError implements evloop.AcceptErrorHandler: accepting failed for
// want of descriptors or memory, and the listener rests. It is logged once,
// then at most once a minute with how often it happened meanwhile.
func (s *Server) OnAcceptError(err error, pause time.Duration) {
	s.acceptErrs++
	now := time.Now()
	if now.Sub(s.acceptLogged) < time.Minute {
		return
	}
	s.log.Error("accept failed: new clients wait in the backlog; accepting again after a pause",
		"err", err, "pause", pause, "times", s.acceptErrs, "hint", "raise the descriptor limit (LimitNOFILE) or lower server.max_client_conns")
	s.acceptLogged, s.acceptErrs = now, 0
}

// OnData implements evloop.Handler: it serves every whole frame in in.
func (s *Server) OnData(c *evloop.Conn, in []byte) int {
	ss := c.Context.(*session)
	used := 0
	for used < len(in) {
		if ss.pending.Load() >= int32(s.cfg.Server.MaxClientRequests) {
			// max_client_requests in flight: the rest waits in the socket,
			// not in tetherd, until replies go out (unpend resumes).
			c.PauseReading()
			ss.partialSince, ss.partialHeld = 0, 0
			return used
		}
		limit := s.cfg.Server.MaxFrameBytes
		if ss.tcp && !ss.authed {
			limit = preAuthMaxFrame // nothing large is held for a client not yet known
		}
		payload, n, _, err := wire.NextFrame(in[used:], limit)
		if errors.Is(err, wire.ErrIncomplete) {
			if ss.partialSince == 0 {
				ss.partialSince = s.clock // client_frame_timeout runs from here
			}
			s.notePartial(ss, len(in)-used)
			return used
		}
		if err != nil {
			code := tether.CodeBadFrame
			if errors.Is(err, wire.ErrFrameTooLarge) {
				code = tether.CodeTooLarge
			}
			s.replyErrorNow(ss, 0, tether.Errorf(code, "%s; closing connection", err))
			c.Close()
			return len(in)
		}
		used += n
		ss.lastActive = s.clock
		ss.served++
		if !s.serveFrameSafely(ss, payload) {
			c.Close()
			return len(in)
		}
	}
	ss.partialSince, ss.partialHeld = 0, 0
	return used
}

// preAuthMaxFrame bounds the frames of a TCP client that has not sent its
// hello yet: a hello is a few dozen bytes.
const preAuthMaxFrame = 4 << 10

// authenticate serves the first frame of a TCP client, which must be a valid
// hello with the server's token; anything else is answered unauthorized and
// the connection closed (it returns false). The tokens are compared as
// SHA-256 digests, so that neither their bytes nor their lengths show in the
// time the comparison takes.
func (s *Server) authenticate(ss *session, payload []byte) bool {
	r := &ss.req
	err := wire.DecodeRequest(payload, r)
	var id uint32
	var re *wire.RequestError
	if errors.As(err, &re) {
		id = re.ID
	} else if err == nil {
		id = r.ID
	}
	if err != nil || r.Op != wire.OpHello || !r.HasID {
		s.replyErrorNow(ss, id, tether.Errorf(tether.CodeUnauthorized, "a TCP client must first send hello with the server's token"))
		return false
	}
	got, want := sha256.Sum256([]byte(r.Token)), sha256.Sum256([]byte(s.cfg.Server.TCPToken))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		s.replyErrorNow(ss, id, tether.Errorf(tether.CodeUnauthorized, "wrong token"))
		return false
	}
	ss.authed = true
	s.replyNow(ss, func(b []byte) []byte { return wire.AppendHello(b, wire.Head{ID: r.ID}) })
	return true
}

// replyNow writes a reply built on the loop goroutine.
func (s *Server) replyNow(ss *session, build func(b []byte) []byte) {
	b, start := wire.BeginFrame(s.loopBuf[:0])
	b = wire.EndFrame(build(b), start)
	if err := ss.conn.WriteLater(b); err == evloop.ErrOutputLimit {
		s.noteOutputLimit()
	}
	if cap(b) <= 1<<20 {
		s.loopBuf = b
	}
}

func (s *Server) replyErrorNow(ss *session, id uint32, e *tether.Error) {
	s.replyNow(ss, func(b []byte) []byte {
		return wire.AppendError(b, wire.Head{ID: id}, string(e.Code), e.Message, e.Retry, e.BackendCode)
	})
}

// serveFrameSafely is serveFrame, with a panic in it answered internal (to
// the request's id, when it was decoded) and the connection closed: what the
// session counts (requests pending, transactions beginning) is in an unknown
// state, and OnClose's rollback of its transactions is the safe end. The
// other clients are served on.
func (s *Server) serveFrameSafely(ss *session, payload []byte) (keep bool) {
	defer func() {
		if v := recover(); v != nil {
			r := &ss.req
			e := tether.RecoverPanic(s.log, r.Backend, r.Op.String(), v)
			s.observed(ss, r.Op, r.Backend, r.SQL, e, time.Now())
			s.replyErrorNow(ss, r.ID, e)
			keep = false
		}
	}()
	return s.serveFrame(ss, payload)
}

// serveFrame decodes and dispatches one request. It returns false when the
// connection must be closed.
func (s *Server) serveFrame(ss *session, payload []byte) bool {
	r := &ss.req
	if ss.tcp && !ss.authed {
		return s.authenticate(ss, payload)
	}
	if err := wire.DecodeRequest(payload, r); err != nil {
		var re *wire.RequestError
		if errors.As(err, &re) && !re.Fatal {
			s.replyErrorNow(ss, re.ID, tether.Errorf(tether.CodeBadRequest, "%s", re.Msg))
			return true
		}
		s.replyErrorNow(ss, 0, tether.Errorf(tether.CodeBadFrame, "%s; closing connection", err))
		return false
	}
	if !r.HasID {
		s.replyErrorNow(ss, 0, tether.Errorf(tether.CodeBadRequest, "id is required"))
		return true
	}
	switch r.Op {
	case wire.OpPing:
		s.replyNow(ss, func(b []byte) []byte { return wire.AppendOK(b, wire.Head{ID: r.ID}) })
	case wire.OpHello:
		s.replyNow(ss, func(b []byte) []byte { return wire.AppendHello(b, wire.Head{ID: r.ID}) })
	case wire.OpQuery, wire.OpExec:
		if r.SQL == "" {
			s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeBadRequest, "%s needs sql", r.Op))
			return true
		}
		if r.Tx != 0 {
			s.submitTxOp(ss, r)
			return true
		}
		if t, lb, ok := s.loopBackend(ss, r); ok {
			s.runLoopSQL(ss, r, t, lb)
			return true
		}
		s.spawn(ss, r, s.runOp)
	case wire.OpGet, wire.OpMultiGet, wire.OpScan, wire.OpPut, wire.OpDelete,
		wire.OpReadRows, wire.OpMutateRow, wire.OpIncrement, wire.OpCheckAndMutate:
		if r.Table == "" {
			s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeBadRequest, "%s needs table", r.Op))
			return true
		}
		if r.Columnar && r.Op == wire.OpMultiGet {
			s.replyErrorNow(ss, r.ID, errColumnarMultiGet())
			return true
		}
		if r.CacheTTLMS > 0 && s.cache != nil && isKeyRead(r.Op) && s.runCachedKeyRead(ss, r) {
			return true
		}
		s.spawn(ss, r, s.runOp)
	case wire.OpHTTP:
		if r.Path == "" {
			s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeBadRequest, "http needs path"))
			return true
		}
		s.spawn(ss, r, s.runOp)
	case wire.OpJoin:
		if e := checkJoin(r); e != nil {
			s.replyErrorNow(ss, r.ID, e)
			return true
		}
		if s.draining.Load() {
			s.replyErrorNow(ss, r.ID, errShuttingDown())
			return true
		}
		if r.CacheTTLMS > 0 && s.cache != nil && s.runCachedKeyRead(ss, r) {
			return true
		}
		s.runJoin(ss, r)
	case wire.OpBegin:
		t, e := s.backendFor(r.Backend)
		if e == nil && s.draining.Load() {
			e = errShuttingDown()
		}
		if e == nil && int(ss.beginning.Load())+ss.openTxs() >= s.cfg.Server.MaxClientTxs {
			e = &tether.Error{Code: tether.CodeBusy, Retry: true, Message: fmt.Sprintf("%d transactions are open on this connection (server.max_client_txs = %d); end one first",
				s.cfg.Server.MaxClientTxs, s.cfg.Server.MaxClientTxs)}
		}
		if e != nil {
			s.replyErrorNow(ss, r.ID, e)
			return true
		}
		ss.beginning.Add(1) // until the begin is answered (beginLoop, runBegin)
		if lb := t.loopBackend(); lb != nil {
			s.beginLoop(ss, r, t, lb)
			return true
		}
		s.onWorker(ss, r, t, s.runBegin)
	case wire.OpCommit, wire.OpRollback:
		if r.Tx == 0 {
			s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeBadRequest, "%s needs tx", r.Op))
			return true
		}
		s.submitTxOp(ss, r)
	case wire.OpCausalToken, wire.OpCausalAfter:
		s.runCausal(ss, r)
	case wire.OpBatch:
		if r.Ops == nil {
			s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeBadRequest, "batch needs ops"))
			return true
		}
		if s.draining.Load() {
			s.replyErrorNow(ss, r.ID, errShuttingDown())
			return true
		}
		s.startBatch(ss, r)
	default:
		s.replyErrorNow(ss, r.ID, tether.Errorf(tether.CodeUnknownOp, "unknown op %q", r.OpName))
	}
	return true
}

// runJoin runs a checked join on a worker goroutine (it names its backends
// in its left and right sides). Loop goroutine.
func (s *Server) runJoin(ss *session, r *wire.Request) { s.onWorker(ss, r, target{}, s.runOp) }

// isKeyRead reports whether op is a read of the key API (or Bigtable's).
func isKeyRead(op wire.Op) bool {
	return op == wire.OpGet || op == wire.OpMultiGet || op == wire.OpScan || op == wire.OpReadRows
}

// errClientGone is what the requests of a client that went away end with
// (nobody reads it).
var errClientGone = &tether.Error{Code: tether.CodeUnavailable, Message: "client disconnected"}

// loopBackend resolves a request's backend when the event loop drives it;
// otherwise (another kind of backend, or an error to answer) it reports
// false and the request takes the goroutine path, which answers errors.
func (b *backendTable) loopBackend(ss *session, r *wire.Request) (target, sqlpool.Backend, bool) {
	t, e := b.backendFor(r.Backend)
	if e != nil {
		return t, nil, false
	}
	lb := t.loopBackend()
	return t, lb, lb != nil
}

func errColumnarMultiGet() *tether.Error {
	return tether.Errorf(tether.CodeBadRequest, "multi_get cannot answer columnar: a missing key's nil row would not show")
}

func errShuttingDown() *tether.Error {
	return &tether.Error{Code: tether.CodeUnavailable, Message: "server is shutting down", Retry: true}
}

// target is a request's backend, resolved.
type target struct {
	name, typ string
	b         tether.Backend
	live      *liveBackend
}

// loopBackend returns the backend when the event loop drives it, or nil.
func (t target) loopBackend() sqlpool.Backend {
	if t.live == nil {
		return nil
	}
	return t.live.loop
}

// backendFor resolves a request's backend name in the current set.
func (b *backendTable) backendFor(name string) (target, *tether.Error) {
	set := b.set.Load()
	if name == "" {
		name = set.defaultName
		if name == "" {
			return target{}, tether.Errorf(tether.CodeBadRequest, "backend is required (no default_backend configured)")
		}
	}
	lb, ok := set.byName[name]
	if !ok {
		return target{name: name}, tether.Errorf(tether.CodeUnknownBackend, "no backend named %q", name)
	}
	return target{name: name, typ: lb.cfg.Type, b: lb.b, live: lb}, nil
}

func (s *Server) deadline(timeoutMS uint32) time.Time {
	if timeoutMS > 0 {
		return time.Now().Add(time.Duration(timeoutMS) * time.Millisecond)
	}
	return time.Now().Add(time.Duration(s.cfg.Server.DefaultTimeout))
}

// spawn resolves the backend on the loop and runs fn on a goroutine.
func (s *Server) spawn(ss *session, r *wire.Request, fn func(*session, *wire.Request, target, time.Time)) {
	b, e := s.backendFor(r.Backend)
	if e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	if s.draining.Load() {
		s.replyErrorNow(ss, r.ID, errShuttingDown())
		return
	}
	s.onWorker(ss, r, b, fn)
}

// onWorker runs fn on a worker goroutine for a request whose backend is
// resolved and admitted.
func (s *Server) onWorker(ss *session, r *wire.Request, b target, fn func(*session, *wire.Request, target, time.Time)) {
	g := s.admit()
	ss.pending.Add(1)
	s.onWorkerAdmitted(ss, r, b, g, fn)
}

// onWorkerAdmitted is onWorker for a request already counted (admit, and
// pending on its session); the worker ends both.
func (s *Server) onWorkerAdmitted(ss *session, r *wire.Request, b target, g *backendSet, fn func(*session, *wire.Request, target, time.Time)) {
	req := *r // the scratch is reused for the next frame
	deadline := s.deadline(r.TimeoutMS)
	s.workers.run(func() {
		defer s.release(g)
		defer s.unpend(ss)
		defer s.recoverRequest(ss, &req, b.name)
		fn(ss, &req, b, deadline)
	})
}

// recoverRequest, deferred by the goroutine that serves r, answers r with an
// internal error if it panicked (a panic in a backend call is already an
// error: execute; this catches the rest of tetherd's code on the way). A
// request that panicked after its reply was written is answered twice; the
// client drops the second answer as one to no request of its.
func (s *Server) recoverRequest(ss *session, r *wire.Request, backend string) {
	v := recover()
	if v == nil {
		return
	}
	e := tether.RecoverPanic(s.log, backend, r.Op.String(), v)
	s.observed(ss, r.Op, backend, r.SQL, e, time.Now())
	s.reply(ss, func(b []byte) []byte { return appendErr(b, wire.Head{ID: r.ID}, e) })
}

// OnPanic implements evloop.PanicHandler: a panic in a callback of the event
// loop that nothing nearer recovered (the loop closed the client connection
// it was for).
func (s *Server) OnPanic(where string, v any, stack []byte) {
	tether.RecordPanic(s.log, "", "event_loop", fmt.Sprintf("%s: %v", where, v), stack)
}

var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// reply builds and writes a reply from a worker goroutine.
func (s *Server) reply(ss *session, build func(b []byte) []byte) {
	bp := replyBufs.Get().(*[]byte)
	b, start := wire.BeginFrame((*bp)[:0])
	b = wire.EndFrame(build(b), start)
	if err := ss.conn.Write(b); err == evloop.ErrOutputLimit {
		s.noteOutputLimit()
	}
	if cap(b) <= 1<<20 {
		*bp = b
		replyBufs.Put(bp)
	}
}

// appendOutcome appends the reply for one operation's outcome.
func (s *Server) appendOutcome(b []byte, h wire.Head, r *wire.Request, res *tether.Result, err error) []byte {
	if err != nil {
		return appendErr(b, h, tether.AsError(err))
	}
	start := len(b)
	var encErr error
	switch r.Op {
	case wire.OpExec, wire.OpPut, wire.OpDelete, wire.OpMutateRow, wire.OpCheckAndMutate:
		return wire.AppendExec(b, h, res.Affected, res.InsertID)
	case wire.OpHTTP:
		if res.HTTP == nil {
			return appendErr(b, h, tether.Errorf(tether.CodeInternal, "http: the upstream gave no response"))
		}
		// The body was bounded by the upstream's max_response_bytes.
		return wire.AppendHTTP(b, h, res.HTTP.Status, res.HTTP.Header, res.HTTP.Body)
	case wire.OpJoin:
		b, encErr = wire.AppendColumns(b, h, res.Columns, res.Rows, res.Cursor)
	default:
		if r.Columnar {
			b, encErr = wire.AppendColumns(b, h, res.Columns, res.Rows, res.Cursor)
		} else {
			b, encErr = wire.AppendResult(b, h, res.Columns, res.Rows, res.Cursor)
		}
	}
	if encErr != nil {
		s.log.Error("encode result", "err", encErr)
		return appendErr(b[:start], h, tether.Errorf(tether.CodeInternal, "%s", encErr))
	}
	if len(b)-start > s.cfg.Server.MaxResultBytes {
		return appendErr(b[:start], h, tether.Errorf(tether.CodeTooLarge, "result of %d bytes is over max_result_bytes (%d)", len(b)-start, s.cfg.Server.MaxResultBytes))
	}
	return b
}

func appendErr(b []byte, h wire.Head, e *tether.Error) []byte {
	return wire.AppendError(b, h, string(e.Code), e.Message, e.Retry, e.BackendCode)
}

// classify turns a failed call into the error to send: a deadline that passed
// is a timeout whatever the driver made of the cancellation.
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		var te *tether.Error
		if errors.As(err, &te) && te.Code == tether.CodeBusy {
			return err // the wait for a connection timed out: nothing ran
		}
		return &tether.Error{Code: tether.CodeTimeout, Message: "deadline exceeded; the statement may or may not have run", Err: err}
	}
	return err
}

func (s *Server) runOp(ss *session, r *wire.Request, t target, deadline time.Time) {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ss.ctx, deadline)
	res, err := s.execute(ctx, t, nil, r)
	err = classify(ctx, err)
	cancel()
	took := s.observed(ss, r.Op, t.name, r.SQL, err, start)
	s.noteWrite(t.name, r.Op, r.SQL)
	s.logFailure(r, err)
	s.reply(ss, func(buf []byte) []byte { return s.appendOutcome(buf, wire.Head{ID: r.ID, Took: took}, r, res, err) })
}

func (s *Server) logFailure(r *wire.Request, err error) {
	if err == nil {
		return
	}
	if te := tether.AsError(err); te.Code == tether.CodeInternal {
		s.log.Error("request failed", "op", r.Op.String(), "backend", r.Backend, "err", err)
	} else {
		s.log.Debug("request failed", "op", r.Op.String(), "backend", r.Backend, "code", te.Code, "err", err)
	}
}

func (s *Server) runBegin(ss *session, r *wire.Request, tg target, deadline time.Time) {
	start := time.Now()
	// The begin stops counting as beginning before its reply goes out: the
	// client may begin again as soon as it has it (max_client_txs).
	fail := func(err error) {
		ss.beginning.Add(-1)
		s.reply(ss, func(buf []byte) []byte {
			return appendErr(buf, wire.Head{ID: r.ID, Took: time.Since(start)}, tether.AsError(err))
		})
	}
	tr, ok := tg.b.(tether.Transactor)
	if !ok {
		fail(tether.Unsupported(tg.name, tg.typ, "transactions"))
		return
	}
	ctx, cancel := context.WithDeadline(ss.ctx, deadline)
	tx, err := s.begin(ctx, tg.name, tr)
	err = classify(ctx, err)
	cancel()
	if err != nil {
		s.logFailure(r, err)
		fail(err)
		return
	}
	t := &txState{id: s.nextTx.Add(1), backend: tg.name, live: tg.live, owner: ss, tx: tx, lastUsed: time.Now()}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		ss.beginning.Add(-1)
		s.rollbacks[rollbackClientGone].Add(1)
		s.rollbackDetached(t, "client disconnected")
		return
	}
	ss.txs[t.id] = t
	ss.mu.Unlock()
	ss.beginning.Add(-1)
	s.txMu.Lock()
	s.txs[t.id] = t
	s.txMu.Unlock()
	s.reply(ss, func(buf []byte) []byte { return wire.AppendTx(buf, wire.Head{ID: r.ID, Took: time.Since(start)}, t.id) })
}

// begin begins a transaction on tr; a panic in the backend becomes the
// begin's internal error.
func (s *Server) begin(ctx context.Context, backend string, tr tether.Transactor) (tx tether.Tx, err error) {
	defer func() {
		if v := recover(); v != nil {
			tx, err = nil, tether.RecoverPanic(s.log, backend, wire.OpBegin.String(), v)
		}
	}()
	return tr.Begin(ctx)
}
