package bigtable

import (
	"context"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/bigtable"

	tether "github.com/tether-php/tether"
)

// LongColumns are the columns of ReadRows' result: one row per cell.
var LongColumns = []string{"key", "family", "qualifier", "timestamp", "value"}

// ReadRows reads rows by r.Keys, or by r.Prefix, or from r.Start to r.End,
// after r.Cursor, at most r.Limit rows (by range, DefaultScanLimit if 0; by
// keys, all of them if 0; never more than MaxScanLimit). It returns one row
// per cell, in key, family, qualifier and then newest-first order, as
// LongColumns: the key, qualifier and value as bytes, the family as a
// string, the timestamp in microseconds. r.Families and r.Columns
// ("family:qualifier") select cells (their union; all cells when both are
// empty); r.LatestOnly keeps each column's newest cell. Result.Cursor is set
// when more rows follow. Safe to retry.
func (b *Backend) ReadRows(ctx context.Context, r RowsRequest) (*tether.Result, error) {
	after, err := decodeCursor(r.Cursor)
	if err != nil {
		return nil, err
	}
	var rs bigtable.RowSet
	var limit int
	ok := true
	if len(r.Keys) > 0 {
		if len(r.Prefix) > 0 || len(r.Start) > 0 || len(r.End) > 0 {
			return nil, badRequest("read_rows by keys or by range, not both")
		}
		keys := make([]string, 0, len(r.Keys))
		for _, k := range r.Keys {
			if err := checkKey(string(k)); err != nil {
				return nil, err
			}
			if string(k) > after {
				keys = append(keys, string(k))
			}
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		rs, ok = bigtable.RowList(keys), len(keys) > 0
		limit, err = scanLimit(r.Limit, 0)
	} else {
		if rs, ok, err = keyRange(string(r.Prefix), string(r.Start), string(r.End), after); err != nil {
			return nil, err
		}
		limit, err = scanLimit(r.Limit, DefaultScanLimit)
	}
	if err != nil {
		return nil, err
	}
	filter, err := cellFilter(r.Families, r.Columns, r.LatestOnly)
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, r.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	res := &tether.Result{Columns: LongColumns}
	if !ok {
		return res, nil
	}
	var opts []bigtable.ReadOption
	if filter != nil {
		opts = append(opts, bigtable.RowFilter(filter))
	}
	if limit > 0 {
		// One row more than the page tells whether another page follows.
		opts = append(opts, bigtable.LimitRows(int64(limit)+1))
	}
	var (
		size, nrows int
		lastKey     string
		more        bool
		tooBig      error
	)
	err = t.ReadRows(ctx, rs, func(row bigtable.Row) bool {
		if limit > 0 && nrows == limit {
			more = true
			return false
		}
		nrows++
		lastKey = row.Key()
		for _, fam := range slices.Sorted(maps.Keys(row)) {
			for _, it := range row[fam] {
				qual := strings.TrimPrefix(it.Column, fam+":")
				v := it.Value
				if v == nil {
					v = []byte{}
				}
				res.Rows = append(res.Rows, []any{[]byte(it.Row), fam, []byte(qual), int64(it.Timestamp), v})
				size += len(it.Row) + len(it.Column) + len(v) + 8
			}
		}
		if r.MaxBytes > 0 && size > r.MaxBytes {
			tooBig = tooLarge("result exceeds %d bytes", r.MaxBytes)
			return false
		}
		return true
	}, opts...)
	if err != nil {
		return nil, classify(ctx, c, "read_rows", r.Table, true, err)
	}
	if tooBig != nil {
		return nil, tooBig
	}
	if more {
		res.Cursor = encodeCursor(lastKey)
	}
	return res, nil
}

// cellFilter returns the filter of a read_rows: the cells of families and of
// the "family:qualifier" columns, each column's latest only when latest; nil
// for every cell.
func cellFilter(families, columns []string, latest bool) (bigtable.Filter, error) {
	var cols [][2]string
	for _, f := range families {
		if !validFamilyName(f) {
			return nil, badRequest("bad column family name %q", f)
		}
	}
	families = slices.Compact(slices.Sorted(slices.Values(families)))
	for _, col := range columns {
		fam, qual, err := splitColumn(col)
		if err != nil {
			return nil, err
		}
		// A column of a family read whole would come back twice.
		if !slices.Contains(families, fam) && !slices.Contains(cols, [2]string{fam, qual}) {
			cols = append(cols, [2]string{fam, qual})
		}
	}
	sel := selector(families, cols)
	switch {
	case !latest:
		return sel, nil
	case sel == nil:
		return latestOnly, nil
	}
	return bigtable.ChainFilters(sel, latestOnly), nil
}

// MutateRow applies m.Mutations to one row atomically. Result.Affected is 1.
// Safe to retry: sets at the server's time write the same values again, as
// newer cells; deletes are idempotent.
func (b *Backend) MutateRow(ctx context.Context, m RowMutation) (*tether.Result, error) {
	if err := checkKey(string(m.Key)); err != nil {
		return nil, err
	}
	if len(m.Mutations) == 0 {
		return nil, badRequest("mutate_row needs at least one mutation")
	}
	mut, err := mutation("mutations", m.Mutations, len(m.Key))
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, m.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	if err := t.Apply(ctx, string(m.Key), mut); err != nil {
		return nil, classify(ctx, c, "mutate_row", m.Table, true, err)
	}
	return &tether.Result{Affected: 1}, nil
}

// mutation builds a Bigtable mutation; size is the bytes counted so far
// against MaxMutationBytes.
//
// Timestamps are microseconds with Bigtable's millisecond granularity: the
// sub-millisecond part is dropped. A set with timestamp 0 takes the server's
// time; a delete_cells with timestamp 0 deletes every cell of the column,
// with a timestamp only the cell at that millisecond.
func mutation(field string, ms []Mutation, size int) (*bigtable.Mutation, error) {
	mut := bigtable.NewMutation()
	for i, m := range ms {
		where := field + "[" + strconv.Itoa(i) + "] (" + m.Op + ")"
		if m.Op != "delete_row" && !validFamilyName(m.Family) {
			return nil, badRequest("%s: bad column family name %q", where, m.Family)
		}
		if m.Timestamp < 0 {
			return nil, badRequest("%s: timestamp %d is negative", where, m.Timestamp)
		}
		if len(m.Qualifier) > MaxQualifierBytes {
			return nil, tooLarge("%s: column qualifier of %d bytes exceeds Bigtable's limit of %d", where, len(m.Qualifier), MaxQualifierBytes)
		}
		size += len(m.Family) + len(m.Qualifier) + len(m.Value)
		ts := bigtable.Timestamp(m.Timestamp).TruncateToMilliseconds()
		switch m.Op {
		case "set":
			if m.Timestamp == 0 {
				ts = bigtable.ServerTime
			}
			v := m.Value
			if v == nil {
				v = []byte{}
			}
			mut.Set(m.Family, m.Qualifier, ts, v)
		case "delete_cells":
			if m.Timestamp == 0 {
				mut.DeleteCellsInColumn(m.Family, m.Qualifier)
			} else {
				mut.DeleteTimestampRange(m.Family, m.Qualifier, ts, ts+1000)
			}
		case "delete_family":
			mut.DeleteCellsInFamily(m.Family)
		case "delete_row":
			mut.DeleteRow()
		default:
			return nil, badRequest("%s: op is not set, delete_cells, delete_family or delete_row", where)
		}
	}
	if size > MaxMutationBytes {
		return nil, tooLarge("mutation of %d bytes exceeds the limit of %d bytes", size, MaxMutationBytes)
	}
	return mut, nil
}

// IncrementColumns are the columns of Increment's result.
var IncrementColumns = []string{"key", "family", "qualifier", "value"}

// Increment adds r.Delta to the 8-byte big-endian counter in one cell (a
// missing cell counts as 0) with ReadModifyWrite, and returns the new value
// as an int64 in one row of IncrementColumns. A cell holding anything but 8
// bytes is a backend_error. Not safe to retry: a repeat adds again.
func (b *Backend) Increment(ctx context.Context, r IncrementRequest) (*tether.Result, error) {
	if err := checkKey(string(r.Key)); err != nil {
		return nil, err
	}
	if !validFamilyName(r.Family) {
		return nil, badRequest("increment: bad column family name %q", r.Family)
	}
	if len(r.Qualifier) > MaxQualifierBytes {
		return nil, tooLarge("increment: column qualifier of %d bytes exceeds Bigtable's limit of %d", len(r.Qualifier), MaxQualifierBytes)
	}
	ctx, c, t, err := b.begin(ctx, r.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment(r.Family, r.Qualifier, r.Delta)
	row, err := t.ApplyReadModifyWrite(ctx, string(r.Key), rmw)
	if err != nil {
		return nil, classify(ctx, c, "increment", r.Table, false, err)
	}
	col := r.Family + ":" + r.Qualifier
	for _, it := range row[r.Family] {
		if it.Column == col && len(it.Value) == 8 {
			v := int64(binary.BigEndian.Uint64(it.Value))
			return &tether.Result{Columns: IncrementColumns, Affected: 1,
				Rows: [][]any{{[]byte(r.Key), r.Family, []byte(r.Qualifier), v}}}, nil
		}
	}
	return nil, tether.Errorf(tether.CodeBackendError, "bigtable increment: the reply holds no 8-byte value for %s", col)
}

// CheckAndMutate applies c.IfTrue when the row's latest cell in
// c.Family:c.Qualifier (with no qualifier, in any column of c.Family) equals
// c.Value (any value when nil), else c.IfFalse, atomically.
// Result.Affected is 1 if the predicate matched. Not safe to retry: the first
// run may have changed what the predicate sees.
func (b *Backend) CheckAndMutate(ctx context.Context, cm CheckAndMutateRequest) (*tether.Result, error) {
	if err := checkKey(string(cm.Key)); err != nil {
		return nil, err
	}
	if !validFamilyName(cm.Family) {
		return nil, badRequest("check_and_mutate: bad column family name %q", cm.Family)
	}
	if len(cm.IfTrue) == 0 && len(cm.IfFalse) == 0 {
		return nil, badRequest("check_and_mutate needs if_true or if_false mutations")
	}
	var ifTrue, ifFalse *bigtable.Mutation
	var err error
	if len(cm.IfTrue) > 0 {
		if ifTrue, err = mutation("if_true", cm.IfTrue, len(cm.Key)); err != nil {
			return nil, err
		}
	}
	if len(cm.IfFalse) > 0 {
		if ifFalse, err = mutation("if_false", cm.IfFalse, len(cm.Key)); err != nil {
			return nil, err
		}
	}
	pred := []bigtable.Filter{familyFilter(cm.Family), latestOnly}
	if cm.Qualifier != "" {
		pred[0] = columnFilter(cm.Family, cm.Qualifier)
	}
	if cm.Value != nil {
		pred = append(pred, bigtable.ValueRangeFilter(cm.Value, append(slices.Clip(cm.Value), 0)))
	}
	ctx, c, t, err := b.begin(ctx, cm.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	var matched bool
	mut := bigtable.NewCondMutation(bigtable.ChainFilters(pred...), ifTrue, ifFalse)
	if err := t.Apply(ctx, string(cm.Key), mut, bigtable.GetCondMutationResult(&matched)); err != nil {
		return nil, classify(ctx, c, "check_and_mutate", cm.Table, false, err)
	}
	res := &tether.Result{}
	if matched {
		res.Affected = 1
	}
	return res, nil
}
