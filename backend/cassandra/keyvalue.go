package cassandra

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	tether "github.com/tether-php/tether"
)

// The key API on CQL tables. A key is the partition key columns' values, then
// the clustering columns', in the table's order; statements are built from the
// table's schema, read once from system_schema.columns and cached, and every
// name in a request is checked against it before it is quoted into CQL.
//
// With the Thrift-era model (docs/cassandra.md): a column family is a table
// (key, column1, value); a row is a partition, read with Scan{Prefix: [key]};
// a super column family is a table (key, super_column, column, value), and a
// super column is read with Scan{Prefix: [key, super_column]}.

const (
	multiGetConcurrency = 32     // reads one MultiGet runs at once
	defaultScanLimit    = 1000   // rows of a scan without a limit (docs/protocol.md)
	maxScanLimit        = 100000 // the most rows one scan may ask for
)

// errStale marks a name the cached schema does not know: the table is read
// again once before the request fails.
var errStale = errors.New("unknown column")

// table is the schema of one table, as the key API needs it.
type table struct {
	name     string // keyspace.table, for messages
	ref      string // "keyspace"."table", for CQL
	key      []*column
	nPart    int // the first nPart key columns are the partition key
	cols     map[string]*column
	all      []string // every column: key order, then the others by name (the order of SELECT *)
	selAll   string   // the quoted list of all
	keyList  string   // (k1, k2, ...), for messages
	partList string   // the partition key columns, the same way
}

// column is one column of a table.
type column struct {
	name   string
	quoted string
	json   bool // a collection, tuple, user-defined type or vector: written through fromJson(?)
}

// nativeTypes are the CQL types that travel as scalars (value.go); a column of
// any other type is read as JSON text.
var nativeTypes = map[string]bool{
	"ascii": true, "bigint": true, "blob": true, "boolean": true, "counter": true, "date": true,
	"decimal": true, "double": true, "duration": true, "float": true, "inet": true, "int": true,
	"smallint": true, "text": true, "time": true, "timestamp": true, "timeuuid": true, "tinyint": true,
	"uuid": true, "varchar": true, "varint": true,
}

// quote quotes a CQL identifier.
func quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// table returns the schema of name ("keyspace.table", or "table" in the DSN's
// keyspace), from the cache unless reload is set. A table that does not exist
// is an unknown_table error.
func (b *Backend) table(ctx context.Context, name string, reload bool) (*table, error) {
	ks, tn, ok := strings.Cut(name, ".")
	if !ok {
		ks, tn = b.cfg.keyspace, name
	}
	if tn == "" || strings.Contains(tn, ".") {
		return nil, badRequest("table %q: want keyspace.table or table", name)
	}
	if ks == "" {
		return nil, badRequest("table %q: no keyspace: name it keyspace.table, or put a keyspace in the DSN", name)
	}
	cacheKey := ks + "." + tn
	if !reload {
		if t, ok := b.tables.Load(cacheKey); ok {
			return t.(*table), nil
		}
	}
	t, err := b.loadTable(ctx, ks, tn)
	if err == nil && t == nil && (ks != strings.ToLower(ks) || tn != strings.ToLower(tn)) {
		// Unquoted CQL names are case-insensitive: Users is users.
		t, err = b.loadTable(ctx, strings.ToLower(ks), strings.ToLower(tn))
	}
	if err != nil {
		return nil, err
	}
	if t == nil {
		b.tables.Delete(cacheKey)
		return nil, tether.Errorf(tether.CodeUnknownTable, "cassandra: no table %s", cacheKey)
	}
	b.tables.Store(cacheKey, t)
	return t, nil
}

// loadTable reads a table's columns from system_schema; nil when it has none.
func (b *Backend) loadTable(ctx context.Context, ks, tn string) (*table, error) {
	const q = "SELECT column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?"
	res, err := b.page(ctx, q, []any{param{v: ks}, param{v: tn}}, 10000, nil, 0, true)
	if err != nil {
		return nil, fmt.Errorf("read schema of %s.%s: %w", ks, tn, err)
	}
	if len(res.Rows) == 0 {
		return nil, nil
	}
	t := &table{name: ks + "." + tn, ref: quote(ks) + "." + quote(tn), cols: map[string]*column{}}
	var part, clust []*column
	var partPos, clustPos []int64
	var others []string
	for _, r := range res.Rows {
		name, _ := r[0].(string)
		kind, _ := r[1].(string)
		pos, _ := r[2].(int64)
		typ, _ := r[3].(string)
		c := &column{name: name, quoted: quote(name), json: !nativeTypes[typ]}
		t.cols[name] = c
		switch kind {
		case "partition_key":
			part, partPos = append(part, c), append(partPos, pos)
		case "clustering":
			clust, clustPos = append(clust, c), append(clustPos, pos)
		default:
			others = append(others, name)
		}
	}
	byPos := func(cs []*column, pos []int64) []*column {
		out := make([]*column, len(cs))
		for i, c := range cs {
			if p := int(pos[i]); p >= 0 && p < len(out) {
				out[p] = c
			}
		}
		return out
	}
	t.key = append(byPos(part, partPos), byPos(clust, clustPos)...)
	t.nPart = len(part)
	for _, c := range t.key {
		if c == nil {
			return nil, fmt.Errorf("read schema of %s: key positions are not contiguous", t.name)
		}
		t.all = append(t.all, c.name)
	}
	sort.Strings(others)
	t.all = append(t.all, others...)
	quoted := make([]string, len(t.all))
	for i, n := range t.all {
		quoted[i] = t.cols[n].quoted
	}
	t.selAll = strings.Join(quoted, ", ")
	names := make([]string, len(t.key))
	for i, c := range t.key {
		names[i] = c.name
	}
	t.keyList = "(" + strings.Join(names, ", ") + ")"
	t.partList = "(" + strings.Join(names[:t.nPart], ", ") + ")"
	return t, nil
}

// column finds a column by its exact name, else by its lower-case name.
func (t *table) column(name string) *column {
	if c, ok := t.cols[name]; ok {
		return c
	}
	return t.cols[strings.ToLower(name)]
}

// unknownColumn is the error of a name the table does not have.
func (t *table) unknownColumn(name string) error {
	return &tether.Error{Code: tether.CodeBadRequest, Err: errStale,
		Message: fmt.Sprintf("cassandra: table %s has no column %q", t.name, name)}
}

// selection returns the quoted column list and the column names of a read.
func (t *table) selection(cols []string) (string, []string, error) {
	if len(cols) == 0 {
		return t.selAll, t.all, nil
	}
	quoted := make([]string, len(cols))
	names := make([]string, len(cols))
	for i, n := range cols {
		c := t.column(n)
		if c == nil {
			return "", nil, t.unknownColumn(n)
		}
		quoted[i], names[i] = c.quoted, c.name
	}
	return strings.Join(quoted, ", "), names, nil
}

// checkKey checks that key holds the whole primary key, without nulls.
func (t *table) checkKey(key []any) error {
	if len(key) != len(t.key) {
		return badRequest("table %s has a primary key of %d columns %s; got %d values", t.name, len(t.key), t.keyList, len(key))
	}
	return t.checkValues(key)
}

func (t *table) checkValues(vals []any) error {
	for i, v := range vals {
		if v == nil {
			return badRequest("table %s: key column %s is null", t.name, t.key[i].name)
		}
	}
	return nil
}

// where returns the equality relations on the first n key columns.
func (t *table) where(n int) string {
	rel := make([]string, n)
	for i := range rel {
		rel[i] = t.key[i].quoted + " = ?"
	}
	return strings.Join(rel, " AND ")
}

// keyParams binds values to the key columns from the i-th on.
func (b *Backend) keyParams(t *table, from int, vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = param{v: v, name: t.key[from+i].name, maxBytes: b.cfg.maxValueBytes}
	}
	return out
}

// build resolves the table and runs fn on it; when fn meets a column the
// cached schema does not know, the schema is read again and fn runs once more.
func (b *Backend) build(ctx context.Context, name string, fn func(*table) error) (*table, error) {
	t, err := b.table(ctx, name, false)
	if err != nil {
		return nil, err
	}
	if err = fn(t); errors.Is(err, errStale) {
		if t, err = b.table(ctx, name, true); err != nil {
			return nil, err
		}
		err = fn(t)
	}
	return t, err
}

// forget drops a table from the cache when Cassandra says a statement built
// from it is invalid (the table was dropped or altered), so the next request
// reads its schema again.
func (b *Backend) forget(t *table, err error) error {
	var te *tether.Error
	if errors.As(err, &te) && te.BackendCode == "8704" {
		b.tables.Range(func(k, v any) bool {
			if v == t {
				b.tables.Delete(k)
			}
			return true
		})
	}
	return err
}

// Get implements tether.KeyValue: SELECT columns FROM t WHERE every key
// column = ?. The Result has no rows when the key has none.
func (b *Backend) Get(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	var stmt string
	var names []string
	t, err := b.build(ctx, k.Table, func(t *table) error {
		if err := t.checkKey(k.Key); err != nil {
			return err
		}
		sel, n, err := t.selection(k.Columns)
		stmt, names = "SELECT "+sel+" FROM "+t.ref+" WHERE "+t.where(len(t.key)), n
		return err
	})
	if err != nil {
		return nil, err
	}
	res, err := b.page(ctx, stmt, b.keyParams(t, 0, k.Key), 2, nil, k.MaxBytes, true)
	if err != nil {
		return nil, b.forget(t, err)
	}
	res.Columns, res.Cursor = names, nil
	return res, nil
}

// MultiGet implements tether.KeyValue: one Get per key, up to 32 at once,
// each routed to a replica of its own partition. The Result has one row per
// key in request order, nil where a key has no row. Any failed read fails the
// whole call.
func (b *Backend) MultiGet(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	var stmt string
	var names []string
	t, err := b.build(ctx, k.Table, func(t *table) error {
		for _, key := range k.Keys {
			if err := t.checkKey(key); err != nil {
				return err
			}
		}
		sel, n, err := t.selection(k.Columns)
		stmt, names = "SELECT "+sel+" FROM "+t.ref+" WHERE "+t.where(len(t.key)), n
		return err
	})
	if err != nil {
		return nil, err
	}
	rows := make([][]any, len(k.Keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(multiGetConcurrency)
	for i, key := range k.Keys {
		g.Go(func() error {
			res, err := b.page(gctx, stmt, b.keyParams(t, 0, key), 2, nil, k.MaxBytes, true)
			if err != nil {
				return err
			}
			if len(res.Rows) > 0 {
				rows[i] = res.Rows[0]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, b.forget(t, err)
	}
	if k.MaxBytes > 0 {
		size := 0
		for i, r := range rows {
			for _, v := range r {
				size += tether.ValueSize(v)
			}
			if size > k.MaxBytes {
				return nil, &tether.Error{Code: tether.CodeTooLarge,
					Message: fmt.Sprintf("cassandra: result is over max_result_bytes (%d) after %d rows", k.MaxBytes, i)}
			}
		}
	}
	return &tether.Result{Columns: names, Rows: rows}, nil
}

// Scan implements tether.KeyValue within one partition, in clustering order:
// the rows whose key starts with k.Prefix (which must hold the whole partition
// key, and may go on with leading clustering values), or the rows of one
// partition from k.Start (inclusive) to k.End (exclusive), each of which must
// begin with that partition's key; a bound with no clustering values leaves
// its side open. At most k.Limit rows (0: 1000; at most 100,000) are
// returned; the Cursor resumes after them. A scan across partitions (no
// partition key, or a range of partition keys) is an unsupported error:
// Cassandra keeps partitions in token order, not key order.
func (b *Backend) Scan(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := checkCursor(k.Cursor); err != nil {
		return nil, err
	}
	var stmt string
	var names []string
	var vals []any
	t, err := b.build(ctx, k.Table, func(t *table) error {
		sel, n, err := t.selection(k.Columns)
		if err != nil {
			return err
		}
		names = n
		where, v, err := b.scanWhere(t, k)
		stmt, vals = "SELECT "+sel+" FROM "+t.ref+" WHERE "+where, v
		return err
	})
	if err != nil {
		return nil, err
	}
	limit := k.Limit
	if limit <= 0 {
		limit = defaultScanLimit
	}
	if limit > maxScanLimit {
		return nil, badRequest("scan: limit %d is over %d", limit, maxScanLimit)
	}
	res, err := b.page(ctx, stmt, vals, limit, k.Cursor, k.MaxBytes, true)
	if err != nil {
		return nil, b.forget(t, err)
	}
	res.Columns = names
	return res, nil
}

// scanWhere builds the relations and parameters of a scan.
func (b *Backend) scanWhere(t *table, k tether.KeyRequest) (string, []any, error) {
	p := t.nPart
	switch {
	case len(k.Prefix) > 0:
		if k.Start != nil || k.End != nil {
			return "", nil, badRequest("scan: give a prefix or a start and end, not both")
		}
		if len(k.Prefix) < p {
			return "", nil, tether.Errorf(tether.CodeUnsupported,
				"cassandra: scan of %s: the prefix must hold the whole partition key %s; a scan across partitions is not supported", t.name, t.partList)
		}
		if len(k.Prefix) > len(t.key) {
			return "", nil, badRequest("scan of %s: a prefix of %d values is longer than the primary key %s", t.name, len(k.Prefix), t.keyList)
		}
		if err := t.checkValues(k.Prefix); err != nil {
			return "", nil, err
		}
		return t.where(len(k.Prefix)), b.keyParams(t, 0, k.Prefix), nil
	case k.Start != nil || k.End != nil:
		for _, bound := range [][]any{k.Start, k.End} {
			if bound == nil {
				continue
			}
			if len(bound) < p {
				return "", nil, tether.Errorf(tether.CodeUnsupported,
					"cassandra: scan of %s: start and end must begin with the whole partition key %s; a scan across partitions is not supported", t.name, t.partList)
			}
			if len(bound) > len(t.key) {
				return "", nil, badRequest("scan of %s: a bound of %d values is longer than the primary key %s", t.name, len(bound), t.keyList)
			}
			if err := t.checkValues(bound); err != nil {
				return "", nil, err
			}
		}
		part := k.Start
		if part == nil {
			part = k.End
		}
		if k.Start != nil && k.End != nil && !reflect.DeepEqual(k.Start[:p], k.End[:p]) {
			return "", nil, tether.Errorf(tether.CodeUnsupported,
				"cassandra: scan of %s: start and end must be in the same partition; a scan across partitions is not supported", t.name)
		}
		where, vals := t.where(p), b.keyParams(t, 0, part[:p])
		for _, r := range []struct {
			bound []any
			op    string
		}{{k.Start, ">="}, {k.End, "<"}} {
			if len(r.bound) <= p {
				continue
			}
			cols := make([]string, len(r.bound)-p)
			marks := make([]string, len(cols))
			for i := range cols {
				cols[i], marks[i] = t.key[p+i].quoted, "?"
			}
			where += fmt.Sprintf(" AND (%s) %s (%s)", strings.Join(cols, ", "), r.op, strings.Join(marks, ", "))
			vals = append(vals, b.keyParams(t, p, r.bound[p:])...)
		}
		return where, vals, nil
	}
	return "", nil, tether.Errorf(tether.CodeUnsupported,
		"cassandra: scan of %s needs a prefix holding the whole partition key %s; a scan across partitions is not supported", t.name, t.partList)
}

// Put implements tether.KeyValue: INSERT INTO t (columns) VALUES (...), an
// upsert of the columns k.Row names (a nil value deletes that cell). A column
// of a collection, tuple, user-defined or vector type takes JSON text, as
// reads return it. Result.Affected is 1.
func (b *Backend) Put(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if len(k.Row) == 0 {
		return nil, badRequest("put: the row has no columns")
	}
	names := make([]string, 0, len(k.Row))
	for n := range k.Row {
		names = append(names, n)
	}
	sort.Strings(names) // one statement text, so one prepared statement, per set of columns
	var stmt string
	var vals []any
	t, err := b.build(ctx, k.Table, func(t *table) error {
		cols := make([]string, len(names))
		marks := make([]string, len(names))
		vals = make([]any, len(names))
		seen := map[*column]bool{}
		for i, n := range names {
			c := t.column(n)
			if c == nil {
				return t.unknownColumn(n)
			}
			if seen[c] {
				return badRequest("put: column %s given twice", c.name)
			}
			seen[c] = true
			v := k.Row[n]
			cols[i], marks[i] = c.quoted, "?"
			if c.json && v != nil {
				marks[i] = "fromJson(?)"
			}
			vals[i] = param{v: v, name: c.name, maxBytes: b.cfg.maxValueBytes}
		}
		for _, c := range t.key {
			if !seen[c] {
				return badRequest("put: table %s: the row has no value for key column %s (the key is %s)", t.name, c.name, t.keyList)
			}
		}
		for i, n := range names {
			if c := t.column(n); k.Row[n] == nil && isKey(t, c) {
				return badRequest("put: table %s: key column %s is null", t.name, names[i])
			}
		}
		stmt = "INSERT INTO " + t.ref + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := b.page(ctx, stmt, vals, 0, nil, 0, false); err != nil {
		return nil, b.forget(t, err)
	}
	return &tether.Result{Affected: 1}, nil
}

func isKey(t *table, c *column) bool {
	for _, kc := range t.key {
		if kc == c {
			return true
		}
	}
	return false
}

// Delete implements tether.KeyValue: DELETE FROM t WHERE every key column = ?.
// Cassandra does not say whether the row existed: Result.Affected is 1.
func (b *Backend) Delete(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	var stmt string
	t, err := b.build(ctx, k.Table, func(t *table) error {
		stmt = "DELETE FROM " + t.ref + " WHERE " + t.where(len(t.key))
		return t.checkKey(k.Key)
	})
	if err != nil {
		return nil, err
	}
	if _, err := b.page(ctx, stmt, b.keyParams(t, 0, k.Key), 0, nil, 0, false); err != nil {
		return nil, b.forget(t, err)
	}
	return &tether.Result{Affected: 1}, nil
}
