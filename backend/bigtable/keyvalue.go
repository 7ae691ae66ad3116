package bigtable

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/bigtable"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// The key API maps onto Bigtable as follows (docs/bigtable.md):
//
//   - A key is [row key]: a string or bytes, or an integer read as its
//     decimal text (42 is the row "42").
//   - A row comes back wide: the column "key" (the row key, as bytes) and
//     one column per "family:qualifier", each value the column's latest cell
//     as bytes, nil where the row has no such column. The columns are "key"
//     and then, without KeyRequest.Columns, the union, sorted, of the columns
//     of the rows returned, or the "family:qualifier" columns that
//     KeyRequest.Columns names, in its order ("key" there is allowed and
//     changes nothing). A row that exists without the named columns still
//     comes back, with nils.
//   - Put sets every "family:qualifier" of Row in one atomic mutation, at the
//     server's time; the row key is Row["key"]. Strings and bytes are stored
//     as they are, integers as 8-byte big-endian (the counter format of
//     Increment), nil deletes the column. Floats and booleans are refused.
//   - Scan pages by row key; its cursor encodes the last key returned.

// Get reads the latest cell of each column of one row. The Result has no
// rows if the row has no cells. Safe to retry.
func (b *Backend) Get(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	key, err := keyArg("key", k.Key)
	if err != nil {
		return nil, err
	}
	p, err := parseProjection(k.Columns)
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	row, err := t.ReadRow(ctx, key, bigtable.RowFilter(p.filter()))
	if err != nil {
		return nil, classify(ctx, c, "get", k.Table, true, err)
	}
	w := wideRows{out: p.out, maxBytes: k.MaxBytes}
	if row != nil && !w.add(row) {
		return nil, w.err
	}
	return w.result(), nil
}

// MultiGet reads the rows of k.Keys in one ReadRows. The Result has one row
// per key, in request order, nil where a key has no row. Safe to retry.
func (b *Backend) MultiGet(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	keys := make([]string, len(k.Keys))
	for i, key := range k.Keys {
		var err error
		if keys[i], err = keyArg("keys["+strconv.Itoa(i)+"]", key); err != nil {
			return nil, err
		}
	}
	p, err := parseProjection(k.Columns)
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	w := wideRows{out: p.out, maxBytes: k.MaxBytes}
	if len(keys) == 0 {
		return w.result(), nil // an empty RowList would read the whole table
	}
	unique := slices.Compact(slices.Sorted(slices.Values(keys)))
	err = t.ReadRows(ctx, bigtable.RowList(unique), w.add, bigtable.RowFilter(p.filter()))
	if err != nil {
		return nil, classify(ctx, c, "multi_get", k.Table, true, err)
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.inOrder(keys), nil
}

// Scan reads up to k.Limit rows (DefaultScanLimit if 0, at most
// MaxScanLimit) in key order, those whose key starts with k.Prefix or those
// from k.Start to k.End, after k.Cursor. Result.Cursor is set when more rows
// follow. Safe to retry.
func (b *Backend) Scan(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	after, err := decodeCursor(k.Cursor)
	if err != nil {
		return nil, err
	}
	rs, ok, err := scanRange(k.Prefix, k.Start, k.End, after)
	if err != nil {
		return nil, err
	}
	limit, err := scanLimit(k.Limit, DefaultScanLimit)
	if err != nil {
		return nil, err
	}
	p, err := parseProjection(k.Columns)
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	w := wideRows{out: p.out, maxBytes: k.MaxBytes}
	if !ok {
		return w.result(), nil
	}
	// One row more than the page tells whether another page follows.
	err = t.ReadRows(ctx, rs, func(r bigtable.Row) bool {
		if len(w.rows) == limit {
			w.more = true
			return false
		}
		return w.add(r)
	}, bigtable.RowFilter(p.filter()), bigtable.LimitRows(int64(limit)+1))
	if err != nil {
		return nil, classify(ctx, c, "scan", k.Table, true, err)
	}
	if w.err != nil {
		return nil, w.err
	}
	res := w.result()
	if w.more {
		res.Cursor = encodeCursor(w.rows[limit-1].key)
	}
	return res, nil
}

// scanLimit returns a request's page size: def for 0, at most MaxScanLimit.
func scanLimit(limit, def int) (int, error) {
	switch {
	case limit <= 0:
		return def, nil
	case limit > MaxScanLimit:
		return 0, badRequest("limit %d is over %d", limit, MaxScanLimit)
	}
	return limit, nil
}

// encodeCursor returns the cursor that resumes after row key.
func encodeCursor(key string) []byte {
	return wire.AppendKey(nil, []any{[]byte(key)})
}

// decodeCursor returns the row key a cursor resumes after, "" for none.
func decodeCursor(cursor []byte) (string, error) {
	if cursor == nil {
		return "", nil
	}
	key, err := wire.ReadKey(cursor)
	if err != nil || len(key) != 1 {
		return "", badRequest("cursor is not a Bigtable cursor")
	}
	k, err := rowKey(key[0])
	if err != nil {
		return "", badRequest("cursor is not a Bigtable cursor")
	}
	return k, nil
}

// Put writes the "family:qualifier" columns of k.Row to the row k.Row["key"]
// in one atomic MutateRow. Result.Affected is 1. Safe to retry: a repeat
// writes the same values again, as newer cells.
func (b *Backend) Put(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	kv, ok := k.Row["key"]
	if !ok {
		return nil, badRequest(`put needs the row key in row["key"]`)
	}
	key, err := rowKey(kv)
	if err != nil {
		return nil, err
	}
	m := bigtable.NewMutation()
	size := len(key)
	for _, col := range slices.Sorted(maps.Keys(k.Row)) {
		if col == "key" {
			continue
		}
		fam, qual, err := splitColumn(col)
		if err != nil {
			return nil, err
		}
		v := k.Row[col]
		if v == nil {
			m.DeleteCellsInColumn(fam, qual)
			size += len(col)
			continue
		}
		val, err := cellValue(col, v)
		if err != nil {
			return nil, err
		}
		m.Set(fam, qual, bigtable.ServerTime, val)
		size += len(col) + len(val)
	}
	if size == len(key) {
		return nil, badRequest(`put needs at least one "family:qualifier" column besides "key"`)
	}
	if size > MaxMutationBytes {
		return nil, tooLarge("put of %d bytes exceeds the limit of %d bytes per mutation", size, MaxMutationBytes)
	}
	ctx, c, t, err := b.begin(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	if err := t.Apply(ctx, key, m); err != nil {
		return nil, classify(ctx, c, "put", k.Table, true, err)
	}
	return &tether.Result{Affected: 1}, nil
}

// Delete deletes every cell of the row k.Key. Result.Affected is 1 (Bigtable
// does not say whether the row existed). Safe to retry.
func (b *Backend) Delete(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	key, err := keyArg("key", k.Key)
	if err != nil {
		return nil, err
	}
	ctx, c, t, err := b.begin(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	defer b.end()
	m := bigtable.NewMutation()
	m.DeleteRow()
	if err := t.Apply(ctx, key, m); err != nil {
		return nil, classify(ctx, c, "delete", k.Table, true, err)
	}
	return &tether.Result{Affected: 1}, nil
}

// keyArg returns the row key of a key-API key, which must be one value.
func keyArg(field string, key []any) (string, error) {
	if len(key) != 1 {
		return "", badRequest("%s: a Bigtable key is [row key], one value; got %d values", field, len(key))
	}
	return rowKey(key[0])
}

// rowKey returns a row key: a string or bytes as they are, an integer as its
// decimal text. It must be 1 to MaxKeyBytes bytes long.
func rowKey(v any) (string, error) {
	var k string
	switch x := v.(type) {
	case string:
		k = x
	case []byte:
		k = string(x)
	case int64:
		k = strconv.FormatInt(x, 10)
	case uint64:
		k = strconv.FormatUint(x, 10)
	case int:
		k = strconv.Itoa(x)
	default:
		return "", badRequest("a Bigtable row key is a string, bytes or an integer, not %T", v)
	}
	return k, checkKey(k)
}

func checkKey(k string) error {
	if k == "" {
		return badRequest("a Bigtable row key must not be empty")
	}
	if len(k) > MaxKeyBytes {
		return tooLarge("row key of %d bytes exceeds Bigtable's limit of %d", len(k), MaxKeyBytes)
	}
	return nil
}

// optionalKey returns the row key of a scan bound, "" when absent.
func optionalKey(field string, v []any) (string, error) {
	switch len(v) {
	case 0:
		return "", nil
	case 1:
		if s, ok := v[0].(string); ok && s == "" {
			return "", nil // an empty bound is no bound
		}
		if b, ok := v[0].([]byte); ok && len(b) == 0 {
			return "", nil
		}
		return rowKey(v[0])
	}
	return "", badRequest("%s: a Bigtable key is [row key], one value; got %d values", field, len(v))
}

// scanRange returns the rows a scan reads: by prefix or from start to end,
// after the row key after. ok is false when nothing can be left (after is
// past the end).
func scanRange(prefix, start, end []any, after string) (bigtable.RowSet, bool, error) {
	pre, err := optionalKey("prefix", prefix)
	if err != nil {
		return nil, false, err
	}
	lo, err := optionalKey("start", start)
	if err != nil {
		return nil, false, err
	}
	hi, err := optionalKey("end", end)
	if err != nil {
		return nil, false, err
	}
	return keyRange(pre, lo, hi, after)
}

// keyRange returns the range [lo, hi), or the rows starting with pre, after
// the row key after; "" is no bound.
func keyRange(pre, lo, hi, after string) (bigtable.RowSet, bool, error) {
	if pre != "" {
		if lo != "" || hi != "" {
			return nil, false, badRequest("scan by prefix or by start/end, not both")
		}
		lo, hi = pre, prefixSuccessor(pre)
	}
	if after != "" {
		// The next page starts just after the last row returned.
		lo = max(lo, after+"\x00")
	}
	if hi != "" && lo >= hi {
		return nil, false, nil
	}
	return bigtable.NewRange(lo, hi), true, nil
}

// prefixSuccessor returns the smallest key greater than every key starting
// with prefix, "" if there is none.
func prefixSuccessor(prefix string) string {
	n := len(prefix)
	for n > 0 && prefix[n-1] == 0xff {
		n--
	}
	if n == 0 {
		return ""
	}
	return prefix[:n-1] + string([]byte{prefix[n-1] + 1})
}

// splitColumn splits "family:qualifier" at the first colon (a family name
// has none; a qualifier may).
func splitColumn(col string) (family, qualifier string, err error) {
	family, qualifier, ok := strings.Cut(col, ":")
	if !ok {
		return "", "", badRequest(`column %q: a Bigtable column is "family:qualifier"`, col)
	}
	if !validFamilyName(family) {
		return "", "", badRequest("column %q: bad column family name %q", col, family)
	}
	if len(qualifier) > MaxQualifierBytes {
		return "", "", tooLarge("column qualifier of %d bytes exceeds Bigtable's limit of %d", len(qualifier), MaxQualifierBytes)
	}
	return family, qualifier, nil
}

// cellValue encodes a put value as CellValue does, naming the column
// in the error.
func cellValue(col string, v any) ([]byte, error) {
	b, err := CellValue(v)
	if err != nil {
		return nil, badRequest("column %q: %v", col, err)
	}
	return b, nil
}

// projection is the columns a key-API read names.
type projection struct {
	out     []string    // the Result's columns; nil: "key" and every column seen, sorted
	columns [][2]string // family, qualifier of each column to read
}

func parseProjection(cols []string) (projection, error) {
	if len(cols) == 0 {
		return projection{}, nil
	}
	p := projection{out: []string{"key"}}
	for _, col := range cols {
		if slices.Contains(p.out, col) {
			continue
		}
		fam, qual, err := splitColumn(col)
		if err != nil {
			return p, err
		}
		p.columns = append(p.columns, [2]string{fam, qual})
		p.out = append(p.out, col)
	}
	return p, nil
}

// rowMarker labels the one value-less cell that a projected read adds to
// tell a row that exists without the projected columns from no row.
const rowMarker = "tether-row"

var latestOnly = bigtable.LatestNFilter(1)

// filter returns the read filter: the projected columns' latest cells, and
// with a projection one marker cell per row.
func (p projection) filter() bigtable.Filter {
	if p.out == nil {
		return latestOnly
	}
	marker := bigtable.ChainFilters(bigtable.CellsPerRowLimitFilter(1), bigtable.StripValueFilter(), bigtable.LabelFilter(rowMarker))
	sel := selector(nil, p.columns)
	if sel == nil {
		return marker // only "key": does the row exist?
	}
	return bigtable.InterleaveFilters(bigtable.ChainFilters(sel, latestOnly), marker)
}

// selector returns a filter passing the cells of families and columns, nil
// for all cells.
func selector(families []string, columns [][2]string) bigtable.Filter {
	var fs []bigtable.Filter
	for _, f := range families {
		fs = append(fs, familyFilter(f))
	}
	for _, c := range columns {
		fs = append(fs, columnFilter(c[0], c[1]))
	}
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return bigtable.InterleaveFilters(fs...)
}

func familyFilter(family string) bigtable.Filter {
	return bigtable.FamilyFilter(regexpQuote(family))
}

// columnFilter passes exactly family:qualifier, with no regular expression
// (a qualifier is arbitrary bytes).
func columnFilter(family, qualifier string) bigtable.Filter {
	return bigtable.ColumnRangeFilter(family, qualifier, qualifier+"\x00")
}

// regexpQuote escapes the only RE2 metacharacter a family name can hold.
func regexpQuote(family string) string {
	return strings.ReplaceAll(family, ".", `\.`)
}

// wideRows assembles rows into the key API's wide form.
type wideRows struct {
	out      []string // the named columns; nil: "key" and every column seen
	maxBytes int
	size     int
	rows     []wideRow
	more     bool // a scan saw a row beyond its page
	err      error
}

type wideRow struct {
	key  string
	vals map[string][]byte // "family:qualifier" -> latest value
}

// add adds r; it returns false, setting w.err, once the rows exceed
// maxBytes. Its signature fits ReadRows.
func (w *wideRows) add(r bigtable.Row) bool {
	row := wideRow{key: r.Key(), vals: make(map[string][]byte)}
	w.size += len(row.key)
	for _, items := range r {
		for _, it := range items {
			if len(it.Labels) > 0 {
				continue // the row marker
			}
			if _, seen := row.vals[it.Column]; seen {
				continue // an older cell: the latest comes first
			}
			v := it.Value
			if v == nil {
				v = []byte{}
			}
			row.vals[it.Column] = v
			w.size += len(it.Column) + len(v)
		}
	}
	if w.maxBytes > 0 && w.size > w.maxBytes {
		w.err = tooLarge("result exceeds %d bytes", w.maxBytes)
		return false
	}
	w.rows = append(w.rows, row)
	return true
}

func (w *wideRows) columns() []string {
	if w.out != nil {
		return w.out
	}
	set := make(map[string]struct{})
	for _, r := range w.rows {
		for c := range r.vals {
			set[c] = struct{}{}
		}
	}
	return append([]string{"key"}, slices.Sorted(maps.Keys(set))...)
}

func (r wideRow) values(cols []string) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		if c == "key" {
			out[i] = []byte(r.key)
		} else if v, ok := r.vals[c]; ok {
			out[i] = v
		}
	}
	return out
}

// result returns the rows in the order added.
func (w *wideRows) result() *tether.Result {
	cols := w.columns()
	res := &tether.Result{Columns: cols, Rows: make([][]any, len(w.rows))}
	for i, r := range w.rows {
		res.Rows[i] = r.values(cols)
	}
	return res
}

// inOrder returns one row per key, nil where a key has no row.
func (w *wideRows) inOrder(keys []string) *tether.Result {
	cols := w.columns()
	byKey := make(map[string]wideRow, len(w.rows))
	for _, r := range w.rows {
		byKey[r.key] = r
	}
	res := &tether.Result{Columns: cols, Rows: make([][]any, len(keys))}
	for i, k := range keys {
		if r, ok := byKey[k]; ok {
			res.Rows[i] = r.values(cols)
		}
	}
	return res
}
