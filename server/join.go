package server

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"unsafe"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/wire"
)

// A lookup join (op join) answers in one round trip what a PHP page would do
// in two or more: run the left operation, collect the distinct keys its rows
// point at, fetch those rows from the right table with one multi_get (which
// may be on another backend), and glue the two together, optionally sorted.
//
// It is written here rather than left to SQL because the right side may be
// any backend with the key API (Cassandra, Bigtable, another database), and
// because the right side is read by primary key through a prepared, cached
// statement: the database does a range read and a point lookup instead of
// planning a join, and the rows reach PHP column-oriented.

// joinKinds are the join kinds a request may name ("" is left).
var joinKinds = []string{"", "left", "inner"}

// checkJoin validates a join request's shape before anything runs.
func checkJoin(r *wire.Request) *tether.Error {
	switch {
	case r.Left == nil:
		return tether.Errorf(tether.CodeBadRequest, "join needs left: the operation that produces the rows")
	case r.Right == nil || r.Right.Table == "":
		return tether.Errorf(tether.CodeBadRequest, "join needs right: {backend?, table, columns?}")
	case len(r.On) == 0:
		return tether.Errorf(tether.CodeBadRequest, "join needs on: the left columns that form the right table's key")
	case !slices.Contains(joinKinds, r.Kind):
		return tether.Errorf(tether.CodeBadRequest, "join kind %q is not left or inner", r.Kind)
	}
	switch r.Left.Op {
	case wire.OpQuery, wire.OpScan, wire.OpGet, wire.OpMultiGet, wire.OpReadRows:
	default:
		return tether.Errorf(tether.CodeBadRequest, "join left must be query, scan, get, multi_get or read_rows, not %q", r.Left.Name())
	}
	if r.Left.Tx != 0 {
		return tether.Errorf(tether.CodeBadRequest, "join left cannot run in a transaction")
	}
	if r.Left.Op == wire.OpQuery && r.Left.SQL == "" {
		return tether.Errorf(tether.CodeBadRequest, "join left query needs sql")
	}
	if r.Left.Op != wire.OpQuery && r.Left.Table == "" {
		return tether.Errorf(tether.CodeBadRequest, "join left %s needs table", r.Left.Op)
	}
	if r.Right.Op != wire.OpUnknown && r.Right.Op != wire.OpMultiGet || r.Right.OpName != "" && r.Right.Op == wire.OpUnknown {
		return tether.Errorf(tether.CodeBadRequest, "join right is looked up by key: it takes backend, table and columns, not op %q", r.Right.Name())
	}
	if r.Right.SQL != "" || r.Right.Keys != nil || r.Right.Key != nil {
		return tether.Errorf(tether.CodeBadRequest, "join right takes backend, table and columns only: its keys come from the left rows")
	}
	return nil
}

// join runs a join request that checkJoin accepted (serveFrame and
// checkBatchOp check every join before it is handed to a worker).
func (s *Server) join(ctx context.Context, r *wire.Request) (*tether.Result, error) {
	lt, e := s.backendFor(r.Left.Backend)
	if e != nil {
		return nil, e
	}
	rt, e := s.backendFor(r.Right.Backend)
	if e != nil {
		return nil, e
	}
	kv, ok := rt.b.(tether.KeyValue)
	if !ok {
		return nil, tether.Unsupported(rt.name, rt.typ, "the key API (a join's right side)")
	}

	left, sunk, err := s.joinLeft(ctx, lt, r)
	if err != nil {
		return nil, err
	}
	on := make([]int, len(r.On))
	for i, name := range r.On {
		if on[i] = slices.Index(left.Columns, name); on[i] < 0 {
			return nil, tether.Errorf(tether.CodeBadRequest, "join on: the left rows have no column %q (they have %s)", name, strings.Join(left.Columns, ", "))
		}
	}

	// The distinct keys, in first-seen order; keyOf[i] is left row i's key
	// (-1: no key, because the row is missing or an on value is nil).
	// A key of one string is looked up by the string itself (the common
	// case: no encoding per row); any other by its encoded values, in a map
	// of its own so that the two forms never meet.
	var (
		keys    [][]any
		keyOf   = make([]int32, len(left.Rows))
		seen    = make(map[string]int32, 32)
		strSeen = make(map[string]int32, 32)
		encKey  []byte
	)
	for i, row := range left.Rows {
		keyOf[i] = -1
		if row == nil {
			continue
		}
		if len(on) == 1 {
			if str, ok := row[on[0]].(string); ok {
				k, ok := strSeen[str]
				if !ok {
					k = int32(len(keys))
					keys = append(keys, []any{row[on[0]]})
					strSeen[str] = k
				}
				keyOf[i] = k
				continue
			}
		}
		encKey = encKey[:0]
		null := false
		for _, c := range on {
			if row[c] == nil {
				null = true
				break
			}
			encKey = wire.AppendValue(encKey, row[c])
		}
		if null {
			continue
		}
		k, ok := seen[string(encKey)] // no allocation for the lookup
		if !ok {
			k = int32(len(keys))
			key := make([]any, len(on))
			for j, c := range on {
				key[j] = row[c]
			}
			keys = append(keys, key)
			seen[string(encKey)] = k
		}
		keyOf[i] = k
	}

	// Even with no keys, the lookup runs: it checks that the right table
	// exists and names its columns.
	right, err := kv.MultiGet(ctx, tether.KeyRequest{Table: r.Right.Table, Keys: keys, Columns: r.Right.Columns,
		MaxBytes: s.cfg.Server.MaxResultBytes})
	if err != nil {
		return nil, err
	}
	if len(right.Rows) != len(keys) {
		return nil, tether.Errorf(tether.CodeInternal, "join: multi_get on %s returned %d rows for %d keys", rt.name, len(right.Rows), len(keys))
	}

	columns := make([]string, 0, len(left.Columns)+len(right.Columns))
	columns = append(columns, left.Columns...)
	for _, c := range right.Columns {
		if slices.Contains(columns, c) {
			c = r.Right.Table + "." + c
		}
		columns = append(columns, c)
	}

	inner := r.Kind == "inner"
	nl, width := len(left.Columns), len(columns)
	n := 0
	// In place when joinSink built the left rows and left room enough in
	// each (zero past the left values: a row without a match needs no
	// writes). Not in rows a backend built: their room may be another row's.
	inPlace := sunk
	for i, row := range left.Rows {
		if row != nil && (!inner || keyOf[i] >= 0 && right.Rows[keyOf[i]] != nil) {
			n++
			inPlace = inPlace && cap(row) >= width
		}
	}
	// The joined rows: the left rows themselves when joinSink left room in
	// each for the right's values (no copy), else one backing array for
	// every joined row (two allocations, not one per row). rowKey[j] is the
	// key of joined row j, for ordering by a right column.
	var values []any
	rows := left.Rows[:0] // joined row j is written once left row j >= j is read
	if !inPlace {
		values = make([]any, n*width)
		rows = make([][]any, 0, n)
	}
	rowKey := make([]int32, 0, n)
	for i, row := range left.Rows {
		if row == nil {
			continue
		}
		var match []any
		if keyOf[i] >= 0 {
			match = right.Rows[keyOf[i]]
		}
		if inner && match == nil {
			continue
		}
		var out []any
		if inPlace {
			out = row[:width]
		} else {
			out = values[:width:width]
			values = values[width:]
			copy(out, row)
		}
		if match != nil {
			copy(out[nl:], match)
		}
		rows = append(rows, out)
		rowKey = append(rowKey, keyOf[i])
	}

	if len(r.OrderBy) > 0 {
		if err := sortJoined(rows, columns, r.OrderBy, nl, right.Rows, rowKey); err != nil {
			return nil, err
		}
	}
	return &tether.Result{Columns: columns, Rows: rows}, nil
}

// loopQuerier is a loop-driven SQL pool's Go API (sqlpool.Pool's Do), which
// takes a request with a row sink of the caller's choosing.
type loopQuerier interface {
	Do(ctx context.Context, r *sqlpool.Request) error
}

// joinLeft runs a join's left operation. A plain query on a loop-driven SQL
// pool (MariaDB, PostgreSQL) decodes its rows into a joinSink, which leaves
// room in each row for the right side's values and boxes the values out of a
// few slabs per join; anything else runs as the operation would on its own
// (execute).
//
// sunk reports whether joinSink built the rows.
func (s *Server) joinLeft(ctx context.Context, lt target, r *wire.Request) (res *tether.Result, sunk bool, err error) {
	l := r.Left
	lq, ok := lt.b.(loopQuerier)
	if !ok || lt.loopBackend() == nil || l.Op != wire.OpQuery || l.Limit != 0 || l.Cursor != nil {
		res, err = s.execute(ctx, lt, nil, l)
		return res, false, err
	}
	// What execute does around a backend call: the fault hook, and a panic
	// made the request's internal error.
	defer func() {
		if v := recover(); v != nil {
			res, sunk, err = nil, false, tether.RecoverPanic(s.log, lt.name, l.Op.String(), v)
		}
	}()
	if fault.Enabled() {
		fault.Inject(fault.WorkerCall, faultDetail(l))
	}
	sink := &joinSink{maxBytes: s.cfg.Server.MaxResultBytes, rows: [][]any{}}
	if r.Right.Columns != nil {
		sink.extra = len(r.Right.Columns)
	}
	if err := lq.Do(ctx, &sqlpool.Request{Kind: sqlpool.KindQuery, SQL: l.SQL, Params: l.Params, Sink: sink}); err != nil {
		return nil, false, err
	}
	return &tether.Result{Columns: sink.columns, Rows: sink.rows}, true, nil
}

// joinSink is the tether.RowSink a join's left query decodes into: it builds
// the rows tether.ResultBuilder would (the same values, of the same types,
// and the same byte limit), but each row has room past its values for the
// right side's (extra), and the rows, the bytes of text values and the
// boxed values are cut from slabs, a few allocations per join instead of
// two or three per value. On a 500-row join the per-value allocations and
// the garbage collection they caused were a third of tetherd's CPU.
//
// Boxing a string or a number into an interface allocates its value on the
// heap; box builds the interface pointing into a slab instead (see box). The
// slabs are never written again once a value points into them, and never
// reused: the rows may outlive the join (a batch holds them until it ends).
type joinSink struct {
	columns []string
	rows    [][]any
	row     []any
	extra   int // room for the right side's values in each row
	width   int // len(columns) + extra

	vals []any     // the slab the next rows are cut from
	strs []string  // the slab the next strings are boxed from
	ints []int64   // ... integers
	flts []float64 // ... floats
	text []byte    // the arena the next strings' bytes are copied to

	maxBytes, size int
}

// Columns implements tether.RowSink.
func (j *joinSink) Columns(n int) {
	j.columns = make([]string, 0, n)
	j.width = n + j.extra
}

// Column implements tether.RowSink.
func (j *joinSink) Column(name []byte) { j.columns = append(j.columns, string(name)) }

// BeginRow implements tether.RowSink.
func (j *joinSink) BeginRow() {
	if cap(j.vals)-len(j.vals) < j.width {
		w := max(j.width, 1)
		j.vals = make([]any, 0, w*slabCap(cap(j.vals)/w, 2, slabRows))
	}
	l := len(j.vals)
	j.vals = j.vals[:l+j.width]
	j.row = j.vals[l : l : l+j.width]
}

// The largest of joinSink's slabs: each slab is twice the last up to these,
// so that a join allocates about the bytes its rows take (the collector runs
// by bytes allocated; a one-row join allocates under 2 KB of slabs), in a few
// dozen slabs for 500 rows.
const (
	slabRows   = 64   // rows
	slabValues = 256  // strings, integers, floats
	slabText   = 8192 // bytes of text
)

// slabCap is the capacity of a slab after one of capacity last: first at
// first, then twice the last, at most most.
func slabCap(last, first, most int) int {
	if last == 0 {
		return first
	}
	return min(2*last, most)
}

func (j *joinSink) add(v any, size int) {
	j.row = append(j.row, v)
	j.size += size
}

// Nil implements tether.RowSink.
func (j *joinSink) Nil() { j.add(nil, 9) }

// Bool implements tether.RowSink (a bool is boxed without allocating).
func (j *joinSink) Bool(v bool) { j.add(v, 9) }

// Int implements tether.RowSink.
func (j *joinSink) Int(v int64) {
	if len(j.ints) == cap(j.ints) {
		j.ints = make([]int64, 0, slabCap(cap(j.ints), 8, slabValues))
	}
	j.ints = append(j.ints, v)
	j.add(box(int64Type, unsafe.Pointer(&j.ints[len(j.ints)-1])), 9)
}

// Uint implements tether.RowSink (rare: boxed as usual).
func (j *joinSink) Uint(v uint64) { j.add(v, 9) }

// Float implements tether.RowSink.
func (j *joinSink) Float(v float64) {
	if len(j.flts) == cap(j.flts) {
		j.flts = make([]float64, 0, slabCap(cap(j.flts), 8, slabValues))
	}
	j.flts = append(j.flts, v)
	j.add(box(float64Type, unsafe.Pointer(&j.flts[len(j.flts)-1])), 9)
}

// Text implements tether.RowSink.
func (j *joinSink) Text(b []byte) {
	var str string
	if len(b) > 0 {
		if cap(j.text)-len(j.text) < len(b) {
			j.text = make([]byte, 0, max(slabCap(cap(j.text), 256, slabText), len(b)))
		}
		at := len(j.text)
		j.text = append(j.text, b...)
		// The arena's bytes are never written again: only appended past.
		str = unsafe.String(&j.text[at], len(b))
	}
	if len(j.strs) == cap(j.strs) {
		j.strs = make([]string, 0, slabCap(cap(j.strs), 8, slabValues))
	}
	j.strs = append(j.strs, str)
	j.add(box(stringType, unsafe.Pointer(&j.strs[len(j.strs)-1])), len(b)+5)
}

// DateTime implements tether.RowSink: the value as it comes, ISO 8601.
func (j *joinSink) DateTime(b []byte) { j.Text(b) }

// Bytes implements tether.RowSink.
func (j *joinSink) Bytes(b []byte) { j.add(append([]byte{}, b...), len(b)+5) }

// EndRow implements tether.RowSink.
func (j *joinSink) EndRow() error {
	j.rows = append(j.rows, j.row)
	j.row = nil
	if j.maxBytes > 0 && j.size > j.maxBytes {
		return tether.ErrResultTooLarge
	}
	return nil
}

var _ tether.RowSink = (*joinSink)(nil)

// eface is the layout of an interface value of type any: its dynamic type,
// and a pointer to its value (for every type that is not itself a pointer).
// reflect and the runtime rely on the same layout.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeOf(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType  = typeOf("")
	int64Type   = typeOf(int64(0))
	float64Type = typeOf(float64(0))
)

// box returns the interface value of dynamic type typ whose value is *p,
// without copying *p to a new heap object as a conversion to any does:
// the interface points at p, which must hold a value of type typ (a string,
// int64 or float64 in a slab) and must not change afterwards. Interface
// values are immutable, so nothing reads the difference; the slab stays
// alive while any value points into it (the collector follows interior
// pointers). TestServer_JoinOnLoop checks the values such interfaces hold.
func box(typ, p unsafe.Pointer) (v any) {
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, p
	return v
}

// sortJoined sorts the joined rows stably by the named output columns
// ("-name" descending). nl is the number of left columns; right and rowKey
// are the right side's rows by key and each joined row's key (-1: none).
//
// Each column is first turned into a dense rank per row (equal values, equal
// ranks, ordered as compareValues orders them), then the rows are ordered by
// a stable counting sort per column, from the last to the first: O(n) per
// column once ranked. A right column is ranked by key (a few distinct
// values, whatever the number of rows), a left one by sorting its values
// (typed, see sortKey). On a 500-row join ordered by a right column, the
// comparison sort this replaced was an eighth of tetherd's CPU.
func sortJoined(rows [][]any, columns []string, orderBy []string, nl int, right [][]any, rowKey []int32) error {
	cols := make([]int, len(orderBy))
	for i, name := range orderBy {
		name = strings.TrimPrefix(name, "-")
		if cols[i] = slices.Index(columns, name); cols[i] < 0 {
			return tether.Errorf(tether.CodeBadRequest, "order_by: no output column %q (the columns are %s)", name, strings.Join(columns, ", "))
		}
	}
	n := len(rows)
	perm, next := make([]int32, n), make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	rank := make([]int32, n)
	var count []int32
	for i := len(orderBy) - 1; i >= 0; i-- {
		var top int32
		if cols[i] >= nl {
			top = rankByKey(rank, cols[i]-nl, right, rowKey)
		} else {
			top = rankRows(rank, rows, cols[i])
		}
		if strings.HasPrefix(orderBy[i], "-") {
			for j := range rank {
				rank[j] = top - rank[j]
			}
		}
		count = slices.Grow(count[:0], int(top)+2)[:int(top)+2]
		clear(count)
		for _, p := range perm {
			count[rank[p]+1]++
		}
		for r := 1; r < len(count); r++ {
			count[r] += count[r-1]
		}
		for _, p := range perm {
			next[count[rank[p]]] = p
			count[rank[p]]++
		}
		perm, next = next, perm
	}
	// rows[i] = rows[perm[i]] in place, cycle by cycle (perm[i] = -1: done).
	for i := range perm {
		if perm[i] < 0 {
			continue
		}
		first, j := rows[i], int32(i)
		for {
			k := perm[j]
			perm[j] = -1
			if k == int32(i) {
				rows[j] = first
				break
			}
			rows[j], j = rows[k], k
		}
	}
	return nil
}

// rankByKey sets rank[i] to the dense rank of joined row i's value in right
// column c, ranking the keys' values (and nil, for rows without a match)
// rather than the rows'. It returns the highest rank.
func rankByKey(rank []int32, c int, right [][]any, rowKey []int32) int32 {
	vals := make([]any, len(right)+1) // the last: a row without a match
	for k, row := range right {
		if row != nil {
			vals[k] = row[c]
		}
	}
	order := make([]int32, len(vals))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareValues(vals[a], vals[b]) })
	byKey := make([]int32, len(vals))
	var top int32
	for i, k := range order {
		if i > 0 && compareValues(vals[order[i-1]], vals[k]) != 0 {
			top++
		}
		byKey[k] = top
	}
	none := byKey[len(right)]
	for i, k := range rowKey {
		if k >= 0 {
			rank[i] = byKey[k]
		} else {
			rank[i] = none
		}
	}
	return top
}

// rankRows sets rank[i] to the dense rank of rows[i][col] among the column's
// values, and returns the highest rank.
func rankRows(rank []int32, rows [][]any, col int) int32 {
	if len(rows) == 0 {
		return 0
	}
	k := newSortKey(rows, col, false)
	order := make([]int32, len(rows))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return k.compare(rows, a, b) })
	var top int32
	for i, r := range order {
		if i > 0 && k.compare(rows, order[i-1], r) != 0 {
			top++
		}
		rank[r] = top
	}
	return top
}

// sortKey is one order_by column, typed when it can be.
type sortKey struct {
	col  int
	desc bool
	kind int      // 3: strs holds the values; 2: ints does; else compareValues
	null []bool   // for a typed key: the values that are nil (sorted first)
	strs []string //
	ints []int64  //
}

func newSortKey(rows [][]any, col int, desc bool) sortKey {
	k := sortKey{col: col, desc: desc, kind: -1}
	for _, row := range rows {
		if v := row[col]; v != nil {
			kind := -1
			switch v.(type) {
			case string:
				kind = 3
			case int64:
				kind = 2
			}
			if k.kind == -1 {
				k.kind = kind
			}
			if kind == -1 || kind != k.kind {
				k.kind = 0
				return k
			}
		}
	}
	if k.kind <= 0 {
		k.kind = 0
		return k
	}
	k.null = make([]bool, len(rows))
	if k.kind == 3 {
		k.strs = make([]string, len(rows))
	} else {
		k.ints = make([]int64, len(rows))
	}
	for i, row := range rows {
		switch v := row[col].(type) {
		case nil:
			k.null[i] = true
		case string:
			k.strs[i] = v
		case int64:
			k.ints[i] = v
		}
	}
	return k
}

func (k *sortKey) compare(rows [][]any, a, b int32) int {
	var c int
	switch {
	case k.kind == 0:
		c = compareValues(rows[a][k.col], rows[b][k.col])
	case k.null[a] || k.null[b]:
		c = boolRank(k.null[b]) - boolRank(k.null[a])
	case k.kind == 3:
		c = strings.Compare(k.strs[a], k.strs[b])
	case k.ints[a] < k.ints[b]:
		c = -1
	case k.ints[a] > k.ints[b]:
		c = 1
	}
	if k.desc {
		return -c
	}
	return c
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareValues orders two row values: nil first, then booleans, numbers by
// value (integers and floats together), then strings and bytes by their
// bytes. Values of different kinds order by kind.
func compareValues(a, b any) int {
	ka, kb := valueKind(a), valueKind(b)
	if ka != kb {
		return ka - kb
	}
	switch ka {
	case 0:
		return 0
	case 1:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case 2:
		return compareNumbers(a, b)
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	}
	return bytes.Compare(valueBytes(a), valueBytes(b))
}

func valueKind(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, uint64, float64, int, int32, float32:
		return 2
	}
	return 3
}

func compareNumbers(a, b any) int {
	ia, aInt := a.(int64)
	ib, bInt := b.(int64)
	if aInt && bInt {
		switch {
		case ia < ib:
			return -1
		case ia > ib:
			return 1
		}
		return 0
	}
	x, y := toFloat(a), toFloat(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	case math.IsNaN(x) && !math.IsNaN(y):
		return -1
	case !math.IsNaN(x) && math.IsNaN(y):
		return 1
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case float32:
		return float64(x)
	}
	return math.NaN()
}

func valueBytes(v any) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	return nil
}
