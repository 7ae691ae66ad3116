package backendtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	tether "github.com/tether-php/tether"
)

// KVSuite describes a backend for the key-API suite, which every backend runs:
// the same requests, and the same answers, on SQLite, MariaDB, PostgreSQL,
// Cassandra and Bigtable.
type KVSuite struct {
	// Backend is an opened backend.
	Backend tether.KeyValue
	// CreateTable creates a table named name whose primary key is one text
	// column named Key, with text columns A and B.
	CreateTable func(t *testing.T, name string)
	Key, A, B   string
	// CreateCompositeTable, when set, creates a table whose key is the text
	// columns P then C (Cassandra: partition key P, clustering column C), with
	// a text column A.
	CreateCompositeTable func(t *testing.T, name string)
	P, C                 string
	// Schemaless is set for Bigtable: a projected read also returns the key
	// column first, and a column the table lacks reads as nil.
	Schemaless bool
	// PartitionScan is set where partitions are not kept in key order
	// (Cassandra: token order): a scan must hold the whole partition key and
	// reads one partition in clustering order, and a scan across partitions is
	// unsupported. The Scan test then runs within one partition of the
	// composite table.
	PartitionScan bool
}

// text is a value as text: backends return strings or, for Bigtable, bytes.
func text(v any) string {
	if v == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s", v)
}

// col returns the value of column name in row.
func col(t *testing.T, res *tether.Result, row []any, name string) string {
	t.Helper()
	for i, c := range res.Columns {
		if c == name {
			return text(row[i])
		}
	}
	t.Fatalf("no column %q in %v", name, res.Columns)
	return ""
}

// RunKeyValue runs the key-API suite.
func RunKeyValue(t *testing.T, s *KVSuite) {
	b := s.Backend
	c := func(t *testing.T) context.Context { return ctx(t) }
	kv := func(k, a, bv string) map[string]any {
		row := map[string]any{s.Key: k, s.A: a}
		if bv != "" {
			row[s.B] = bv
		}
		return row
	}

	t.Run("PutGetDelete", func(t *testing.T) {
		tbl := table("kv")
		s.CreateTable(t, tbl)
		if _, err := b.Put(c(t), tether.KeyRequest{Table: tbl, Row: kv("k1", "alpha", "beta")}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"k1"}})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("get: %v %v", res, err)
		}
		if col(t, res, res.Rows[0], s.A) != "alpha" || col(t, res, res.Rows[0], s.B) != "beta" {
			t.Fatalf("get: %v %v", res.Columns, res.Rows)
		}
		res, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"k1"}, Columns: []string{s.A}})
		wantCols := []string{s.A}
		if s.Schemaless {
			wantCols = []string{s.Key, s.A}
		}
		if err != nil || !slices.Equal(res.Columns, wantCols) || len(res.Rows) != 1 || col(t, res, res.Rows[0], s.A) != "alpha" {
			t.Fatalf("get with columns: %v %v %v", res.Columns, res.Rows, err)
		}
		// An upsert replaces the columns it names and keeps the others.
		if _, err := b.Put(c(t), tether.KeyRequest{Table: tbl, Row: kv("k1", "alpha2", "")}); err != nil {
			t.Fatal(err)
		}
		res, _ = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"k1"}})
		if col(t, res, res.Rows[0], s.A) != "alpha2" || col(t, res, res.Rows[0], s.B) != "beta" {
			t.Fatalf("after upsert: %v", res.Rows)
		}
		res, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"nope"}})
		if err != nil || len(res.Rows) != 0 {
			t.Fatalf("missing key: %v %v", res, err)
		}
		if _, err := b.Delete(c(t), tether.KeyRequest{Table: tbl, Key: []any{"k1"}}); err != nil {
			t.Fatal(err)
		}
		res, _ = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"k1"}})
		if len(res.Rows) != 0 {
			t.Fatalf("after delete: %v", res.Rows)
		}
		if _, err := b.Delete(c(t), tether.KeyRequest{Table: tbl, Key: []any{"never-there"}}); err != nil {
			t.Fatalf("delete of a missing key: %v", err)
		}
	})

	t.Run("MultiGet", func(t *testing.T) {
		tbl := table("kvm")
		s.CreateTable(t, tbl)
		for _, k := range []string{"a", "b", "c"} {
			if _, err := b.Put(c(t), tether.KeyRequest{Table: tbl, Row: kv(k, "v-"+k, "")}); err != nil {
				t.Fatal(err)
			}
		}
		keys := [][]any{{"c"}, {"missing"}, {"a"}, {"c"}}
		res, err := b.MultiGet(c(t), tether.KeyRequest{Table: tbl, Keys: keys, Columns: []string{s.A}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != 4 || res.Rows[1] != nil {
			t.Fatalf("multi_get: %v", res.Rows)
		}
		for i, want := range []string{"v-c", "", "v-a", "v-c"} {
			if want != "" && col(t, res, res.Rows[i], s.A) != want {
				t.Fatalf("row %d: %v, want %s", i, res.Rows[i], want)
			}
		}
		res, err = b.MultiGet(c(t), tether.KeyRequest{Table: tbl, Keys: [][]any{}})
		if err != nil || len(res.Rows) != 0 {
			t.Fatalf("no keys: %v %v", res, err)
		}
	})

	t.Run("Scan", func(t *testing.T) {
		tbl := table("kvs")
		// The rows k00..k24: keys of the table, or clustering keys in partition "p".
		keyCol, key, row := s.Key, func(k string) []any { return []any{k} }, func(k string) map[string]any { return kv(k, "v"+k, "") }
		var prefix []any
		if s.PartitionScan {
			if s.CreateCompositeTable == nil {
				t.Fatal("PartitionScan needs CreateCompositeTable")
			}
			s.CreateCompositeTable(t, tbl)
			_, err := b.Scan(c(t), tether.KeyRequest{Table: tbl, Limit: 10})
			if code(err) != tether.CodeUnsupported {
				t.Fatalf("a scan across partitions: %v (%s)", err, code(err))
			}
			keyCol, prefix = s.C, []any{"p"}
			key = func(k string) []any { return []any{"p", k} }
			row = func(k string) map[string]any { return map[string]any{s.P: "p", s.C: k, s.A: "v" + k} }
		} else {
			s.CreateTable(t, tbl)
		}
		for i := 0; i < 25; i++ {
			k := fmt.Sprintf("k%02d", i)
			if _, err := b.Put(c(t), tether.KeyRequest{Table: tbl, Row: row(k)}); err != nil {
				t.Fatal(err)
			}
		}
		var seen []string
		var cursor []byte
		for page := 0; ; page++ {
			res, err := b.Scan(c(t), tether.KeyRequest{Table: tbl, Prefix: prefix, Limit: 10, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) > 10 {
				t.Fatalf("page %d has %d rows", page, len(res.Rows))
			}
			for _, r := range res.Rows {
				seen = append(seen, col(t, res, r, keyCol))
			}
			if res.Cursor == nil {
				break
			}
			if page > 5 {
				t.Fatal("the cursor never ends")
			}
			cursor = res.Cursor
		}
		if len(seen) != 25 {
			t.Fatalf("scanned %d rows: %v", len(seen), seen)
		}
		for i, k := range seen {
			if k != fmt.Sprintf("k%02d", i) {
				t.Fatalf("row %d is %s: not in key order: %v", i, k, seen)
			}
		}
		res, err := b.Scan(c(t), tether.KeyRequest{Table: tbl, Start: key("k05"), End: key("k10")})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != 5 || col(t, res, res.Rows[0], keyCol) != "k05" || col(t, res, res.Rows[4], keyCol) != "k09" {
			t.Fatalf("range scan: %v", res.Rows)
		}
	})

	if s.CreateCompositeTable != nil {
		t.Run("CompositeKey", func(t *testing.T) {
			tbl := table("kvc")
			s.CreateCompositeTable(t, tbl)
			for _, p := range []string{"a", "b"} {
				for i := 5; i >= 1; i-- {
					row := map[string]any{s.P: p, s.C: fmt.Sprint(i), s.A: p + fmt.Sprint(i)}
					if _, err := b.Put(c(t), tether.KeyRequest{Table: tbl, Row: row}); err != nil {
						t.Fatal(err)
					}
				}
			}
			res, err := b.Scan(c(t), tether.KeyRequest{Table: tbl, Prefix: []any{"a"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 5 || col(t, res, res.Rows[0], s.A) != "a1" || col(t, res, res.Rows[4], s.A) != "a5" {
				t.Fatalf("prefix scan: %v", res.Rows)
			}
			res, err = b.Scan(c(t), tether.KeyRequest{Table: tbl, Prefix: []any{"b"}, Limit: 2})
			if err != nil || len(res.Rows) != 2 || res.Cursor == nil {
				t.Fatalf("prefix scan with limit: %v %v", res, err)
			}
			res, err = b.Scan(c(t), tether.KeyRequest{Table: tbl, Prefix: []any{"b"}, Limit: 10, Cursor: res.Cursor})
			if err != nil || len(res.Rows) != 3 || col(t, res, res.Rows[0], s.A) != "b3" {
				t.Fatalf("next page: %v %v", res, err)
			}
			res, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"b", "4"}})
			if err != nil || len(res.Rows) != 1 || col(t, res, res.Rows[0], s.A) != "b4" {
				t.Fatalf("get by composite key: %v %v", res, err)
			}
			_, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"b"}})
			if code(err) != tether.CodeBadRequest {
				t.Fatalf("a partial key for get: %v", err)
			}
		})
	}

	t.Run("BadInput", func(t *testing.T) {
		tbl := table("kvb")
		s.CreateTable(t, tbl)
		_, err := b.Get(c(t), tether.KeyRequest{Table: "no_such_table_anywhere", Key: []any{"x"}})
		if code(err) != tether.CodeUnknownTable {
			t.Fatalf("unknown table: %v (%s)", err, code(err))
		}
		_, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"x"}, Columns: []string{"no_such_column"}})
		if code(err) != tether.CodeBadRequest && code(err) != tether.CodeBackendError {
			t.Fatalf("unknown column: %v (%s)", err, code(err))
		}
		_, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"x", "y"}})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("key of the wrong arity: %v (%s)", err, code(err))
		}
		_, err = b.Put(c(t), tether.KeyRequest{Table: tbl, Row: map[string]any{s.A: "no key"}})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("put without the key: %v (%s)", err, code(err))
		}
		_, err = b.Put(c(t), tether.KeyRequest{Table: tbl, Row: map[string]any{s.Key: "k", "no_such_column": "x"}})
		if code(err) != tether.CodeBadRequest && code(err) != tether.CodeBackendError {
			t.Fatalf("put into an unknown column: %v (%s)", err, code(err))
		}
		// Names are checked against the real schema, never pasted into a query.
		_, err = b.Get(c(t), tether.KeyRequest{Table: tbl + "; DROP TABLE " + tbl, Key: []any{"x"}})
		if code(err) != tether.CodeUnknownTable && code(err) != tether.CodeBadRequest {
			t.Fatalf("a table name with SQL in it: %v (%s)", err, code(err))
		}
		_, err = b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"x"}, Columns: []string{s.A + `" FROM x; --`}})
		if code(err) != tether.CodeBadRequest && code(err) != tether.CodeBackendError && !(s.Schemaless && err == nil) {
			t.Fatalf("a column name with SQL in it: %v (%s)", err, code(err))
		}
		if _, err := b.Get(c(t), tether.KeyRequest{Table: tbl, Key: []any{"x"}}); err != nil {
			t.Fatalf("the table is gone after injection attempts: %v", err)
		}
		_, err = b.Scan(c(t), tether.KeyRequest{Table: tbl, Cursor: []byte("not a cursor")})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("a forged cursor: %v (%s)", err, code(err))
		}
	})
}
