package server

import (
	"context"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/wire"
)

// checkBatchOp validates one operation of a batch, as serveFrame does a
// request of its own.
func checkBatchOp(op *wire.Request) *tether.Error {
	switch {
	case op.Tx != 0:
		return tether.Errorf(tether.CodeBadRequest, "a batch %s cannot run in a transaction", op.Op)
	case (op.Op == wire.OpQuery || op.Op == wire.OpExec) && op.SQL == "":
		return tether.Errorf(tether.CodeBadRequest, "a batch %s needs sql", op.Op)
	case op.Op == wire.OpHTTP && op.Path == "":
		return tether.Errorf(tether.CodeBadRequest, "http needs path")
	case op.Op == wire.OpJoin:
		return checkJoin(op)
	case op.Columnar && op.Op == wire.OpMultiGet:
		return errColumnarMultiGet()
	}
	return nil
}

// batch is one batch request in flight: its operations run at once, SQL on
// loop backends from the loop (those on the same backend may be pipelined on
// one connection), the rest on goroutines; whoever finishes last answers.
type batch struct {
	s      *Server
	ss     *session
	id     uint32
	ops    []wire.Request
	out    []batchOutcome
	left   atomic.Int32
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	gen    *backendSet // what admit returned
}

type batchOutcome struct {
	res    *tether.Result
	err    error
	q      *sqlpool.Request // a loop operation's request, and its rows
	enc    *wire.ResultEncoder
	cached []byte // a query answered from the result cache: its stored body
	// finished: counted done (opDone), by whoever ran it.
	finished bool
}

// startBatch starts a batch's operations and answers once they are all done,
// in request order. Loop goroutine.
func (s *Server) startBatch(ss *session, r *wire.Request) {
	deadline := s.deadline(r.TimeoutMS)
	b := &batch{s: s, ss: ss, id: r.ID, ops: r.Ops, out: make([]batchOutcome, len(r.Ops)), start: time.Now()}
	b.ctx, b.cancel = context.WithDeadline(ss.ctx, deadline)
	b.left.Store(int32(len(r.Ops)) + 1) // +1 until every operation has started
	b.gen = s.admit()
	ss.pending.Add(1)
	for i := range b.ops {
		op := &b.ops[i]
		switch op.Op {
		case wire.OpPing:
			b.out[i].res = &tether.Result{}
			b.done()
			continue
		case wire.OpQuery, wire.OpExec, wire.OpGet, wire.OpMultiGet, wire.OpScan, wire.OpPut, wire.OpDelete,
			wire.OpReadRows, wire.OpMutateRow, wire.OpIncrement, wire.OpCheckAndMutate, wire.OpHTTP, wire.OpJoin:
		case wire.OpUnknown:
			b.out[i].err = tether.Errorf(tether.CodeUnknownOp, "unknown op %q", op.OpName)
			b.done()
			continue
		default:
			b.out[i].err = tether.Errorf(tether.CodeBadRequest, "op %s is not allowed in a batch", op.Op)
			b.done()
			continue
		}
		if e := checkBatchOp(op); e != nil {
			b.out[i].err = e
			b.done()
			continue
		}
		var t target
		if op.Op != wire.OpJoin { // a join names its backends in left and right
			var e *tether.Error
			if t, e = s.backendFor(op.Backend); e != nil {
				b.out[i].err = e
				b.done()
				continue
			}
		}
		if lb := t.loopBackend(); lb != nil && (op.Op == wire.OpQuery || op.Op == wire.OpExec) {
			if e := tether.RefusePaging(t.typ, int(op.Limit), op.Cursor); e != nil {
				b.out[i].err = e
				b.done()
				continue
			}
			hit, ticket := s.batchCachedRead(ss, op, t)
			if hit != nil {
				b.out[i].cached = hit
				b.done()
				continue
			}
			q, enc := s.newSQLRequest(ss, op, t.live, wire.Head{Nested: true})
			q.Group = b
			if _, replicated := lb.(sqlpool.Causal); replicated && ticket != nil {
				q.Primary = true // a cache fill is current (runCachedQuery)
			}
			if op.TimeoutMS == 0 || deadline.Before(q.Deadline) {
				q.Deadline = deadline
			}
			b.out[i].q, b.out[i].enc = q, enc
			q.Done = func(*sqlpool.Request) {
				defer b.recoverOp(i, t.name)
				if ticket != nil {
					s.completeBatchRead(ticket, q, enc)
				} else {
					s.noteWrite(t.name, op.Op, op.SQL)
				}
				b.opDone(i)
			}
			lb.Submit(q)
			continue
		}
		s.workers.run(func() {
			defer b.recoverOp(i, t.name)
			octx := b.ctx
			if op.TimeoutMS > 0 {
				var ocancel context.CancelFunc
				octx, ocancel = context.WithTimeout(b.ctx, time.Duration(op.TimeoutMS)*time.Millisecond)
				defer ocancel()
			}
			if fault.Enabled() {
				fault.Inject(fault.BatchOp, faultDetail(op))
			}
			res, err := s.execute(octx, t, nil, op)
			b.out[i].res, b.out[i].err = res, classify(octx, err)
			s.noteWrite(t.name, op.Op, op.SQL)
			b.opDone(i)
		})
	}
	b.done()
}

// opDone marks operation i done and counts it (done).
func (b *batch) opDone(i int) {
	b.out[i].finished = true
	b.done()
}

// recoverOp, deferred by what runs operation i (a worker goroutine, a loop
// request's Done), turns a panic into i's internal error; the other
// operations' outcomes stand. A panic once i was counted done (in the
// batch's own reply) answers the whole batch internal.
func (b *batch) recoverOp(i int, backend string) {
	v := recover()
	if v == nil {
		return
	}
	s := b.s
	op := &b.ops[i]
	e := tether.RecoverPanic(s.log, backend, op.Op.String(), v)
	if !b.out[i].finished {
		b.out[i].res, b.out[i].err, b.out[i].q, b.out[i].cached = nil, e, nil, nil
		b.opDone(i)
		return
	}
	s.reply(b.ss, func(buf []byte) []byte { return appendErr(buf, wire.Head{ID: b.id}, e) })
}

// done counts one operation done; the last one answers the batch.
func (b *batch) done() {
	if b.left.Add(-1) != 0 {
		return
	}
	s := b.s
	defer s.release(b.gen)
	defer s.unpend(b.ss)
	b.cancel()
	took := s.observed(nil, wire.OpBatch, "", "", nil, b.start)
	s.reply(b.ss, func(buf []byte) []byte {
		start := len(buf)
		buf = wire.AppendBatchHead(buf, wire.Head{ID: b.id, Took: took}, len(b.out))
		nested := wire.Head{Nested: true}
		for i, o := range b.out {
			op := &b.ops[i]
			switch {
			case o.cached != nil:
				buf = wire.AppendCachedResult(buf, nested, op.Columnar, o.cached)
			case o.q != nil:
				buf = s.appendSQLOutcome(buf, nested, op.Op, o.q, o.enc)
			case op.Op == wire.OpPing && o.err == nil:
				buf = wire.AppendOK(buf, nested)
			default:
				buf = s.appendOutcome(buf, nested, op, o.res, o.err)
			}
		}
		if len(buf)-start > s.cfg.Server.MaxResultBytes {
			buf = appendErr(buf[:start], wire.Head{ID: b.id, Took: took}, tether.Errorf(tether.CodeTooLarge, "batch result over max_result_bytes (%d)", s.cfg.Server.MaxResultBytes))
		}
		return buf
	})
	for _, o := range b.out {
		if o.enc != nil {
			putEncoder(o.enc)
		}
	}
}
