package bigtable_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	gbt "cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/bigtable"
)

// startEmulator starts an in-memory Bigtable emulator on addr
// ("127.0.0.1:0" for any port), closed at the end of the test.
func startEmulator(t testing.TB, addr string) *bttest.Server {
	t.Helper()
	srv, err := bttest.NewServer(addr)
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// createTable creates a table with column families on the emulator at addr,
// with the admin client, as a user would.
func createTable(t testing.TB, addr, table string, families ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := gbt.NewAdminClient(ctx, "proj", "inst", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTable(ctx, table); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	for _, f := range families {
		if err := admin.CreateColumnFamily(ctx, table, f); err != nil {
			t.Fatalf("create family %s:%s: %v", table, f, err)
		}
	}
}

func config(dsn string) tether.BackendConfig {
	return tether.DefaultBackendConfig("bigtable", dsn)
}

// openBackend opens a backend on the emulator at addr.
func openBackend(t testing.TB, addr string, tweak func(*tether.BackendConfig)) *bigtable.Backend {
	t.Helper()
	cfg := config("bigtable://proj/inst?emulator=" + addr)
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := bigtable.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	return b
}

// setup starts an emulator with table "t" (families cf and meta) and opens a
// backend on it.
func setup(t testing.TB) *bigtable.Backend {
	t.Helper()
	srv := startEmulator(t, "127.0.0.1:0")
	createTable(t, srv.Addr, "t", "cf", "meta")
	return openBackend(t, srv.Addr, nil)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func code(err error) tether.Code {
	if err == nil {
		return ""
	}
	return tether.AsError(err).Code
}

func put(t testing.TB, b *bigtable.Backend, row map[string]any) {
	t.Helper()
	r, err := b.Put(ctx(t), tether.KeyRequest{Table: "t", Row: row})
	if err != nil {
		t.Fatalf("put %v: %v", row, err)
	}
	if r.Affected != 1 {
		t.Fatalf("put affected %d", r.Affected)
	}
}

func get(t testing.TB, b *bigtable.Backend, key any, cols ...string) *tether.Result {
	t.Helper()
	r, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{key}, Columns: cols})
	if err != nil {
		t.Fatalf("get %v: %v", key, err)
	}
	return r
}

func mutate(t testing.TB, b *bigtable.Backend, key string, ms ...bigtable.Mutation) {
	t.Helper()
	if _, err := b.MutateRow(ctx(t), bigtable.RowMutation{Table: "t", Key: []byte(key), Mutations: ms}); err != nil {
		t.Fatalf("mutate_row %q: %v", key, err)
	}
}

func set(fam, qual, val string, ts int64) bigtable.Mutation {
	return bigtable.Mutation{Op: "set", Family: fam, Qualifier: qual, Value: []byte(val), Timestamp: ts}
}

// rowsOf renders rows with []byte as strings, for comparison.
func rowsOf(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		if r == nil {
			continue
		}
		out[i] = make([]any, len(r))
		for j, v := range r {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			out[i][j] = v
		}
	}
	return out
}

func wantResult(t testing.TB, r *tether.Result, cols []string, rows [][]any) {
	t.Helper()
	if !reflect.DeepEqual(r.Columns, cols) {
		t.Errorf("columns %q, want %q", r.Columns, cols)
	}
	if got := rowsOf(r.Rows); !reflect.DeepEqual(got, rows) {
		t.Errorf("rows\n got %q\nwant %q", got, rows)
	}
}

func TestParseDSN(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	for _, tc := range []struct {
		dsn  string
		want bigtable.DSN
	}{
		{"bigtable://p/i", bigtable.DSN{Project: "p", Instance: "i", Metrics: true}},
		{"bigtable://example.com:p/i?app_profile=web&metrics=false", bigtable.DSN{Project: "example.com:p", Instance: "i", AppProfile: "web"}},
		{"bigtable://p/i?emulator=localhost:8086", bigtable.DSN{Project: "p", Instance: "i", Emulator: "localhost:8086"}},
		{"bigtable://p/i?emulator=inprocess&table=users:cf,meta&table=events", bigtable.DSN{Project: "p", Instance: "i", Emulator: "inprocess",
			Tables: []bigtable.TableSpec{{Name: "users", Families: []string{"cf", "meta"}}, {Name: "events"}}}},
	} {
		got, err := bigtable.ParseDSN(tc.dsn)
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.dsn, got, tc.want)
		}
	}
	for _, dsn := range []string{
		"", "p/i", "mysql://p/i", "bigtable://p", "bigtable://p/", "bigtable:///i", "bigtable://p/i/x",
		"bigtable://p/i?bogus=1", "bigtable://p/i?emulator=", "bigtable://p/i?metrics=maybe",
		"bigtable://p/i?table=t:cf", // tables only on an emulator
		"bigtable://p/i?emulator=inprocess&table=bad/name:cf", "bigtable://p/i?emulator=inprocess&table=t:c:f",
		"bigtable://p/i?app_profile=a&app_profile=b",
	} {
		if _, err := bigtable.ParseDSN(dsn); err == nil {
			t.Errorf("%q: no error", dsn)
		} else if _, err := bigtable.New(config(dsn)); err == nil {
			t.Errorf("New(%q): no error", dsn)
		}
	}

	t.Run("EmulatorEnv", func(t *testing.T) {
		t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:9999")
		d, err := bigtable.ParseDSN("bigtable://p/i")
		if err != nil || d.Emulator != "127.0.0.1:9999" || d.Metrics {
			t.Fatalf("got %+v, %v", d, err)
		}
		d, _ = bigtable.ParseDSN("bigtable://p/i?emulator=127.0.0.1:1")
		if d.Emulator != "127.0.0.1:1" {
			t.Fatalf("the DSN should win over the environment: %+v", d)
		}
	})
}

func TestBackend_Open(t *testing.T) {
	t.Run("Emulator", func(t *testing.T) {
		b := setup(t)
		if s := b.Stats(); s.Open != 1 || s.InUse != 0 {
			t.Fatalf("stats %+v", s)
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		addr := freeAddr(t) // nothing listens there
		b, err := bigtable.New(config("bigtable://proj/inst?emulator=" + addr))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = b.Open(context.Background())
		if code(err) != tether.CodeUnavailable || !errors.Is(err, tether.ErrUnavailable) {
			t.Fatalf("open: %v, want unavailable", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("open took %v to fail", d)
		}
		if _, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"k"}}); code(err) != tether.CodeUnavailable {
			t.Fatalf("get on a backend that failed to open: %v", err)
		}
	})

	t.Run("InProcess", func(t *testing.T) {
		b, err := bigtable.New(config("bigtable://proj/inst?emulator=inprocess&table=t:cf"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Open(ctx(t)); err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		put(t, b, map[string]any{"key": "a", "cf:x": "1"})
		wantResult(t, get(t, b, "a"), []string{"key", "cf:x"}, [][]any{{"a", "1"}})
	})

	t.Run("CreatesTablesOnEmulator", func(t *testing.T) {
		srv := startEmulator(t, "127.0.0.1:0")
		createTable(t, srv.Addr, "t", "cf")
		// An existing table gains the missing family; a new one is created.
		b := openBackend(t, srv.Addr+"&table=t:cf,meta&table=u:d", nil)
		put(t, b, map[string]any{"key": "a", "cf:x": "1", "meta:y": "2"})
		if _, err := b.Put(ctx(t), tether.KeyRequest{Table: "u", Row: map[string]any{"key": "a", "d:z": "3"}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Close", func(t *testing.T) {
		b := setup(t)
		if err := b.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		_, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"k"}})
		if code(err) != tether.CodeUnavailable || !errors.Is(err, tether.ErrClosed) {
			t.Fatalf("get after close: %v", err)
		}
	})
}

func TestBackend_KeyValue(t *testing.T) {
	b := setup(t)

	t.Run("PutGet", func(t *testing.T) {
		put(t, b, map[string]any{"key": "ada", "cf:name": "Ada", "cf:born": "1815", "meta:tag": []byte{0, 1}})
		wantResult(t, get(t, b, "ada"), []string{"key", "cf:born", "cf:name", "meta:tag"},
			[][]any{{"ada", "1815", "Ada", "\x00\x01"}})
		// Put replaces the columns it names and leaves the others.
		put(t, b, map[string]any{"key": "ada", "cf:name": "Ada Lovelace"})
		wantResult(t, get(t, b, "ada"), []string{"key", "cf:born", "cf:name", "meta:tag"},
			[][]any{{"ada", "1815", "Ada Lovelace", "\x00\x01"}})
		// nil deletes a column.
		put(t, b, map[string]any{"key": "ada", "meta:tag": nil})
		wantResult(t, get(t, b, "ada"), []string{"key", "cf:born", "cf:name"}, [][]any{{"ada", "1815", "Ada Lovelace"}})
		// Values are bytes; the key too.
		r := get(t, b, "ada")
		for i, v := range r.Rows[0] {
			if _, ok := v.([]byte); !ok {
				t.Errorf("column %s is %T, want []byte", r.Columns[i], v)
			}
		}
	})

	t.Run("Missing", func(t *testing.T) {
		r := get(t, b, "nobody")
		wantResult(t, r, []string{"key"}, [][]any{})
		r = get(t, b, "nobody", "cf:name", "cf:born")
		wantResult(t, r, []string{"key", "cf:name", "cf:born"}, [][]any{})
	})

	t.Run("Projection", func(t *testing.T) {
		put(t, b, map[string]any{"key": "p", "cf:a": "1", "cf:b": "2", "meta:c": "3"})
		// The key, then the columns named, in that order.
		wantResult(t, get(t, b, "p", "cf:b", "key"), []string{"key", "cf:b"}, [][]any{{"p", "2"}})
		wantResult(t, get(t, b, "p", "meta:c", "cf:a", "meta:c"), []string{"key", "meta:c", "cf:a"}, [][]any{{"p", "3", "1"}})
		wantResult(t, get(t, b, "p", "key"), []string{"key"}, [][]any{{"p"}})
		wantResult(t, get(t, b, "nobody", "key"), []string{"key"}, [][]any{})
		// A row without the named columns still exists: nils, not no row.
		wantResult(t, get(t, b, "p", "cf:zzz", "meta:c"), []string{"key", "cf:zzz", "meta:c"}, [][]any{{"p", nil, "3"}})
		wantResult(t, get(t, b, "p", "cf:zzz"), []string{"key", "cf:zzz"}, [][]any{{"p", nil}})
		wantResult(t, get(t, b, "p", "nofamily:x"), []string{"key", "nofamily:x"}, [][]any{{"p", nil}})
	})

	t.Run("LatestCellOnly", func(t *testing.T) {
		mutate(t, b, "v", set("cf", "x", "old", 1000), set("cf", "x", "new", 2000))
		wantResult(t, get(t, b, "v"), []string{"key", "cf:x"}, [][]any{{"v", "new"}})
	})

	t.Run("IntegerKeysAndValues", func(t *testing.T) {
		put(t, b, map[string]any{"key": int64(42), "cf:n": int64(-2), "cf:u": uint64(7)})
		r := get(t, b, "42")
		if len(r.Rows) != 1 {
			t.Fatalf("the integer key 42 is not the row \"42\": %v", r.Rows)
		}
		if n := r.Rows[0][1].([]byte); !bytes.Equal(n, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}) {
			t.Fatalf("cf:n = %x, want 8-byte big-endian -2", n)
		}
		inc, err := b.Increment(ctx(t), bigtable.IncrementRequest{Table: "t", Key: []byte("42"), Family: "cf", Qualifier: "n", Delta: 5})
		if err != nil {
			t.Fatal(err)
		}
		if v := inc.Rows[0][3]; v != int64(3) {
			t.Fatalf("increment of a put integer: %v", v)
		}
		wantResult(t, get(t, b, uint64(42), "cf:u"), []string{"key", "cf:u"}, [][]any{{"42", "\x00\x00\x00\x00\x00\x00\x00\x07"}})
	})

	t.Run("Delete", func(t *testing.T) {
		put(t, b, map[string]any{"key": "gone", "cf:a": "1", "meta:b": "2"})
		r, err := b.Delete(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"gone"}})
		if err != nil || r.Affected != 1 {
			t.Fatalf("delete: %v, %v", r, err)
		}
		if r := get(t, b, "gone"); len(r.Rows) != 0 {
			t.Fatalf("row still there: %v", r.Rows)
		}
		// Deleting a missing row is not an error.
		if _, err := b.Delete(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"gone"}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MultiGet", func(t *testing.T) {
		put(t, b, map[string]any{"key": "m1", "cf:a": "1"})
		put(t, b, map[string]any{"key": "m2", "cf:b": "2"})
		r, err := b.MultiGet(ctx(t), tether.KeyRequest{Table: "t", Keys: [][]any{{"m2"}, {"missing"}, {"m1"}, {"m2"}}})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, []string{"key", "cf:a", "cf:b"}, [][]any{{"m2", nil, "2"}, nil, {"m1", "1", nil}, {"m2", nil, "2"}})
		r, err = b.MultiGet(ctx(t), tether.KeyRequest{Table: "t", Keys: [][]any{{"m1"}, {"m2"}}, Columns: []string{"cf:b"}})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, []string{"key", "cf:b"}, [][]any{{"m1", nil}, {"m2", "2"}})
		r, err = b.MultiGet(ctx(t), tether.KeyRequest{Table: "t", Keys: [][]any{}})
		if err != nil || len(r.Rows) != 0 {
			t.Fatalf("no keys: %v, %v", r, err)
		}
	})
}

// TestBackend_KeyValueSuite runs the key-API suite every backend passes: the
// key is "key", the columns are "cf:a" and "cf:b". Bigtable is schemaless: a
// projected get leads with "key", and an unknown qualifier reads as nil.
func TestBackend_KeyValueSuite(t *testing.T) {
	srv := startEmulator(t, "127.0.0.1:0")
	b := openBackend(t, srv.Addr, nil)
	backendtest.RunKeyValue(t, &backendtest.KVSuite{
		Backend:     b,
		CreateTable: func(t *testing.T, name string) { createTable(t, srv.Addr, name, "cf") },
		Key:         "key", A: "cf:a", B: "cf:b",
		Schemaless: true,
	})
}

func TestBackend_Scan(t *testing.T) {
	b := setup(t)
	for i := range 25 {
		put(t, b, map[string]any{"key": fmt.Sprintf("user#%02d", i), "cf:n": fmt.Sprint(i)})
	}
	put(t, b, map[string]any{"key": "other", "cf:n": "x"})
	put(t, b, map[string]any{"key": "user", "meta:m": "y"}) // the prefix itself, and another column

	scanAll := func(t *testing.T, k tether.KeyRequest) (keys []string, pages int) {
		t.Helper()
		k.Table = "t"
		for {
			r, err := b.Scan(ctx(t), k)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, row := range r.Rows {
				keys = append(keys, string(row[0].([]byte)))
			}
			if k.Limit > 0 && len(r.Rows) > k.Limit {
				t.Fatalf("page of %d rows, limit %d", len(r.Rows), k.Limit)
			}
			if r.Cursor == nil {
				return keys, pages
			}
			if k.Limit > 0 && len(r.Rows) < k.Limit {
				t.Fatalf("a short page has a cursor")
			}
			k.Cursor = r.Cursor
			if pages > 100 {
				t.Fatal("scan does not end")
			}
		}
	}

	t.Run("PrefixPaged", func(t *testing.T) {
		keys, pages := scanAll(t, tether.KeyRequest{Prefix: []any{"user#"}, Limit: 10})
		if len(keys) != 25 || pages != 3 || keys[0] != "user#00" || keys[24] != "user#24" {
			t.Fatalf("%d pages: %q", pages, keys)
		}
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Fatalf("not in key order: %q", keys)
			}
		}
	})

	t.Run("ExactPages", func(t *testing.T) {
		keys, pages := scanAll(t, tether.KeyRequest{Prefix: []any{"user#"}, Limit: 5})
		if len(keys) != 25 || pages != 5 { // no empty sixth page
			t.Fatalf("%d pages: %q", pages, keys)
		}
	})

	t.Run("Range", func(t *testing.T) {
		keys, _ := scanAll(t, tether.KeyRequest{Start: []any{"user#05"}, End: []any{"user#10"}, Limit: 2})
		if want := []string{"user#05", "user#06", "user#07", "user#08", "user#09"}; !reflect.DeepEqual(keys, want) {
			t.Fatalf("got %q, want %q", keys, want)
		}
		keys, _ = scanAll(t, tether.KeyRequest{Start: []any{"user#23"}})
		if want := []string{"user#23", "user#24"}; !reflect.DeepEqual(keys, want) {
			t.Fatalf("open end: got %q, want %q", keys, want)
		}
	})

	t.Run("WholeTable", func(t *testing.T) {
		keys, pages := scanAll(t, tether.KeyRequest{})
		if len(keys) != 27 || pages != 1 || keys[0] != "other" || keys[1] != "user" {
			t.Fatalf("%d pages: %q", pages, keys)
		}
	})

	t.Run("WideColumns", func(t *testing.T) {
		r, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t", Prefix: []any{"user"}, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, []string{"key", "cf:n", "meta:m"}, [][]any{{"user", nil, "y"}, {"user#00", "0", nil}})
		r, err = b.Scan(ctx(t), tether.KeyRequest{Table: "t", Prefix: []any{"user"}, Limit: 2, Columns: []string{"key", "meta:m"}})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, []string{"key", "meta:m"}, [][]any{{"user", "y"}, {"user#00", nil}})
		r, err = b.Scan(ctx(t), tether.KeyRequest{Table: "t", Prefix: []any{"user"}, Limit: 2, Columns: []string{"meta:m"}})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, []string{"key", "meta:m"}, [][]any{{"user", "y"}, {"user#00", nil}})
	})

	t.Run("CursorPastEnd", func(t *testing.T) {
		first, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t", Start: []any{"user#23"}, Limit: 1})
		if err != nil || first.Cursor == nil {
			t.Fatalf("%v, %v", first, err)
		}
		r, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t", End: []any{"b"}, Cursor: first.Cursor})
		if err != nil || len(r.Rows) != 0 || r.Cursor != nil {
			t.Fatalf("%v, %v", r, err)
		}
	})

	t.Run("PrefixAndRange", func(t *testing.T) {
		_, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t", Prefix: []any{"a"}, Start: []any{"b"}})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("got %v", err)
		}
	})
}

func TestBackend_Binary(t *testing.T) {
	b := setup(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	// Every byte value in the row key, the qualifier and the value.
	key := append([]byte("bin"), all...)
	qual := string(all)
	put(t, b, map[string]any{"key": key, "cf:" + qual: all, "cf:empty": ""})
	r, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{key}})
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, []string{"key", "cf:" + qual, "cf:empty"}, [][]any{{string(key), string(all), ""}})
	wantResult(t, get(t, b, key, "cf:"+qual), []string{"key", "cf:" + qual}, [][]any{{string(key), string(all)}})

	// Each byte value alone, as a value and as a one-byte-suffixed key.
	for i := range 256 {
		k := []byte{'z', byte(i)}
		put(t, b, map[string]any{"key": k, "cf:v": []byte{byte(i)}})
	}
	sr, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t", Prefix: []any{"z"}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Rows) != 256 {
		t.Fatalf("scan: %d rows", len(sr.Rows))
	}
	for i, row := range sr.Rows {
		if k := row[0].([]byte); !bytes.Equal(k, []byte{'z', byte(i)}) {
			t.Fatalf("row %d key %x", i, k)
		}
		if v := row[1].([]byte); !bytes.Equal(v, []byte{byte(i)}) {
			t.Fatalf("row %d value %x", i, v)
		}
	}

	// The same through ReadRows and a CheckAndMutate on a binary value.
	rr, err := b.ReadRows(ctx(t), bigtable.RowsRequest{Table: "t", Keys: [][]byte{key}, Columns: []string{"cf:" + qual}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Rows) != 1 || !bytes.Equal(rr.Rows[0][2].([]byte), all) || !bytes.Equal(rr.Rows[0][4].([]byte), all) {
		t.Fatalf("read_rows: %q", rowsOf(rr.Rows))
	}
	cm, err := b.CheckAndMutate(ctx(t), bigtable.CheckAndMutateRequest{Table: "t", Key: key, Family: "cf", Qualifier: qual, Value: all,
		IfTrue: []bigtable.Mutation{set("cf", "matched", "yes", 0)}})
	if err != nil || cm.Affected != 1 {
		t.Fatalf("check_and_mutate on all bytes: %v, %v", cm, err)
	}
}

func TestBackend_ReadRows(t *testing.T) {
	b := setup(t)
	mutate(t, b, "r1", set("cf", "a", "a1", 1000), set("cf", "a", "a2", 2000), set("cf", "b", "b1", 1000), set("meta", "m", "m1", 3000))
	mutate(t, b, "r2", set("cf", "a", "x", 5000))
	mutate(t, b, "r3", set("meta", "m", "y", 5000))
	long := bigtable.LongColumns

	read := func(t *testing.T, r bigtable.RowsRequest) *tether.Result {
		t.Helper()
		r.Table = "t"
		res, err := b.ReadRows(ctx(t), r)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("AllCells", func(t *testing.T) {
		wantResult(t, read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r1")}}), long, [][]any{
			{"r1", "cf", "a", int64(2000), "a2"},
			{"r1", "cf", "a", int64(1000), "a1"},
			{"r1", "cf", "b", int64(1000), "b1"},
			{"r1", "meta", "m", int64(3000), "m1"},
		})
	})

	t.Run("LatestOnly", func(t *testing.T) {
		wantResult(t, read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r1")}, LatestOnly: true, Columns: []string{"cf:a"}}), long, [][]any{
			{"r1", "cf", "a", int64(2000), "a2"},
		})
	})

	t.Run("Families", func(t *testing.T) {
		wantResult(t, read(t, bigtable.RowsRequest{Prefix: []byte("r"), Families: []string{"meta"}}), long, [][]any{
			{"r1", "meta", "m", int64(3000), "m1"},
			{"r3", "meta", "m", int64(5000), "y"},
		})
		// Families and columns: their union.
		wantResult(t, read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r1")}, Families: []string{"meta"}, Columns: []string{"cf:b"}}), long, [][]any{
			{"r1", "cf", "b", int64(1000), "b1"},
			{"r1", "meta", "m", int64(3000), "m1"},
		})
	})

	t.Run("KeysInKeyOrder", func(t *testing.T) {
		res := read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r3"), []byte("nope"), []byte("r2")}})
		wantResult(t, res, long, [][]any{
			{"r2", "cf", "a", int64(5000), "x"},
			{"r3", "meta", "m", int64(5000), "y"},
		})
		if res.Cursor != nil {
			t.Fatalf("cursor %q without a limit", res.Cursor)
		}
	})

	t.Run("Paged", func(t *testing.T) {
		res := read(t, bigtable.RowsRequest{Start: []byte("r1"), End: []byte("r9"), Limit: 2, LatestOnly: true})
		wantResult(t, res, long, [][]any{
			{"r1", "cf", "a", int64(2000), "a2"},
			{"r1", "cf", "b", int64(1000), "b1"},
			{"r1", "meta", "m", int64(3000), "m1"},
			{"r2", "cf", "a", int64(5000), "x"},
		})
		if res.Cursor == nil {
			t.Fatal("no cursor on a full page")
		}
		res = read(t, bigtable.RowsRequest{Start: []byte("r1"), End: []byte("r9"), Limit: 2, Cursor: res.Cursor})
		wantResult(t, res, long, [][]any{{"r3", "meta", "m", int64(5000), "y"}})
		if res.Cursor != nil {
			t.Fatalf("cursor %q on the last page", res.Cursor)
		}
		// By keys, with a cursor.
		res = read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r1"), []byte("r2"), []byte("r3")}, Limit: 1, Families: []string{"meta"}})
		if len(res.Rows) != 1 || res.Cursor == nil {
			t.Fatalf("keys page 1: %q cursor %q", rowsOf(res.Rows), res.Cursor)
		}
		res = read(t, bigtable.RowsRequest{Keys: [][]byte{[]byte("r1"), []byte("r2"), []byte("r3")}, Limit: 1, Families: []string{"meta"}, Cursor: res.Cursor})
		wantResult(t, res, long, [][]any{{"r3", "meta", "m", int64(5000), "y"}})
	})

	t.Run("Empty", func(t *testing.T) {
		wantResult(t, read(t, bigtable.RowsRequest{Prefix: []byte("zz")}), long, [][]any{})
	})
}

func TestBackend_MutateRow(t *testing.T) {
	b := setup(t)
	cells := func(t *testing.T, key string) [][]any {
		t.Helper()
		res, err := b.ReadRows(ctx(t), bigtable.RowsRequest{Table: "t", Keys: [][]byte{[]byte(key)}})
		if err != nil {
			t.Fatal(err)
		}
		return rowsOf(res.Rows)
	}
	mutate(t, b, "k", set("cf", "a", "1", 1000), set("cf", "a", "2", 2000), set("cf", "b", "3", 1000), set("meta", "m", "4", 1000))

	t.Run("DeleteCellsAt", func(t *testing.T) {
		mutate(t, b, "k", bigtable.Mutation{Op: "delete_cells", Family: "cf", Qualifier: "a", Timestamp: 2000})
		want := [][]any{{"k", "cf", "a", int64(1000), "1"}, {"k", "cf", "b", int64(1000), "3"}, {"k", "meta", "m", int64(1000), "4"}}
		if got := cells(t, "k"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("DeleteCells", func(t *testing.T) {
		mutate(t, b, "k", set("cf", "a", "5", 3000), bigtable.Mutation{Op: "delete_cells", Family: "cf", Qualifier: "a"})
		want := [][]any{{"k", "cf", "b", int64(1000), "3"}, {"k", "meta", "m", int64(1000), "4"}}
		if got := cells(t, "k"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("DeleteFamily", func(t *testing.T) {
		mutate(t, b, "k", bigtable.Mutation{Op: "delete_family", Family: "cf"})
		want := [][]any{{"k", "meta", "m", int64(1000), "4"}}
		if got := cells(t, "k"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("DeleteRowThenSet", func(t *testing.T) {
		mutate(t, b, "k", bigtable.Mutation{Op: "delete_row"}, set("cf", "z", "9", 7000))
		want := [][]any{{"k", "cf", "z", int64(7000), "9"}}
		if got := cells(t, "k"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("ServerTime", func(t *testing.T) {
		before := time.Now().UnixMicro()
		mutate(t, b, "st", set("cf", "a", "now", 0))
		got := cells(t, "st")
		ts := got[0][3].(int64)
		if ts < before-1000 || ts > time.Now().UnixMicro()+1000 || ts%1000 != 0 {
			t.Fatalf("server timestamp %d not now in milliseconds", ts)
		}
	})

	t.Run("SubMillisecondTruncated", func(t *testing.T) {
		mutate(t, b, "ms", set("cf", "a", "v", 123456))
		if got := cells(t, "ms"); got[0][3] != int64(123000) {
			t.Fatalf("timestamp %v", got[0][3])
		}
	})

	t.Run("UnknownFamily", func(t *testing.T) {
		// Cloud Bigtable applies none of a failed mutation; the emulator
		// applies those before the bad one, so this checks only the error.
		_, err := b.MutateRow(ctx(t), bigtable.RowMutation{Table: "t", Key: []byte("atom"), Mutations: []bigtable.Mutation{
			set("cf", "a", "1", 0), set("nofamily", "b", "2", 0)}})
		if code(err) != tether.CodeBackendError {
			t.Fatalf("unknown family: %v", err)
		}
	})
}

func TestBackend_Increment(t *testing.T) {
	b := setup(t)
	inc := func(key string, d int64) (*tether.Result, error) {
		return b.Increment(ctx(t), bigtable.IncrementRequest{Table: "t", Key: []byte(key), Family: "cf", Qualifier: "n", Delta: d})
	}
	r, err := inc("c", 5)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, bigtable.IncrementColumns, [][]any{{"c", "cf", "n", int64(5)}})
	if r, err = inc("c", -7); err != nil || r.Rows[0][3] != int64(-2) {
		t.Fatalf("%v, %v", r, err)
	}
	// The counter reads back as 8 bytes big-endian.
	g := get(t, b, "c")
	if v := g.Rows[0][1].([]byte); int64(binary.BigEndian.Uint64(v)) != -2 {
		t.Fatalf("stored %x", v)
	}
	// Concurrent increments are serialised by Bigtable.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := inc("c", 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if r, _ = inc("c", 0); r.Rows[0][3] != int64(18) {
		t.Fatalf("after 20 concurrent +1: %v", r.Rows[0][3])
	}

	put(t, b, map[string]any{"key": "text", "cf:n": "not a counter"})
	if _, err := inc("text", 1); code(err) != tether.CodeBackendError {
		t.Fatalf("increment of text: %v", err)
	}
	_, err = b.Increment(ctx(t), bigtable.IncrementRequest{Table: "t", Key: []byte("c"), Family: "nofamily", Qualifier: "n", Delta: 1})
	if code(err) != tether.CodeBackendError {
		t.Fatalf("increment in an unknown family: %v", err)
	}
}

func TestBackend_CheckAndMutate(t *testing.T) {
	b := setup(t)
	put(t, b, map[string]any{"key": "lock", "cf:owner": "ada"})
	cam := func(c bigtable.CheckAndMutateRequest) int64 {
		t.Helper()
		c.Table = "t"
		if c.Key == nil {
			c.Key = []byte("lock")
		}
		r, err := b.CheckAndMutate(ctx(t), c)
		if err != nil {
			t.Fatal(err)
		}
		return r.Affected
	}
	value := func(key, col string) any {
		t.Helper()
		r := get(t, b, key, col)
		if len(r.Rows) == 0 {
			return "<no row>"
		}
		return rowsOf(r.Rows)[0][1]
	}

	// Compare and set: only the owner may hand over.
	if n := cam(bigtable.CheckAndMutateRequest{Family: "cf", Qualifier: "owner", Value: []byte("bob"),
		IfTrue: []bigtable.Mutation{set("cf", "owner", "eve", 0)}}); n != 0 || value("lock", "cf:owner") != "ada" {
		t.Fatalf("wrong value matched: %d, %v", n, value("lock", "cf:owner"))
	}
	if n := cam(bigtable.CheckAndMutateRequest{Family: "cf", Qualifier: "owner", Value: []byte("ada"),
		IfTrue: []bigtable.Mutation{set("cf", "owner", "bob", 0)}}); n != 1 || value("lock", "cf:owner") != "bob" {
		t.Fatalf("value did not match: %d, %v", n, value("lock", "cf:owner"))
	}
	// Only the latest cell counts: "ada" is still an older cell.
	if n := cam(bigtable.CheckAndMutateRequest{Family: "cf", Qualifier: "owner", Value: []byte("ada"),
		IfFalse: []bigtable.Mutation{set("cf", "x", "1", 0)}}); n != 0 || value("lock", "cf:x") != "1" {
		t.Fatal("an older cell matched")
	}
	// Any value; IfFalse when the column is missing (insert if absent).
	if n := cam(bigtable.CheckAndMutateRequest{Key: []byte("new"), Family: "cf", Qualifier: "owner",
		IfFalse: []bigtable.Mutation{set("cf", "owner", "first", 0)}}); n != 0 || value("new", "cf:owner") != "first" {
		t.Fatalf("insert if absent: %d, %v", n, value("new", "cf:owner"))
	}
	if n := cam(bigtable.CheckAndMutateRequest{Key: []byte("new"), Family: "cf", Qualifier: "owner",
		IfFalse: []bigtable.Mutation{set("cf", "owner", "second", 0)}}); n != 1 || value("new", "cf:owner") != "first" {
		t.Fatalf("insert if absent, again: %d, %v", n, value("new", "cf:owner"))
	}
	// Family alone: any column of it.
	if n := cam(bigtable.CheckAndMutateRequest{Family: "meta", IfTrue: []bigtable.Mutation{{Op: "delete_row"}}}); n != 0 {
		t.Fatal("an empty family matched")
	}
	if n := cam(bigtable.CheckAndMutateRequest{Family: "cf", Value: []byte("1"), IfTrue: []bigtable.Mutation{{Op: "delete_row"}}}); n != 1 || value("lock", "cf:owner") != "<no row>" {
		t.Fatalf("family and value: %d, %v", n, value("lock", "cf:owner"))
	}

	_, err := b.CheckAndMutate(ctx(t), bigtable.CheckAndMutateRequest{Table: "t", Key: []byte("k"), Family: "cf"})
	if code(err) != tether.CodeBadRequest {
		t.Fatalf("no mutations: %v", err)
	}
}

func TestBackend_BadInput(t *testing.T) {
	b := setup(t)
	c := ctx(t)
	big := strings.Repeat("x", bigtable.MaxMutationBytes)
	for _, tc := range []struct {
		name string
		want tether.Code
		call func() error
	}{
		{"UnknownTable", tether.CodeUnknownTable, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "nosuch", Key: []any{"k"}})
			if e := tether.AsError(err); err != nil && (e.BackendCode != "NotFound" || !strings.Contains(e.Message, `no table "nosuch"`)) {
				return fmt.Errorf("not a clear unknown-table error: %+v", e)
			}
			return err
		}},
		{"UnknownTablePut", tether.CodeUnknownTable, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "nosuch", Row: map[string]any{"key": "k", "cf:a": "1"}})
			return err
		}},
		{"BadTableName", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "no/such", Key: []any{"k"}})
			return err
		}},
		{"UnknownFamily", tether.CodeBackendError, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "nofam:a": "1"}})
			return err
		}},
		{"FloatKey", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{1.5}})
			return err
		}},
		{"NilKey", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{nil}})
			return err
		}},
		{"CompositeKey", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{"a", "b"}})
			return err
		}},
		{"EmptyKey", tether.CodeBadRequest, func() error {
			_, err := b.Delete(c, tether.KeyRequest{Table: "t", Key: []any{""}})
			return err
		}},
		{"KeyTooLong", tether.CodeTooLarge, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{strings.Repeat("k", bigtable.MaxKeyBytes+1)}})
			return err
		}},
		{"MultiGetBadKey", tether.CodeBadRequest, func() error {
			_, err := b.MultiGet(c, tether.KeyRequest{Table: "t", Keys: [][]any{{"a"}, {true}}})
			return err
		}},
		{"PutNoKey", tether.CodeBadRequest, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"cf:a": "1"}})
			return err
		}},
		{"PutOnlyKey", tether.CodeBadRequest, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k"}})
			return err
		}},
		{"PutColumnWithoutFamily", tether.CodeBadRequest, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "name": "x"}})
			return err
		}},
		{"PutFloat", tether.CodeBadRequest, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "cf:a": 1.5}})
			return err
		}},
		{"PutBool", tether.CodeBadRequest, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "cf:a": true}})
			return err
		}},
		{"PutTooLarge", tether.CodeTooLarge, func() error {
			_, err := b.Put(c, tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "cf:a": big}})
			return err
		}},
		{"MutateTooLarge", tether.CodeTooLarge, func() error {
			_, err := b.MutateRow(c, bigtable.RowMutation{Table: "t", Key: []byte("k"), Mutations: []bigtable.Mutation{
				set("cf", "a", big[:bigtable.MaxMutationBytes/2], 0), set("cf", "b", big[:bigtable.MaxMutationBytes/2], 0)}})
			return err
		}},
		{"MutateNothing", tether.CodeBadRequest, func() error {
			_, err := b.MutateRow(c, bigtable.RowMutation{Table: "t", Key: []byte("k")})
			return err
		}},
		{"MutateBadOp", tether.CodeBadRequest, func() error {
			_, err := b.MutateRow(c, bigtable.RowMutation{Table: "t", Key: []byte("k"), Mutations: []bigtable.Mutation{{Op: "drop", Family: "cf"}}})
			return err
		}},
		{"MutateNegativeTimestamp", tether.CodeBadRequest, func() error {
			_, err := b.MutateRow(c, bigtable.RowMutation{Table: "t", Key: []byte("k"), Mutations: []bigtable.Mutation{set("cf", "a", "v", -5)}})
			return err
		}},
		{"ProjectionBadFamily", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{"k"}, Columns: []string{"no such:x"}})
			return err
		}},
		{"ProjectionWholeFamily", tether.CodeBadRequest, func() error {
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{"k"}, Columns: []string{"cf"}})
			return err
		}},
		{"ForgedCursor", tether.CodeBadRequest, func() error {
			_, err := b.Scan(c, tether.KeyRequest{Table: "t", Cursor: []byte("not a cursor")})
			return err
		}},
		{"ForgedReadRowsCursor", tether.CodeBadRequest, func() error {
			_, err := b.ReadRows(c, bigtable.RowsRequest{Table: "t", Cursor: []byte("k")})
			return err
		}},
		{"LimitTooLarge", tether.CodeBadRequest, func() error {
			_, err := b.Scan(c, tether.KeyRequest{Table: "t", Limit: bigtable.MaxScanLimit + 1})
			return err
		}},
		{"ReadRowsBadFamily", tether.CodeBadRequest, func() error {
			_, err := b.ReadRows(c, bigtable.RowsRequest{Table: "t", Families: []string{"a:b"}})
			return err
		}},
		{"ReadRowsUnknownTable", tether.CodeUnknownTable, func() error {
			_, err := b.ReadRows(c, bigtable.RowsRequest{Table: "nosuch"})
			return err
		}},
		{"ResultTooLarge", tether.CodeTooLarge, func() error {
			put(t, b, map[string]any{"key": "wide", "cf:a": strings.Repeat("v", 2000)})
			_, err := b.Get(c, tether.KeyRequest{Table: "t", Key: []any{"wide"}, MaxBytes: 1024})
			return err
		}},
		{"ScanTooLarge", tether.CodeTooLarge, func() error {
			_, err := b.Scan(c, tether.KeyRequest{Table: "t", MaxBytes: 1024})
			return err
		}},
		{"ReadRowsTooLarge", tether.CodeTooLarge, func() error {
			_, err := b.ReadRows(c, bigtable.RowsRequest{Table: "t", MaxBytes: 1024})
			return err
		}},
		{"ReadRowsKeysAndRange", tether.CodeBadRequest, func() error {
			_, err := b.ReadRows(c, bigtable.RowsRequest{Table: "t", Keys: [][]byte{[]byte("a")}, Prefix: []byte("a")})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestBackend_DownAndBack stops the emulator under an open backend: requests
// fail unavailable within about connect_timeout, and succeed again, with no
// help, once an emulator listens on the same port again.
func TestBackend_DownAndBack(t *testing.T) {
	addr := freeAddr(t)
	srv, err := bttest.NewServer(addr) // closed below, not at cleanup
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, addr, "t", "cf")
	const budget = 500 * time.Millisecond
	b := openBackend(t, addr, func(c *tether.BackendConfig) { c.ConnectTimeout = tether.Duration(budget) })
	put(t, b, map[string]any{"key": "k", "cf:a": "1"})

	srv.Close()
	for _, op := range []struct {
		name      string
		call      func() error
		retrySafe bool
	}{
		{"Get", func() error { _, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"k"}}); return err }, true},
		{"Scan", func() error { _, err := b.Scan(ctx(t), tether.KeyRequest{Table: "t"}); return err }, true},
		{"Put", func() error {
			_, err := b.Put(ctx(t), tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "cf:a": "2"}})
			return err
		}, true},
		{"Delete", func() error { _, err := b.Delete(ctx(t), tether.KeyRequest{Table: "t", Key: []any{"k"}}); return err }, true},
		{"Increment", func() error {
			_, err := b.Increment(ctx(t), bigtable.IncrementRequest{Table: "t", Key: []byte("k"), Family: "cf", Qualifier: "n", Delta: 1})
			return err
		}, false},
	} {
		start := time.Now()
		err := op.call()
		took := time.Since(start)
		if code(err) != tether.CodeUnavailable || !errors.Is(err, tether.ErrUnavailable) {
			t.Fatalf("%s while down: %v, want unavailable", op.name, err)
		}
		if retry := tether.AsError(err).Retry; retry != op.retrySafe {
			t.Errorf("%s: Retry = %v", op.name, retry)
		}
		if took > budget+2*time.Second {
			t.Fatalf("%s took %v to fail (budget %v)", op.name, took, budget)
		}
		t.Logf("%s failed in %v: %v", op.name, took, err)
	}

	// A new emulator on the same port: empty, so the table is created again.
	var srv2 *bttest.Server
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		if srv2, err = bttest.NewServer(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart emulator on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(srv2.Close)
	createTable(t, addr, "t", "cf")
	back := time.Now()
	for {
		_, err := b.Put(ctx(t), tether.KeyRequest{Table: "t", Row: map[string]any{"key": "k", "cf:a": "3"}})
		if err == nil {
			break
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("backend did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("served again %v after the emulator came back", time.Since(back))
	wantResult(t, get(t, b, "k"), []string{"key", "cf:a"}, [][]any{{"k", "3"}})
}

// TestBackend_Concurrent runs many requests at once on the one client.
func TestBackend_Concurrent(t *testing.T) {
	b := setup(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("w%d-%d", w, i)
				if _, err := b.Put(ctx(t), tether.KeyRequest{Table: "t", Row: map[string]any{"key": key, "cf:v": key}}); err != nil {
					t.Error(err)
					return
				}
				r, err := b.Get(ctx(t), tether.KeyRequest{Table: "t", Key: []any{key}})
				if err != nil || len(r.Rows) != 1 || string(r.Rows[0][1].([]byte)) != key {
					t.Errorf("get %s: %v, %v", key, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := b.Stats(); s.InUse != 0 {
		t.Fatalf("in use after all returned: %+v", s)
	}
}

// BenchmarkBackend_Get is E2's read: one random row of 10,000, through the
// backend (validation, the retry-budget interceptor, the wide result) and the
// client, against the in-process emulator over loopback gRPC. Compare with
// BenchmarkClient_ReadRow, the bare client, for the backend's own overhead.
func BenchmarkBackend_Get(b *testing.B) {
	be, _ := benchSetup(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		k := fmt.Sprintf("row%05d", rand.IntN(10000))
		r, err := be.Get(context.Background(), tether.KeyRequest{Table: "t", Key: []any{k}})
		if err != nil || len(r.Rows) != 1 {
			b.Fatalf("get %s: %v %v", k, r, err)
		}
	}
}

func BenchmarkClient_ReadRow(b *testing.B) {
	_, addr := benchSetup(b)
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	client, err := gbt.NewClientWithConfig(context.Background(), "proj", "inst", gbt.ClientConfig{MetricsProvider: gbt.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	tbl := client.Open("t")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		k := fmt.Sprintf("row%05d", rand.IntN(10000))
		row, err := tbl.ReadRow(context.Background(), k, gbt.RowFilter(gbt.LatestNFilter(1)))
		if err != nil || row == nil {
			b.Fatalf("read %s: %v %v", k, row, err)
		}
	}
}

func benchSetup(b *testing.B) (*bigtable.Backend, string) {
	srv := startEmulator(b, "127.0.0.1:0")
	createTable(b, srv.Addr, "t", "cf")
	be := openBackend(b, srv.Addr, nil)
	for i := range 10000 {
		key := fmt.Sprintf("row%05d", i)
		if _, err := be.Put(context.Background(), tether.KeyRequest{Table: "t", Row: map[string]any{"key": key, "cf:name": "user " + key, "cf:n": int64(i)}}); err != nil {
			b.Fatal(err)
		}
	}
	return be, srv.Addr
}
