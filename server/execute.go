package server

import (
	"context"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/wire"
)

// execute runs one decoded operation on its backend (or on tx, for a
// statement inside a transaction), through the capability the operation needs.
// A panic in the backend (a driver bug, a bad value) becomes the request's
// internal error (ErrPanic), logged with its stack and counted; a
// transaction's caller then gives up the transaction (abortPanicked).
func (s *Server) execute(ctx context.Context, t target, tx tether.Tx, r *wire.Request) (res *tether.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			backend := t.name
			if backend == "" {
				backend = r.Backend
			}
			res, err = nil, tether.RecoverPanic(s.log, backend, r.Op.String(), v)
		}
	}()
	if fault.Enabled() {
		fault.Inject(fault.WorkerCall, faultDetail(r))
	}
	return s.executeOp(ctx, t, tx, r)
}

// faultDetail is what a fault hook is told of a request: its SQL, or its op
// and table.
func faultDetail(r *wire.Request) string {
	if r.SQL != "" {
		return r.SQL
	}
	return r.Op.String() + " " + r.Table + r.Path
}

func (s *Server) executeOp(ctx context.Context, t target, tx tether.Tx, r *wire.Request) (*tether.Result, error) {
	maxBytes := s.cfg.Server.MaxResultBytes
	switch r.Op {
	case wire.OpQuery, wire.OpExec:
		st := tether.Statement{SQL: r.SQL, Params: r.Params, MaxBytes: maxBytes, PageSize: int(r.Limit), Cursor: r.Cursor}
		var q tether.Querier = tx
		if tx == nil {
			var ok bool
			if q, ok = t.b.(tether.Querier); !ok {
				return nil, tether.Unsupported(t.name, t.typ, r.Op.String()+" (it has no query language: use the key API)")
			}
		}
		if r.Op == wire.OpExec {
			return q.Exec(ctx, st)
		}
		return q.Query(ctx, st)

	case wire.OpGet, wire.OpMultiGet, wire.OpScan, wire.OpPut, wire.OpDelete:
		kv, ok := t.b.(tether.KeyValue)
		if !ok {
			return nil, tether.Unsupported(t.name, t.typ, "the key API")
		}
		k := tether.KeyRequest{Table: r.Table, Key: r.Key, Keys: r.Keys, Columns: r.Columns, Prefix: r.Prefix,
			Start: r.Start, End: r.End, Limit: int(r.Limit), Cursor: r.Cursor, Row: r.Row, MaxBytes: maxBytes}
		switch r.Op {
		case wire.OpGet:
			if len(k.Key) == 0 {
				return nil, tether.Errorf(tether.CodeBadRequest, "get needs key")
			}
			return kv.Get(ctx, k)
		case wire.OpMultiGet:
			if k.Keys == nil {
				return nil, tether.Errorf(tether.CodeBadRequest, "multi_get needs keys")
			}
			return kv.MultiGet(ctx, k)
		case wire.OpScan:
			return kv.Scan(ctx, k)
		case wire.OpPut:
			if len(k.Row) == 0 {
				return nil, tether.Errorf(tether.CodeBadRequest, "put needs row")
			}
			return kv.Put(ctx, k)
		default:
			if len(k.Key) == 0 {
				return nil, tether.Errorf(tether.CodeBadRequest, "delete needs key")
			}
			return kv.Delete(ctx, k)
		}

	case wire.OpHTTP:
		up, ok := t.b.(tether.Upstream)
		if !ok {
			return nil, tether.Unsupported(t.name, t.typ, "http (only an http upstream takes it)")
		}
		resp, err := up.Call(ctx, tether.HTTPRequest{Method: r.Method, Path: r.Path, Header: r.Headers, Body: r.Body})
		if err != nil {
			return nil, err
		}
		return &tether.Result{HTTP: resp}, nil

	case wire.OpJoin:
		return s.join(ctx, r)

	case wire.OpReadRows, wire.OpMutateRow, wire.OpIncrement, wire.OpCheckAndMutate:
		wc, ok := t.b.(tether.WideColumn)
		if !ok {
			return nil, tether.Unsupported(t.name, t.typ, r.Op.String()+" (a Bigtable operation)")
		}
		return executeWideColumn(ctx, wc, r, maxBytes)
	}
	return nil, tether.Errorf(tether.CodeBadRequest, "op %s does not run on a backend", r.Op)
}

// wideColumnOps maps the protocol's wide-column ops to the domain's.
var wideColumnOps = [...]tether.WideColumnOp{
	wire.OpReadRows:       tether.OpReadRows,
	wire.OpMutateRow:      tether.OpMutateRow,
	wire.OpIncrement:      tether.OpIncrement,
	wire.OpCheckAndMutate: tether.OpCheckAndMutate,
}

// executeWideColumn hands a wide-column op to its backend with the values as
// the client sent them: the backend maps them to its row keys and cells.
func executeWideColumn(ctx context.Context, wc tether.WideColumn, r *wire.Request, maxBytes int) (*tether.Result, error) {
	return wc.WideColumn(ctx, tether.WideColumnRequest{Op: wideColumnOps[r.Op], Table: r.Table, Key: r.Key,
		Keys: r.Keys, Prefix: r.Prefix, Start: r.Start, End: r.End, Limit: int(r.Limit), Cursor: r.Cursor,
		Families: r.Families, Columns: r.Columns, LatestOnly: r.Latest, Family: r.Family, Qualifier: r.Qualifier,
		Delta: r.Delta, Value: r.Value, Mutations: cellMutations(r.Mutations), IfTrue: cellMutations(r.IfTrue),
		IfFalse: cellMutations(r.IfFalse), MaxBytes: maxBytes})
}

// cellMutations copies a request's mutations into the domain's form (nil
// for none).
func cellMutations(in []wire.Mutation) []tether.CellMutation {
	if in == nil {
		return nil
	}
	out := make([]tether.CellMutation, len(in))
	for i, m := range in {
		out[i] = tether.CellMutation{Op: m.Op, Family: m.Family, Qualifier: m.Qualifier, Value: m.Value, Timestamp: m.Timestamp}
	}
	return out
}
