package bigtable

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	tether "github.com/tether-php/tether"
)

// RowsRequest selects rows and the cells to return (ReadRows).
type RowsRequest struct {
	Table      string
	Keys       [][]byte // read these rows; or
	Prefix     []byte   // rows whose key starts with this; or
	Start, End []byte   // rows from Start (inclusive) to End (exclusive)
	Limit      int
	Cursor     []byte
	Families   []string // only these families; empty: all
	Columns    []string // only these "family:qualifier" columns; empty: all
	LatestOnly bool     // only each column's latest cell
	MaxBytes   int
}

// Mutation is one change to a row.
type Mutation struct {
	Op        string // "set", "delete_cells", "delete_family", "delete_row"
	Family    string
	Qualifier string
	Value     []byte
	Timestamp int64 // microseconds; 0: server time for set, all cells for delete_cells
}

// RowMutation is a set of mutations applied to one row atomically
// (MutateRow).
type RowMutation struct {
	Table     string
	Key       []byte
	Mutations []Mutation
}

// IncrementRequest adds to a counter cell (Increment).
type IncrementRequest struct {
	Table, Family, Qualifier string
	Key                      []byte
	Delta                    int64
}

// CheckAndMutateRequest is a conditional row mutation. The predicate matches
// when the row has a cell in Family:Qualifier (Family alone: any column of the
// family) whose latest value equals Value, or, with Value nil, any value.
type CheckAndMutateRequest struct {
	Table             string
	Key               []byte
	Family, Qualifier string
	Value             []byte
	IfTrue, IfFalse   []Mutation
}

// WideColumn implements tether.WideColumn: it maps r's values to row keys
// (requestRowKey) and cells (CellValue), refusing with bad_request what does not
// map, and runs ReadRows, MutateRow, Increment or CheckAndMutate.
func (b *Backend) WideColumn(ctx context.Context, r tether.WideColumnRequest) (*tether.Result, error) {
	var key []byte
	if r.Op != tether.OpReadRows {
		if len(r.Key) != 1 {
			return nil, tether.Errorf(tether.CodeBadRequest, "%s needs key: [row key]", r.Op)
		}
		var err error
		if key, err = requestRowKey(r.Key[0]); err != nil {
			return nil, err
		}
	}
	switch r.Op {
	case tether.OpReadRows:
		rr := RowsRequest{Table: r.Table, Limit: r.Limit, Cursor: r.Cursor, Families: r.Families,
			Columns: r.Columns, LatestOnly: r.LatestOnly, MaxBytes: r.MaxBytes}
		var err error
		for i, k := range r.Keys {
			if len(k) != 1 {
				return nil, tether.Errorf(tether.CodeBadRequest, "keys[%d]: a row key is [key]", i)
			}
			kb, err := requestRowKey(k[0])
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
		return b.ReadRows(ctx, rr)
	case tether.OpMutateRow:
		ms, err := mutations(r.Mutations)
		if err != nil {
			return nil, err
		}
		return b.MutateRow(ctx, RowMutation{Table: r.Table, Key: key, Mutations: ms})
	case tether.OpIncrement:
		return b.Increment(ctx, IncrementRequest{Table: r.Table, Key: key, Family: r.Family, Qualifier: r.Qualifier, Delta: r.Delta})
	case tether.OpCheckAndMutate:
		c := CheckAndMutateRequest{Table: r.Table, Key: key, Family: r.Family, Qualifier: r.Qualifier}
		if r.Value != nil {
			v, err := CellValue(r.Value)
			if err != nil {
				return nil, tether.Errorf(tether.CodeBadRequest, "value: %s", err)
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
		return b.CheckAndMutate(ctx, c)
	}
	return nil, tether.Errorf(tether.CodeBadRequest, "op %s is not a wide-column operation", r.Op)
}

// requestRowKey turns a key value into bytes: str and bin as they are, integers as
// decimal text.
func requestRowKey(v any) ([]byte, error) {
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
	return nil, tether.Errorf(tether.CodeBadRequest, "a row key is a string or bytes, not %T", v)
}

// optionalRowKey is requestRowKey for a field of one value or none (nil).
func optionalRowKey(field string, v []any) ([]byte, error) {
	switch len(v) {
	case 0:
		return nil, nil
	case 1:
		return requestRowKey(v[0])
	}
	return nil, tether.Errorf(tether.CodeBadRequest, "%s: a row key is one value, got %d", field, len(v))
}

// mutations maps a client's mutations, checking their ops and encoding
// their values (CellValue).
func mutations(in []tether.CellMutation) ([]Mutation, error) {
	out := make([]Mutation, len(in))
	for i, m := range in {
		out[i] = Mutation{Op: m.Op, Family: m.Family, Qualifier: m.Qualifier, Timestamp: m.Timestamp}
		switch m.Op {
		case "set", "delete_cells", "delete_family", "delete_row":
		default:
			return nil, tether.Errorf(tether.CodeBadRequest, "mutation %d: op %q is not set, delete_cells, delete_family or delete_row", i+1, m.Op)
		}
		if m.Value != nil {
			v, err := CellValue(m.Value)
			if err != nil {
				return nil, tether.Errorf(tether.CodeBadRequest, "mutation %d: %s", i+1, err)
			}
			out[i].Value = v
		}
	}
	return out, nil
}

// CellValue turns a value into a cell's bytes: strings and bytes as they
// are, integers as 8-byte big-endian two's complement, the counter form that
// increment works on. put, mutate_row and check_and_mutate all use it.
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
