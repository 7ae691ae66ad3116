package sqldb

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// The key API on SQL: statements built from a table's primary key, which is
// introspected once and cached. Identifiers in a request are only ever used
// after they were found among the table's real columns, and then quoted;
// values are always bound.

const (
	defaultScanLimit = 1000
	maxScanLimit     = 100000
	maxMultiGetChunk = 128
)

// table is what the key API knows of one table.
type table struct {
	quoted string   // the quoted table name
	cols   []string // every column, in table order
	key    []string // the primary key columns, in key order
	has    map[string]bool
}

// KeyValue is the key API on a SQL backend (tether.KeyValue): statements
// built from a table's primary key, run through the backend's Querier. Every
// SQL backend embeds one.
type KeyValue struct {
	q    tether.Querier
	name string // the backend type, for messages
	ks   KeySQL

	mu sync.Mutex
	m  map[string]*table // table metadata, by name as requested
}

// NewKeyValue returns the key API of a backend named by its type (name),
// speaking its dialect's SQL (ks), running statements on q.
func NewKeyValue(name string, ks KeySQL, q tether.Querier) *KeyValue {
	return &KeyValue{q: q, name: name, ks: ks}
}

// table returns the metadata of name, introspecting it on first use.
func (kv *KeyValue) table(ctx context.Context, name string) (*table, error) {
	kv.mu.Lock()
	t := kv.m[name]
	kv.mu.Unlock()
	if t != nil {
		return t, nil
	}
	if !isTableName(name) {
		return nil, tether.Errorf(tether.CodeBadRequest, "%q is not a table name: letters, digits, '_' and '$', optionally qualified as schema.table", name)
	}
	ks := kv.ks
	q, params := ks.Columns(name)
	res, err := kv.q.Query(ctx, tether.Statement{SQL: q, Params: params})
	if err != nil {
		return nil, fmt.Errorf("introspect table %s: %w", name, err)
	}
	if len(res.Rows) == 0 {
		return nil, tether.Errorf(tether.CodeUnknownTable, "%s: no table %q", kv.name, name)
	}
	t = &table{has: map[string]bool{}}
	positions := map[int]string{}
	for _, row := range res.Rows {
		col := fmt.Sprint(row[0])
		t.cols = append(t.cols, col)
		t.has[col] = true
		if pos, _ := strconv.Atoi(fmt.Sprint(row[1])); pos > 0 {
			positions[pos] = col
		}
	}
	for i := 1; i <= len(positions); i++ {
		col, ok := positions[i]
		if !ok {
			return nil, tether.Errorf(tether.CodeInternal, "%s: primary key of %q has a gap at position %d", kv.name, name, i)
		}
		t.key = append(t.key, col)
	}
	if len(t.key) == 0 {
		return nil, tether.Errorf(tether.CodeBadRequest, "%s: table %q has no primary key, which the key API needs", kv.name, name)
	}
	// The name to write in SQL is the catalog's, when the dialect gives it:
	// a name looked up case-insensitively (PostgreSQL folds an unquoted one,
	// MySQL's information_schema compares without case) must be written as
	// the table is really named.
	if len(res.Rows[0]) > 2 {
		if real, ok := res.Rows[0][2].(string); ok && real != "" {
			t.quoted = real
		}
	}
	if t.quoted == "" {
		parts := strings.Split(name, ".")
		for i, p := range parts {
			parts[i] = ks.Quote(p)
		}
		t.quoted = strings.Join(parts, ".")
	}
	kv.mu.Lock()
	if kv.m == nil {
		kv.m = map[string]*table{}
	}
	kv.m[name] = t
	kv.mu.Unlock()
	return t, nil
}

// isTableName reports whether name is a plain identifier, optionally
// qualified by one schema or database name.
func isTableName(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 128 || p[0] >= '0' && p[0] <= '9' {
			return false
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
				return false
			}
		}
	}
	return true
}

// forget drops a table's cached metadata after an error that may mean its
// schema changed, so that the next call introspects it again.
func (kv *KeyValue) forget(name string, err error) error {
	if err != nil {
		if e := tether.AsError(err); e.Code == tether.CodeBackendError {
			kv.mu.Lock()
			delete(kv.m, name)
			kv.mu.Unlock()
		}
	}
	return err
}

// projection resolves the columns to return: the requested ones (checked), or
// all. It also returns the columns to select, which add any key column the
// caller needs that was not requested.
func (t *table) projection(name string, requested []string, needKey bool) (out, sel []string, err error) {
	if len(requested) == 0 {
		return t.cols, t.cols, nil
	}
	for _, c := range requested {
		if !t.has[c] {
			return nil, nil, tether.Errorf(tether.CodeBadRequest, "table %q has no column %q", name, c)
		}
	}
	sel = requested
	if needKey {
		sel = append([]string(nil), requested...)
		for _, k := range t.key {
			if !contains(requested, k) {
				sel = append(sel, k)
			}
		}
	}
	return requested, sel, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// sqlBuilder accumulates SQL text and its parameters.
type sqlBuilder struct {
	ks     KeySQL
	sb     strings.Builder
	params []any
}

func (b *sqlBuilder) text(s ...string) *sqlBuilder {
	for _, x := range s {
		b.sb.WriteString(x)
	}
	return b
}

func (b *sqlBuilder) param(v any) *sqlBuilder {
	b.params = append(b.params, v)
	b.sb.WriteString(b.ks.Placeholder(len(b.params)))
	return b
}

func (b *sqlBuilder) columns(cols []string) *sqlBuilder {
	for i, c := range cols {
		if i > 0 {
			b.sb.WriteString(", ")
		}
		b.sb.WriteString(b.ks.Quote(c))
	}
	return b
}

// keyEquals writes "k1 = ? AND k2 = ?" for the leading len(vals) key columns.
func (b *sqlBuilder) keyEquals(key []string, vals []any) *sqlBuilder {
	for i, v := range vals {
		if i > 0 {
			b.sb.WriteString(" AND ")
		}
		b.text(b.ks.Quote(key[i]), " = ").param(v)
	}
	return b
}

// tuple writes "(k1, k2) op (?, ?)" over the leading len(vals) key columns.
func (b *sqlBuilder) tuple(key []string, op string, vals []any) *sqlBuilder {
	b.text("(").columns(key[:len(vals)]).text(") ", op, " (")
	for i, v := range vals {
		if i > 0 {
			b.sb.WriteString(", ")
		}
		b.param(v)
	}
	return b.text(")")
}

func (kv *KeyValue) builder() *sqlBuilder { return &sqlBuilder{ks: kv.ks} }

func checkKey(name string, t *table, key []any, what string) error {
	if len(key) != len(t.key) {
		return tether.Errorf(tether.CodeBadRequest, "%s of table %q is (%s): %d values, got %d",
			what, name, strings.Join(t.key, ", "), len(t.key), len(key))
	}
	return nil
}

// Get implements tether.KeyValue.
func (kv *KeyValue) Get(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	t, err := kv.table(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	if err := checkKey(k.Table, t, k.Key, "the key"); err != nil {
		return nil, err
	}
	out, _, err := t.projection(k.Table, k.Columns, false)
	if err != nil {
		return nil, err
	}
	b := kv.builder().text("SELECT ").columns(out).text(" FROM ", t.quoted, " WHERE ").keyEquals(t.key, k.Key)
	res, err := kv.q.Query(ctx, tether.Statement{SQL: b.sb.String(), Params: b.params, MaxBytes: k.MaxBytes})
	return res, kv.forget(k.Table, err)
}

// MultiGet implements tether.KeyValue: keys are read in chunks, each one
// statement; chunk sizes are rounded up to a few fixed sizes (by repeating the
// last key) so that the statement cache holds a handful of statements, not
// one per key count.
func (kv *KeyValue) MultiGet(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	t, err := kv.table(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	for i, key := range k.Keys {
		if len(key) != len(t.key) { // the message is formatted only for a wrong key
			return nil, checkKey(k.Table, t, key, fmt.Sprintf("key %d", i+1))
		}
	}
	out, sel, err := t.projection(k.Table, k.Columns, true)
	if err != nil {
		return nil, err
	}
	keyAt := make([]int, len(t.key)) // where each key column is in sel
	for i, kc := range t.key {
		for j, c := range sel {
			if c == kc {
				keyAt[i] = j
			}
		}
	}
	found := map[string][]any{}
	for start := 0; start < len(k.Keys); start += maxMultiGetChunk {
		chunk := k.Keys[start:min(start+maxMultiGetChunk, len(k.Keys))]
		padded := padKeys(chunk)
		b := kv.builder().text("SELECT ").columns(sel).text(" FROM ", t.quoted, " WHERE ")
		if len(t.key) == 1 {
			b.text(b.ks.Quote(t.key[0]), " IN (")
			for i, key := range padded {
				if i > 0 {
					b.text(", ")
				}
				b.param(key[0])
			}
			b.text(")")
		} else {
			for i, key := range padded {
				if i > 0 {
					b.text(" OR ")
				}
				b.text("(").keyEquals(t.key, key).text(")")
			}
		}
		res, err := kv.q.Query(ctx, tether.Statement{SQL: b.sb.String(), Params: b.params, MaxBytes: k.MaxBytes})
		if err != nil {
			return nil, kv.forget(k.Table, err)
		}
		for _, row := range res.Rows {
			kv := make([]any, len(keyAt))
			for i, j := range keyAt {
				kv[i] = row[j]
			}
			found[keyString(kv)] = row[:len(out)]
		}
	}
	res := &tether.Result{Columns: out, Rows: make([][]any, len(k.Keys))}
	for i, key := range k.Keys {
		res.Rows[i] = found[keyString(key)] // nil: not found
	}
	return res, nil
}

// padKeys rounds a chunk of keys up to a power of two (at most the chunk
// limit) by repeating the last key.
func padKeys(keys [][]any) [][]any {
	size := 1
	for size < len(keys) {
		size *= 2
	}
	size = min(size, maxMultiGetChunk)
	if len(keys) >= size {
		return keys
	}
	// A copy, allocated once (the caller's keys are not appended to).
	padded := make([][]any, size)
	copy(padded, keys)
	for i := len(keys); i < size; i++ {
		padded[i] = keys[len(keys)-1]
	}
	return padded
}

// keyString is a key's identity for matching rows to requested keys: values
// compare by their text, so a key sent as "17" finds the row whose key is 17.
func keyString(key []any) string {
	var sb strings.Builder
	for _, v := range key {
		switch x := v.(type) {
		case string:
			sb.WriteString(x)
		case []byte:
			sb.Write(x)
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1e15 {
				sb.WriteString(strconv.FormatInt(int64(x), 10))
			} else {
				sb.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			}
		default:
			fmt.Fprint(&sb, x)
		}
		sb.WriteByte(0)
	}
	return sb.String()
}

// Scan implements tether.KeyValue with keyset pagination: rows in key order,
// the cursor being the last key returned.
func (kv *KeyValue) Scan(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	t, err := kv.table(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	for what, vals := range map[string][]any{"prefix": k.Prefix, "start": k.Start, "end": k.End} {
		if len(vals) > len(t.key) {
			return nil, tether.Errorf(tether.CodeBadRequest, "%s has %d values; the key of %q has %d", what, len(vals), k.Table, len(t.key))
		}
	}
	if len(k.Prefix) > 0 && (len(k.Start) > 0 || len(k.End) > 0) {
		return nil, tether.Errorf(tether.CodeBadRequest, "scan takes a prefix or a start/end range, not both")
	}
	limit := k.Limit
	if limit <= 0 {
		limit = defaultScanLimit
	}
	if limit > maxScanLimit {
		return nil, tether.Errorf(tether.CodeBadRequest, "limit %d is over %d", limit, maxScanLimit)
	}
	out, sel, err := t.projection(k.Table, k.Columns, true)
	if err != nil {
		return nil, err
	}
	b := kv.builder().text("SELECT ").columns(sel).text(" FROM ", t.quoted, " WHERE 1 = 1")
	if len(k.Prefix) > 0 {
		b.text(" AND ").keyEquals(t.key, k.Prefix)
	}
	if len(k.Start) > 0 {
		b.text(" AND ").tuple(t.key, ">=", k.Start)
	}
	if len(k.End) > 0 {
		b.text(" AND ").tuple(t.key, "<", k.End)
	}
	if k.Cursor != nil {
		after, err := wire.ReadKey(k.Cursor)
		if err != nil || len(after) != len(t.key) {
			return nil, tether.Errorf(tether.CodeBadRequest, "cursor is not one of this table's")
		}
		b.text(" AND ").tuple(t.key, ">", after)
	}
	b.text(" ORDER BY ").columns(t.key).text(" LIMIT ", strconv.Itoa(limit+1))
	res, err := kv.q.Query(ctx, tether.Statement{SQL: b.sb.String(), Params: b.params, MaxBytes: k.MaxBytes})
	if err != nil {
		return nil, kv.forget(k.Table, err)
	}
	if len(res.Rows) > limit {
		res.Rows = res.Rows[:limit]
		last := res.Rows[limit-1]
		key := make([]any, len(t.key))
		for i, kc := range t.key {
			for j, c := range sel {
				if c == kc {
					key[i] = last[j]
				}
			}
		}
		res.Cursor = wire.AppendKey(nil, key)
	}
	if len(sel) != len(out) {
		for i, row := range res.Rows {
			res.Rows[i] = row[:len(out)]
		}
	}
	res.Columns = out
	return res, nil
}

// Put implements tether.KeyValue with the dialect's upsert.
func (kv *KeyValue) Put(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	t, err := kv.table(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	cols := make([]string, 0, len(k.Row))
	for _, c := range t.cols { // table order: one statement text per column set
		if _, ok := k.Row[c]; ok {
			cols = append(cols, c)
		}
	}
	if len(cols) != len(k.Row) {
		for c := range k.Row {
			if !t.has[c] {
				return nil, tether.Errorf(tether.CodeBadRequest, "table %q has no column %q", k.Table, c)
			}
		}
	}
	var others []string
	for _, kc := range t.key {
		if _, ok := k.Row[kc]; !ok {
			return nil, tether.Errorf(tether.CodeBadRequest, "put into %q needs every key column; %q is missing", k.Table, kc)
		}
	}
	for _, c := range cols {
		if !contains(t.key, c) {
			others = append(others, c)
		}
	}
	b := kv.builder().text("INSERT INTO ", t.quoted, " (").columns(cols).text(") VALUES (")
	for i, c := range cols {
		if i > 0 {
			b.text(", ")
		}
		b.param(k.Row[c])
	}
	b.text(")", b.ks.Upsert(t.key, others))
	if _, err := kv.q.Exec(ctx, tether.Statement{SQL: b.sb.String(), Params: b.params}); err != nil {
		return nil, kv.forget(k.Table, err)
	}
	return &tether.Result{Affected: 1}, nil
}

// Delete implements tether.KeyValue.
func (kv *KeyValue) Delete(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	t, err := kv.table(ctx, k.Table)
	if err != nil {
		return nil, err
	}
	if err := checkKey(k.Table, t, k.Key, "the key"); err != nil {
		return nil, err
	}
	b := kv.builder().text("DELETE FROM ", t.quoted, " WHERE ").keyEquals(t.key, k.Key)
	res, err := kv.q.Exec(ctx, tether.Statement{SQL: b.sb.String(), Params: b.params})
	if err != nil {
		return nil, kv.forget(k.Table, err)
	}
	return &tether.Result{Affected: res.Affected}, nil
}

// OnConflict returns the "ON CONFLICT (key) DO UPDATE SET c = excluded.c"
// clause of SQLite and PostgreSQL.
func OnConflict(quote func(string) string, keyCols, otherCols []string, excluded string) string {
	var sb strings.Builder
	sb.WriteString(" ON CONFLICT (")
	for i, c := range keyCols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(c))
	}
	if len(otherCols) == 0 {
		sb.WriteString(") DO NOTHING")
		return sb.String()
	}
	sb.WriteString(") DO UPDATE SET ")
	for i, c := range otherCols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(c) + " = " + excluded + "." + quote(c))
	}
	return sb.String()
}

var _ tether.KeyValue = (*DB)(nil)
