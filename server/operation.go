package tether

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/wire"
)

// execute runs one decoded operation on its backend (or on tx, for a
// statement inside a transaction), through the capability the operation needs.
// A panic in the backend (a driver bug, a bad value) becomes the request's
// internal error (ErrPanic), logged with its stack and counted; a
// transaction's caller then gives up the transaction (abortPanicked).
func (s *Server) execute(ctx context.Context, t target, tx Tx, r *wire.Request) (res *Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			backend := t.name
			if backend == "" {
				backend = r.Backend
			}
			res, err = nil, RecoverPanic(s.log, backend, r.Op.String(), v)
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

func (s *Server) executeOp(ctx context.Context, t target, tx Tx, r *wire.Request) (*Result, error) {
	maxBytes := s.cfg.Server.MaxResultBytes
	switch r.Op {
	case wire.OpQuery, wire.OpExec:
		st := Statement{SQL: r.SQL, Params: r.Params, MaxBytes: maxBytes, PageSize: int(r.Limit), Cursor: r.Cursor}
		var q Querier = tx
		if tx == nil {
			var ok bool
			if q, ok = t.b.(Querier); !ok {
				return nil, Unsupported(t.name, t.typ, r.Op.String()+" (it has no query language: use the key API)")
			}
		}
		if r.Op == wire.OpExec {
			return q.Exec(ctx, st)
		}
		return q.Query(ctx, st)

	case wire.OpGet, wire.OpMultiGet, wire.OpScan, wire.OpPut, wire.OpDelete:
		kv, ok := t.b.(KeyValue)
		if !ok {
			return nil, Unsupported(t.name, t.typ, "the key API")
		}
		k := KeyRequest{Table: r.Table, Key: r.Key, Keys: r.Keys, Columns: r.Columns, Prefix: r.Prefix,
			Start: r.Start, End: r.End, Limit: int(r.Limit), Cursor: r.Cursor, Row: r.Row, MaxBytes: maxBytes}
		switch r.Op {
		case wire.OpGet:
			if len(k.Key) == 0 {
				return nil, Errorf(CodeBadRequest, "get needs key")
			}
			return kv.Get(ctx, k)
		case wire.OpMultiGet:
			if k.Keys == nil {
				return nil, Errorf(CodeBadRequest, "multi_get needs keys")
			}
			return kv.MultiGet(ctx, k)
		case wire.OpScan:
			return kv.Scan(ctx, k)
		case wire.OpPut:
			if len(k.Row) == 0 {
				return nil, Errorf(CodeBadRequest, "put needs row")
			}
			return kv.Put(ctx, k)
		default:
			if len(k.Key) == 0 {
				return nil, Errorf(CodeBadRequest, "delete needs key")
			}
			return kv.Delete(ctx, k)
		}

	case wire.OpHTTP:
		up, ok := t.b.(Upstream)
		if !ok {
			return nil, Unsupported(t.name, t.typ, "http (only an http upstream takes it)")
		}
		resp, err := up.Call(ctx, HTTPRequest{Method: r.Method, Path: r.Path, Header: r.Headers, Body: r.Body})
		if err != nil {
			return nil, err
		}
		return &Result{HTTP: resp}, nil

	case wire.OpJoin:
		return s.join(ctx, r)

	case wire.OpReadRows, wire.OpMutateRow, wire.OpIncrement, wire.OpCheckAndMutate:
		wc, ok := t.b.(WideColumn)
		if !ok {
			return nil, Unsupported(t.name, t.typ, r.Op.String()+" (a Bigtable operation)")
		}
		return executeWideColumn(ctx, wc, r, maxBytes)
	}
	return nil, Errorf(CodeBadRequest, "op %s does not run on a backend", r.Op)
}

func executeWideColumn(ctx context.Context, wc WideColumn, r *wire.Request, maxBytes int) (*Result, error) {
	var key []byte
	if r.Op != wire.OpReadRows {
		if len(r.Key) != 1 {
			return nil, Errorf(CodeBadRequest, "%s needs key: [row key]", r.Op)
		}
		var err error
		if key, err = rowKey(r.Key[0]); err != nil {
			return nil, err
		}
	}
	switch r.Op {
	case wire.OpReadRows:
		rr := RowsRequest{Table: r.Table, Limit: int(r.Limit), Cursor: r.Cursor, Families: r.Families,
			Columns: r.Columns, LatestOnly: r.Latest, MaxBytes: maxBytes}
		var err error
		for i, k := range r.Keys {
			if len(k) != 1 {
				return nil, Errorf(CodeBadRequest, "keys[%d]: a row key is [key]", i)
			}
			kb, err := rowKey(k[0])
			if err != nil {
				return nil, err
			}
			rr.Keys = append(rr.Keys, kb)
		}
		if rr.Prefix, err = optionalRowKey("prefix", r.Prefix); err != nil {
			return nil, err
		}
		if rr.Start, err = optionalRowKey("start", r.Start); err != nil {
			return nil, err
		}
		if rr.End, err = optionalRowKey("end", r.End); err != nil {
			return nil, err
		}
		return wc.ReadRows(ctx, rr)
	case wire.OpMutateRow:
		ms, err := mutations(r.Mutations)
		if err != nil {
			return nil, err
		}
		return wc.MutateRow(ctx, RowMutation{Table: r.Table, Key: key, Mutations: ms})
	case wire.OpIncrement:
		return wc.Increment(ctx, IncrementRequest{Table: r.Table, Key: key, Family: r.Family, Qualifier: r.Qualifier, Delta: r.Delta})
	default:
		c := CheckAndMutateRequest{Table: r.Table, Key: key, Family: r.Family, Qualifier: r.Qualifier}
		if r.Value != nil {
			v, err := CellValue(r.Value)
			if err != nil {
				return nil, Errorf(CodeBadRequest, "value: %s", err)
			}
			c.Value = v
		}
		var err error
		if c.IfTrue, err = mutations(r.IfTrue); err != nil {
			return nil, err
		}
		if c.IfFalse, err = mutations(r.IfFalse); err != nil {
			return nil, err
		}
		return wc.CheckAndMutate(ctx, c)
	}
}

// rowKey turns a key value into bytes: str and bin as they are, integers as
// decimal text.
func rowKey(v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	}
	return nil, Errorf(CodeBadRequest, "a row key is a string or bytes, not %T", v)
}

func optionalRowKey(field string, v []any) ([]byte, error) {
	switch len(v) {
	case 0:
		return nil, nil
	case 1:
		return rowKey(v[0])
	}
	return nil, Errorf(CodeBadRequest, "%s: a row key is one value, got %d", field, len(v))
}

func mutations(in []wire.Mutation) ([]Mutation, error) {
	out := make([]Mutation, len(in))
	for i, m := range in {
		out[i] = Mutation{Op: m.Op, Family: m.Family, Qualifier: m.Qualifier, Timestamp: m.Timestamp}
		switch m.Op {
		case "set", "delete_cells", "delete_family", "delete_row":
		default:
			return nil, Errorf(CodeBadRequest, "mutation %d: op %q is not set, delete_cells, delete_family or delete_row", i+1, m.Op)
		}
		if m.Value != nil {
			v, err := CellValue(m.Value)
			if err != nil {
				return nil, Errorf(CodeBadRequest, "mutation %d: %s", i+1, err)
			}
			out[i].Value = v
		}
	}
	return out, nil
}

// CellValue turns a value into a Bigtable cell's bytes: strings and bytes as
// they are, integers as 8-byte big-endian two's complement, the counter form
// that increment works on. put, mutate_row and check_and_mutate all use it.
func CellValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	case int64:
		return binary.BigEndian.AppendUint64(nil, uint64(x)), nil
	case uint64:
		return binary.BigEndian.AppendUint64(nil, x), nil
	case int:
		return binary.BigEndian.AppendUint64(nil, uint64(x)), nil
	}
	return nil, fmt.Errorf("a cell value is a string, bytes or an integer (stored as 8-byte big-endian), not %T", v)
}

// ValueSize approximates the encoded size of a row value, for the backends
// that enforce Statement.MaxBytes and KeyRequest.MaxBytes while reading rows.
func ValueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 5
	case []byte:
		return len(x) + 5
	}
	return 9
}
