package cassandra_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/cassandra"
)

// The tests run against a real Cassandra at TETHER_TEST_CASSANDRA_HOST
// (host:port; scripts/lib/cassandra.sh starts one), as the user
// TETHER_TEST_CASSANDRA_USER with TETHER_TEST_CASSANDRA_PASSWORD (both
// "cassandra" by default). They create the keyspaces tether_test
// (SimpleStrategy, replication factor 1) and tether_test_rf3 (factor 3, which
// a one-node cluster cannot satisfy at QUORUM).

const keyspace = "tether_test"

var (
	setupOnce sync.Once
	setupErr  error
	tableSeq  atomic.Int64
)

// host returns the node's address, creating the keyspaces on first use.
func host(t *testing.T) string {
	t.Helper()
	h := backendtest.RequireEnv(t, "TETHER_TEST_CASSANDRA_HOST")
	setupOnce.Do(func() {
		b, err := cassandra.New(config(dsn(h, "", "")))
		if err == nil {
			b.Logger = quiet
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err = b.Open(ctx); err == nil {
				defer b.Close(ctx)
				for _, cql := range []string{
					"CREATE KEYSPACE IF NOT EXISTS " + keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
					"CREATE KEYSPACE IF NOT EXISTS " + keyspace + "_rf3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
				} {
					if _, err = b.Exec(ctx, tether.Statement{SQL: cql}); err != nil {
						break
					}
				}
			}
		}
		setupErr = err
	})
	if setupErr != nil {
		t.Fatalf("set up keyspace %s: %v", keyspace, setupErr)
	}
	return h
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// dsn returns a DSN for addr and keyspace ks with extra query parameters.
func dsn(addr, ks, params string) string {
	user := env("TETHER_TEST_CASSANDRA_USER", "cassandra")
	pass := env("TETHER_TEST_CASSANDRA_PASSWORD", "cassandra")
	s := fmt.Sprintf("cassandra://%s:%s@%s/%s", user, pass, addr, ks)
	if params != "" {
		s += "?" + params
	}
	return s
}

func config(dsn string) tether.BackendConfig {
	c := tether.DefaultBackendConfig("cassandra", dsn)
	c.ConnectTimeout = tether.Duration(5 * time.Second)
	return c
}

// open opens a backend on the test keyspace with extra DSN parameters.
func open(t *testing.T, params string) *cassandra.Backend {
	t.Helper()
	return openDSN(t, dsn(host(t), keyspace, params))
}

func openDSN(t *testing.T, dsn string) *cassandra.Backend {
	t.Helper()
	b, err := cassandra.New(config(dsn))
	if err != nil {
		t.Fatal(err)
	}
	b.Logger = quiet
	if err := b.Open(ctx(t)); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// quiet drops the driver's warnings (nodes going down on purpose).
var quiet = slog.New(slog.DiscardHandler)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func exec(t *testing.T, b *cassandra.Backend, cql string, params ...any) *tether.Result {
	t.Helper()
	r, err := b.Exec(ctx(t), tether.Statement{SQL: cql, Params: params})
	if err != nil {
		t.Fatalf("exec %q: %v", cql, err)
	}
	return r
}

func query(t *testing.T, b *cassandra.Backend, cql string, params ...any) *tether.Result {
	t.Helper()
	r, err := b.Query(ctx(t), tether.Statement{SQL: cql, Params: params})
	if err != nil {
		t.Fatalf("query %q: %v", cql, err)
	}
	return r
}

// createTable creates a table unique to this run from a definition with %s
// for its name, and drops it when the test ends.
func createTable(t *testing.T, b *cassandra.Backend, prefix, def string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), tableSeq.Add(1))
	exec(t, b, fmt.Sprintf(def, name))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.Exec(ctx, tether.Statement{SQL: "DROP TABLE IF EXISTS " + name})
	})
	return name
}

func code(err error) tether.Code {
	if err == nil {
		return ""
	}
	return tether.AsError(err).Code
}

func wantCode(t *testing.T, what string, err error, want tether.Code) *tether.Error {
	t.Helper()
	if code(err) != want {
		t.Fatalf("%s: got %v (code %q), want code %q", what, err, code(err), want)
	}
	return tether.AsError(err)
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestBackend_Open(t *testing.T) {
	t.Run("Version", func(t *testing.T) {
		b := open(t, "")
		r := query(t, b, "SELECT release_version FROM system.local")
		if len(r.Rows) != 1 || !strings.HasPrefix(r.Rows[0][0].(string), "5.") {
			t.Fatalf("release_version: %v", r.Rows)
		}
		if s := b.Stats(); s.Open < 1 {
			t.Fatalf("stats after open: %+v", s)
		}
	})

	t.Run("DeadHost", func(t *testing.T) {
		b, err := cassandra.New(config(dsn(deadAddr(t), keyspace, "")))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = b.Open(ctx(t))
		e := wantCode(t, "open against a dead host", err, tether.CodeUnavailable)
		if !errors.Is(err, tether.ErrUnavailable) || !e.Retry {
			t.Fatalf("open against a dead host: %#v, want a retryable error wrapping ErrUnavailable", e)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("open against a dead host took %s", d)
		}
	})

	t.Run("OpenWithinContext", func(t *testing.T) {
		// A host that accepts TCP but never answers: Open gives up when ctx ends.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		b, err := cassandra.New(config(dsn(l.Addr().String(), keyspace, "")))
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = b.Open(c)
		wantCode(t, "open against a silent host", err, tether.CodeUnavailable)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("open against a silent host took %s", d)
		}
	})

	t.Run("BadPassword", func(t *testing.T) {
		h := host(t)
		b, err := cassandra.New(config(fmt.Sprintf("cassandra://cassandra:wrong@%s/%s", h, keyspace)))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Open(ctx(t))
		if e := wantCode(t, "wrong password", err, tether.CodeUnavailable); e.BackendCode != "256" {
			t.Fatalf("wrong password: backend code %q, want 256 (0x0100, bad credentials): %v", e.BackendCode, err)
		}
		if strings.Contains(err.Error(), "wrong") {
			t.Fatalf("the error shows the password: %v", err)
		}
	})

	t.Run("UnknownKeyspace", func(t *testing.T) {
		b, err := cassandra.New(config(dsn(host(t), "no_such_keyspace", "")))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Open(ctx(t))
		if err == nil {
			b.Close(context.Background())
			t.Fatal("open with an unknown keyspace succeeded")
		}
		wantCode(t, "open with an unknown keyspace", err, tether.CodeUnavailable)
	})

	t.Run("BadDSN", func(t *testing.T) {
		for _, d := range []string{
			"mysql://localhost/x",
			"cassandra:///ks",
			"cassandra://h/ks?consistency=MOST",
			"cassandra://h/ks?colour=blue",
			"cassandra://h/ks?timeout=-1s",
			"cassandra://h:99999/ks",
			"cassandra://h/bad-keyspace",
			"cassandra://u:secret@h/ks?page_size=0",
		} {
			_, err := cassandra.New(config(d))
			if err == nil {
				t.Errorf("New(%q) succeeded", d)
				continue
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("New(%q): the error shows the password: %v", d, err)
			}
		}
	})
}

// TestBackend_Values reads every CQL type back through the value mapping, and
// binds the loosely typed values a PHP client sends.
func TestBackend_Values(t *testing.T) {
	b := open(t, "")
	exec(t, b, "CREATE TYPE IF NOT EXISTS address (street text, zip int)")
	tbl := createTable(t, b, "vals", `CREATE TABLE %s (k int PRIMARY KEY,
		t text, a ascii, vc varchar, bl blob, i int, bi bigint, si smallint, ti tinyint, vi varint, big varint,
		f float, d double, dec decimal, bo boolean, ts timestamp, dt date, tm time, u uuid, tu timeuuid,
		ip inet, ip6 inet, du duration, cnt_l list<int>, s set<text>, m map<text, int>, mi map<int, blob>,
		tup tuple<int, text>, fl frozen<list<blob>>, ad frozen<address>, vec vector<float, 3>,
		nest list<frozen<map<text, frozen<list<int>>>>>, tup2 tuple<int, text>)`)
	exec(t, b, "INSERT INTO "+tbl+` (k, t, a, vc, bl, i, bi, si, ti, vi, big, f, d, dec, bo, ts, dt, tm, u, tu, ip, ip6, du,
		cnt_l, s, m, mi, tup, fl, ad, vec, nest, tup2) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
		fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?), fromJson(?))`,
		int64(1), "héllo", "ascii", "", []byte{0, 1, 2, 255}, int64(-2147483648), int64(9007199254740993), int64(-32768),
		int64(127), int64(42), "123456789012345678901234567890", 1.1, 2.5e-300, "12.50", true,
		"2024-05-01T10:20:30.123Z", "2024-02-29", "13:14:15.000000016", "5b6962dd-3f90-4c93-8f61-eabfa4a803e2",
		"d2177dd0-eaa2-11de-a572-001b779c76e3", "192.168.0.1", "::1", "P1Y2M3DT4H5M6.007S",
		"[3, 1, 2]", `["b", "a"]`, `{"x": 1, "a": 2}`, `{"10": "0x00ff", "2": "0x"}`, `[7, "seven"]`,
		`["0xcafe", "0x"]`, `{"street": "Main \"St\"", "zip": 12345}`, "[1.5, -2, 0.1]",
		`[{"z": [1, 2]}, {"a": []}]`, `[null, "x"]`)

	r := query(t, b, "SELECT * FROM "+tbl+" WHERE k = ?", int64(1))
	if len(r.Rows) != 1 {
		t.Fatalf("rows: %v", r.Rows)
	}
	want := map[string]any{
		"k": int64(1), "t": "héllo", "a": "ascii", "vc": "", "bl": []byte{0, 1, 2, 255},
		"i": int64(-2147483648), "bi": int64(9007199254740993), "si": int64(-32768), "ti": int64(127),
		"vi": int64(42), "big": "123456789012345678901234567890",
		"f": 1.1, "d": 2.5e-300, "dec": "12.50", "bo": true,
		"ts": "2024-05-01T10:20:30.123Z", "dt": "2024-02-29", "tm": "13:14:15.000000016",
		"u": "5b6962dd-3f90-4c93-8f61-eabfa4a803e2", "tu": "d2177dd0-eaa2-11de-a572-001b779c76e3",
		"ip": "192.168.0.1", "ip6": "::1", "du": "P1Y2M3DT4H5M6.007S",
		"cnt_l": "[3,1,2]", "s": `["a","b"]`, "m": `{"a":2,"x":1}`, "mi": `{"2":"0x","10":"0x00ff"}`,
		"tup": `[7,"seven"]`, "fl": `["0xcafe","0x"]`, "ad": `{"street":"Main \"St\"","zip":12345}`,
		"vec": "[1.5,-2,0.1]", "nest": `[{"z":[1,2]},{"a":[]}]`, "tup2": `[null,"x"]`,
	}
	checkRow(t, r, r.Rows[0], want)

	// Everything but the key null: every value reads nil.
	exec(t, b, "INSERT INTO "+tbl+" (k) VALUES (?)", int64(2))
	r = query(t, b, "SELECT * FROM "+tbl+" WHERE k = ?", int64(2))
	for i, v := range r.Rows[0] {
		if r.Columns[i] != "k" && v != nil {
			t.Errorf("column %s of an empty row: %#v, want nil", r.Columns[i], v)
		}
	}

	// What a PHP client sends: ints for text, strings for numbers and blobs,
	// 1 for true, milliseconds for a timestamp, floats for a decimal.
	exec(t, b, "INSERT INTO "+tbl+" (k, t, bl, i, bo, ts, dec, d, f, vi) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		"3", int64(77), "bin\x00ary", "-5", int64(1), int64(1714558830123), 0.1, int64(3), "2.5", uint64(1<<63))
	r = query(t, b, "SELECT k, t, bl, i, bo, ts, dec, d, f, vi FROM "+tbl+" WHERE k = ?", int64(3))
	checkRow(t, r, r.Rows[0], map[string]any{"k": int64(3), "t": "77", "bl": []byte("bin\x00ary"), "i": int64(-5),
		"bo": true, "ts": "2024-05-01T10:20:30.123Z", "dec": "0.1", "d": 3.0, "f": 2.5, "vi": "9223372036854775808"})

	// An empty string and an empty blob are values, not nulls.
	exec(t, b, "INSERT INTO "+tbl+" (k, t, bl) VALUES (?, ?, ?)", int64(4), "", []byte{})
	r = query(t, b, "SELECT t, bl FROM "+tbl+" WHERE k = ?", int64(4))
	if r.Rows[0][0] != "" || r.Rows[0][1] == nil || len(r.Rows[0][1].([]byte)) != 0 {
		t.Fatalf("empty values: %#v", r.Rows[0])
	}

	t.Run("BadValues", func(t *testing.T) {
		for _, c := range []struct {
			col string
			v   any
		}{
			{"i", "twelve"}, {"i", int64(1) << 40}, {"ti", int64(128)}, {"bo", "maybe"}, {"u", "not-a-uuid"},
			{"ts", "yesterday"}, {"dt", "2024-13-01"}, {"tm", "25:00:00"}, {"ip", "999.1.1.1"}, {"dec", "1.2.3"},
			{"f", 1e300}, {"cnt_l", "[1,2]"}, {"bl", int64(5)}, {"i", 1.5},
		} {
			_, err := b.Exec(ctx(t), tether.Statement{SQL: "INSERT INTO " + tbl + " (k, " + c.col + ") VALUES (?, ?)",
				Params: []any{int64(9), c.v}})
			wantCode(t, fmt.Sprintf("%s = %#v", c.col, c.v), err, tether.CodeBadRequest)
		}
	})
}

func checkRow(t *testing.T, r *tether.Result, row []any, want map[string]any) {
	t.Helper()
	got := map[string]any{}
	for i, c := range r.Columns {
		got[c] = row[i]
	}
	for c, w := range want {
		g, ok := got[c]
		if !ok {
			t.Errorf("no column %s in %v", c, r.Columns)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("column %s: got %#v, want %#v", c, g, w)
		}
	}
}

// TestBackend_Exec runs the statements that are not plain reads and writes:
// conditional (lightweight transaction) writes, counters, batches, TTLs.
func TestBackend_Exec(t *testing.T) {
	b := open(t, "")
	tbl := createTable(t, b, "lwt", "CREATE TABLE %s (k text PRIMARY KEY, v text)")
	r := exec(t, b, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?) IF NOT EXISTS", "a", "1")
	if r.Affected != 1 || r.Columns[0] != "[applied]" || r.Rows[0][0] != true {
		t.Fatalf("first conditional insert: %+v", r)
	}
	r = exec(t, b, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?) IF NOT EXISTS", "a", "2")
	if r.Affected != 0 || r.Rows[0][0] != false {
		t.Fatalf("second conditional insert: %+v", r)
	}
	r = exec(t, b, "UPDATE "+tbl+" SET v = ? WHERE k = ? IF v = ?", "3", "a", "1")
	if r.Affected != 1 {
		t.Fatalf("conditional update: %+v", r)
	}
	if r := exec(t, b, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?)", "b", "x"); r.Affected != 0 || len(r.Columns) != 0 {
		t.Fatalf("plain insert: %+v", r)
	}

	cnt := createTable(t, b, "cnt", "CREATE TABLE %s (k text PRIMARY KEY, n counter)")
	for i := 0; i < 3; i++ {
		exec(t, b, "UPDATE "+cnt+" SET n = n + ? WHERE k = ?", int64(5), "c")
	}
	if r := query(t, b, "SELECT n FROM "+cnt+" WHERE k = ?", "c"); r.Rows[0][0] != int64(15) {
		t.Fatalf("counter: %v", r.Rows)
	}

	exec(t, b, "BEGIN BATCH INSERT INTO "+tbl+" (k, v) VALUES (?, ?); INSERT INTO "+tbl+" (k, v) VALUES (?, ?) APPLY BATCH", "c", "1", "d", "2")
	exec(t, b, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?) USING TTL ?", "e", "gone soon", int64(3600))
	if r := query(t, b, "SELECT k, TTL(v) FROM "+tbl+" WHERE k IN (?, ?, ?)", "c", "d", "e"); len(r.Rows) != 3 || r.Rows[2][1] == nil {
		t.Fatalf("batch and TTL: %v", r.Rows)
	}
}

func TestBackend_Paging(t *testing.T) {
	b := open(t, "")
	tbl := createTable(t, b, "pages", "CREATE TABLE %s (p text, c int, v text, PRIMARY KEY (p, c))")
	for i := 0; i < 25; i++ {
		exec(t, b, "INSERT INTO "+tbl+" (p, c, v) VALUES (?, ?, ?)", "p", int64(i), fmt.Sprint("v", i))
	}
	sel := "SELECT c FROM " + tbl + " WHERE p = ?"
	var seen []int64
	var cursor []byte
	var sizes []int
	for page := 0; page < 10; page++ {
		r, err := b.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{"p"}, PageSize: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(r.Rows))
		for _, row := range r.Rows {
			seen = append(seen, row[0].(int64))
		}
		if r.Cursor == nil {
			break
		}
		cursor = r.Cursor
	}
	if !reflect.DeepEqual(sizes, []int{10, 10, 5}) || len(seen) != 25 || seen[0] != 0 || seen[24] != 24 {
		t.Fatalf("pages of %v rows: %v", sizes, seen)
	}

	// Without a page size: the whole result (under page_size), no cursor.
	r := query(t, b, sel, "p")
	if len(r.Rows) != 25 || r.Cursor != nil {
		t.Fatalf("unpaged: %d rows, cursor %v", len(r.Rows), r.Cursor)
	}
	// page_size in the DSN is the default.
	small := open(t, "page_size=20")
	if r := query(t, small, sel, "p"); len(r.Rows) != 20 || r.Cursor == nil {
		t.Fatalf("page_size=20: %d rows, cursor %v", len(r.Rows), r.Cursor)
	}

	// A cursor belongs to its statement.
	first, _ := b.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{"p"}, PageSize: 10})
	_, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT v FROM " + tbl + " WHERE p = ?", Params: []any{"p"}, PageSize: 10, Cursor: first.Cursor})
	wantCode(t, "a cursor of another statement", err, tether.CodeBadRequest)
	_, err = b.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{"p"}, PageSize: 10, Cursor: []byte("garbage")})
	wantCode(t, "a forged cursor", err, tether.CodeBadRequest)
	// A tampered paging state is Cassandra's to refuse; it must come back typed.
	bad := append([]byte(nil), first.Cursor...)
	for i := 5; i < len(bad); i++ {
		bad[i] ^= 0x5a
	}
	if _, err = b.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{"p"}, PageSize: 10, Cursor: bad}); err != nil {
		if c := code(err); c != tether.CodeBadRequest && c != tether.CodeBackendError {
			t.Fatalf("a tampered cursor: %v (%s)", err, c)
		}
	}
}

func TestBackend_Consistency(t *testing.T) {
	one := open(t, "consistency=ONE")
	quorum := open(t, "consistency=QUORUM")
	all := open(t, "consistency=ALL")
	tbl := createTable(t, one, "cons", "CREATE TABLE %s (k text PRIMARY KEY, v text)")
	for i, w := range []*cassandra.Backend{one, quorum, all} {
		k := fmt.Sprint("k", i)
		exec(t, w, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?)", k, "v")
		for _, r := range []*cassandra.Backend{one, quorum, all} {
			if res := query(t, r, "SELECT v FROM "+tbl+" WHERE k = ?", k); len(res.Rows) != 1 || res.Rows[0][0] != "v" {
				t.Fatalf("write %d, read: %v", i, res.Rows)
			}
		}
	}

	// Replication factor 3 on one node: ONE works, QUORUM cannot be met.
	ks := keyspace + "_rf3"
	rf3one, rf3quorum := openDSN(t, dsn(host(t), ks, "consistency=ONE")), openDSN(t, dsn(host(t), ks, "consistency=QUORUM"))
	tbl3 := createTable(t, rf3one, "rf3", "CREATE TABLE %s (k text PRIMARY KEY, v text)")
	exec(t, rf3one, "INSERT INTO "+tbl3+" (k, v) VALUES (?, ?)", "a", "b")
	_, err := rf3quorum.Exec(ctx(t), tether.Statement{SQL: "INSERT INTO " + tbl3 + " (k, v) VALUES (?, ?)", Params: []any{"a", "c"}})
	e := wantCode(t, "a QUORUM write with 1 of 3 replicas", err, tether.CodeUnavailable)
	if e.BackendCode != "4096" || !e.Retry || !errors.Is(err, tether.ErrUnavailable) {
		t.Fatalf("a QUORUM write with 1 of 3 replicas: %#v, want backend code 4096 (0x1000), retryable", e)
	}
	_, err = rf3quorum.Get(ctx(t), tether.KeyRequest{Table: tbl3, Key: []any{"a"}})
	wantCode(t, "a QUORUM read with 1 of 3 replicas", err, tether.CodeUnavailable)
}

// TestBackend_Seed runs the seed experiment's two reads (E1): phpcassa's
// get('a') on column family c1, and get_super_column('a', 'b1') on the super
// column family s1, on their CQL tables.
func TestBackend_Seed(t *testing.T) {
	b := open(t, "")
	c1 := createTable(t, b, "c1", "CREATE TABLE %s (key text, column1 text, value blob, PRIMARY KEY (key, column1))")
	s1 := createTable(t, b, "s1", "CREATE TABLE %s (key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column))")
	for _, r := range [][]any{{"a", "col1", "v1"}, {"a", "col2", "v2"}, {"a", "col3", "v3"}, {"b", "col1", "other"}} {
		if _, err := b.Put(ctx(t), tether.KeyRequest{Table: c1, Row: map[string]any{"key": r[0], "column1": r[1], "value": []byte(r[2].(string))}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][]string{{"a", "b1", "x", "1"}, {"a", "b1", "y", "2"}, {"a", "b2", "x", "3"}, {"b", "b1", "x", "4"}} {
		exec(t, b, "INSERT INTO "+s1+" (key, super_column, column, value) VALUES (?, ?, ?, ?)", r[0], r[1], r[2], []byte(r[3]))
	}

	// get('a'): the row is the partition.
	res, err := b.Scan(ctx(t), tether.KeyRequest{Table: c1, Prefix: []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Columns, []string{"key", "column1", "value"}) || len(res.Rows) != 3 ||
		res.Rows[0][1] != "col1" || !bytes.Equal(res.Rows[2][2].([]byte), []byte("v3")) || res.Cursor != nil {
		t.Fatalf("get('a'): %v %v cursor %v", res.Columns, res.Rows, res.Cursor)
	}
	// get_super_column('a', 'b1'): the partition's slice under one super column.
	res, err = b.Scan(ctx(t), tether.KeyRequest{Table: s1, Prefix: []any{"a", "b1"}, Columns: []string{"column", "value"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Rows[0][0] != "x" || !bytes.Equal(res.Rows[1][1].([]byte), []byte("2")) {
		t.Fatalf("get_super_column('a', 'b1'): %v %v", res.Columns, res.Rows)
	}
	// The same in CQL.
	q := query(t, b, "SELECT column, value FROM "+s1+" WHERE key = ? AND super_column = ?", "a", "b1")
	if !reflect.DeepEqual(q.Rows, res.Rows) {
		t.Fatalf("CQL %v, scan %v", q.Rows, res.Rows)
	}
	// A slice of super columns: from b1 (inclusive) to b2 (exclusive).
	res, err = b.Scan(ctx(t), tether.KeyRequest{Table: s1, Start: []any{"a", "b1"}, End: []any{"a", "b2"}})
	if err != nil || len(res.Rows) != 2 {
		t.Fatalf("slice [b1, b2): %v %v", res, err)
	}
	res, err = b.Scan(ctx(t), tether.KeyRequest{Table: s1, Start: []any{"a", "b1", "y"}, End: []any{"a"}})
	if err != nil || len(res.Rows) != 2 || res.Rows[0][2] != "y" || res.Rows[1][1] != "b2" {
		t.Fatalf("slice from (b1, y): %v %v", res, err)
	}
}

func TestBackend_KeyValue(t *testing.T) {
	b := open(t, "")
	backendtest.RunKeyValue(t, &backendtest.KVSuite{
		Backend: b,
		CreateTable: func(t *testing.T, name string) {
			exec(t, b, "CREATE TABLE "+name+" (id text PRIMARY KEY, a text, b text)")
			t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE IF EXISTS " + name}) })
		},
		Key: "id", A: "a", B: "b",
		CreateCompositeTable: func(t *testing.T, name string) {
			exec(t, b, "CREATE TABLE "+name+" (p text, c text, a text, PRIMARY KEY (p, c))")
			t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE IF EXISTS " + name}) })
		},
		P: "p", C: "c", PartitionScan: true,
	})

	t.Run("Cassandra", func(t *testing.T) {
		tbl := createTable(t, b, "kvx", `CREATE TABLE %s (p int, c1 text, c2 int, v text, tags set<text>, n map<text, int>,
			PRIMARY KEY (p, c1, c2)) WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)`)
		for _, c1 := range []string{"a", "b"} {
			for c2 := 1; c2 <= 3; c2++ {
				row := map[string]any{"p": int64(1), "c1": c1, "c2": int64(c2), "v": fmt.Sprint(c1, c2)}
				if _, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: row}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Clustering order, DESC on c2.
		res, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Prefix: []any{"1"}, Columns: []string{"v"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range res.Rows {
			got = append(got, r[0].(string))
		}
		if strings.Join(got, ",") != "a3,a2,a1,b3,b2,b1" {
			t.Fatalf("scan order: %v", got)
		}
		// Scan pages by limit and cursor across a prefix with a clustering value.
		var pages [][]string
		var cursor []byte
		for i := 0; i < 5; i++ {
			res, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Prefix: []any{int64(1), "a"}, Columns: []string{"v"}, Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			var p []string
			for _, r := range res.Rows {
				p = append(p, r[0].(string))
			}
			pages = append(pages, p)
			if cursor = res.Cursor; cursor == nil {
				break
			}
		}
		if fmt.Sprint(pages) != "[[a3 a2] [a1] ]" && fmt.Sprint(pages) != "[[a3 a2] [a1]]" {
			t.Fatalf("pages: %q", pages)
		}

		// Collections through the key API: JSON text in, JSON text out; nil deletes a cell.
		key := map[string]any{"p": int64(2), "c1": "x", "c2": int64(0)}
		row := map[string]any{"tags": `["b", "a"]`, "n": `{"k": 1}`, "v": "text"}
		for k, v := range key {
			row[k] = v
		}
		if _, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: row}); err != nil {
			t.Fatal(err)
		}
		res, err = b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{int64(2), "x", int64(0)}, Columns: []string{"tags", "n", "v"}})
		if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != `["a","b"]` || res.Rows[0][1] != `{"k":1}` {
			t.Fatalf("get collections: %v %v", res, err)
		}
		if _, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"p": int64(2), "c1": "x", "c2": int64(0), "v": nil, "tags": nil}}); err != nil {
			t.Fatal(err)
		}
		res, _ = b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{int64(2), "x", int64(0)}, Columns: []string{"tags", "n", "v"}})
		if res.Rows[0][0] != nil || res.Rows[0][1] != `{"k":1}` || res.Rows[0][2] != nil {
			t.Fatalf("after putting nils: %v", res.Rows)
		}

		// MultiGet across partitions, with the key values as a PHP client may send them.
		res, err = b.MultiGet(ctx(t), tether.KeyRequest{Table: tbl, Keys: [][]any{{"1", "b", "2"}, {int64(3), "a", int64(1)}, {int64(1), "a", 1.0}}, Columns: []string{"v"}})
		if err != nil || len(res.Rows) != 3 || res.Rows[0][0] != "b2" || res.Rows[1] != nil || res.Rows[2][0] != "a1" {
			t.Fatalf("multi_get: %v %v", res, err)
		}

		// A table named with its keyspace, and in another case than it was created.
		res, err = b.Get(ctx(t), tether.KeyRequest{Table: keyspace + "." + strings.ToUpper(tbl), Key: []any{int64(1), "b", int64(3)}})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("get keyspace.TABLE: %v %v", res, err)
		}

		// A column added after the schema was cached is found.
		exec(t, b, "ALTER TABLE "+tbl+" ADD extra text")
		if _, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"p": int64(1), "c1": "a", "c2": int64(1), "extra": "new"}}); err != nil {
			t.Fatalf("put into a new column: %v", err)
		}
		res, err = b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{int64(1), "a", int64(1)}, Columns: []string{"extra"}})
		if err != nil || res.Rows[0][0] != "new" {
			t.Fatalf("get a new column: %v %v", res, err)
		}
	})
}

func TestBackend_Errors(t *testing.T) {
	b := open(t, "")
	tbl := createTable(t, b, "errs", "CREATE TABLE %s (p text, c int, v blob, PRIMARY KEY (p, c))")

	t.Run("CQL", func(t *testing.T) {
		for _, c := range []struct {
			cql    string
			params []any
			want   tether.Code
			bcode  string
		}{
			{"SELECT * FROM no_such_table", nil, tether.CodeBackendError, "8704"},
			{"SELECT * FROM no_such_keyspace.t", nil, tether.CodeBackendError, "8704"},
			{"SELECT nope FROM " + tbl, nil, tether.CodeBackendError, "8704"},
			{"SELEKT * FROM " + tbl, nil, tether.CodeBackendError, "8192"},
			{"CREATE TABLE " + tbl + " (k int PRIMARY KEY)", nil, tether.CodeBackendError, "9216"},
			{"SELECT * FROM " + tbl + " WHERE p = ?", nil, tether.CodeBadRequest, ""},
			{"SELECT * FROM " + tbl + " WHERE p = ?", []any{"a", "b"}, tether.CodeBadRequest, ""},
			{"SELECT * FROM " + tbl + " WHERE p = ? AND c = ?", []any{"a", "one"}, tether.CodeBadRequest, ""},
			{"TRUNCATE " + tbl + " -- ?", []any{"a"}, tether.CodeBadRequest, ""},
			{"USE system", nil, tether.CodeBadRequest, ""},
		} {
			_, err := b.Exec(ctx(t), tether.Statement{SQL: c.cql, Params: c.params})
			if e := wantCode(t, c.cql, err, c.want); e.BackendCode != c.bcode {
				t.Errorf("%s: backend code %q, want %q", c.cql, e.BackendCode, c.bcode)
			}
		}
	})

	t.Run("KeyAPI", func(t *testing.T) {
		for _, c := range []struct {
			what string
			call func() error
			want tether.Code
		}{
			{"unknown table", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: "no_such_table", Key: []any{"a", int64(1)}})
				return err
			}, tether.CodeUnknownTable},
			{"unknown keyspace", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: "no_such_keyspace." + tbl, Key: []any{"a", int64(1)}})
				return err
			}, tether.CodeUnknownTable},
			{"no keyspace", func() error {
				nb := openDSN(t, dsn(host(t), "", ""))
				_, err := nb.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a", int64(1)}})
				return err
			}, tether.CodeBadRequest},
			{"key too short", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a"}})
				return err
			}, tether.CodeBadRequest},
			{"key too long", func() error {
				_, err := b.Delete(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a", int64(1), "x"}})
				return err
			}, tether.CodeBadRequest},
			{"key of the wrong type", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a", "one"}})
				return err
			}, tether.CodeBadRequest},
			{"null key", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{nil, int64(1)}})
				return err
			}, tether.CodeBadRequest},
			{"value of the wrong type", func() error {
				_, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"p": "a", "c": int64(1), "v": true}})
				return err
			}, tether.CodeBadRequest},
			{"unknown column", func() error {
				_, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a", int64(1)}, Columns: []string{"nope"}})
				return err
			}, tether.CodeBadRequest},
			{"scan across partitions", func() error {
				_, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Limit: 10})
				return err
			}, tether.CodeUnsupported},
			{"scan by partition range", func() error {
				_, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Start: []any{"a"}, End: []any{"b"}})
				return err
			}, tether.CodeUnsupported},
			{"scan prefix longer than the key", func() error {
				_, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Prefix: []any{"a", int64(1), "x"}})
				return err
			}, tether.CodeBadRequest},
			{"scan limit too large", func() error {
				_, err := b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Prefix: []any{"a"}, Limit: 1 << 20})
				return err
			}, tether.CodeBadRequest},
		} {
			wantCode(t, c.what, c.call(), c.want)
		}
	})

	t.Run("TooLarge", func(t *testing.T) {
		small := open(t, "max_value_bytes=1024")
		_, err := small.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"p": "a", "c": int64(1), "v": make([]byte, 1025)}})
		wantCode(t, "a value over max_value_bytes", err, tether.CodeTooLarge)
		if _, err := small.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"p": "a", "c": int64(1), "v": make([]byte, 1024)}}); err != nil {
			t.Fatalf("a value of max_value_bytes: %v", err)
		}
		// The default limit is Cassandra's own max_mutation_size (16 MiB).
		_, err = b.Exec(ctx(t), tether.Statement{SQL: "INSERT INTO " + tbl + " (p, c, v) VALUES (?, ?, ?)", Params: []any{"a", int64(2), make([]byte, 16<<20+1)}})
		wantCode(t, "a value over 16 MiB", err, tether.CodeTooLarge)
		// Under the limit value by value, over it in all: Cassandra refuses the request
		// (native_transport_max_message_size, about 12.8 MiB, before max_mutation_size).
		batch := "BEGIN UNLOGGED BATCH INSERT INTO " + tbl + " (p, c, v) VALUES ('big', 1, ?); INSERT INTO " + tbl + " (p, c, v) VALUES ('big', 2, ?); APPLY BATCH"
		_, err = b.Exec(ctx(t), tether.Statement{SQL: batch, Params: []any{make([]byte, 9<<20), make([]byte, 9<<20)}})
		e := wantCode(t, "a request over Cassandra's size limits", err, tether.CodeTooLarge)
		t.Logf("an oversized request: %v", e)
		// A result over MaxBytes.
		for i := 0; i < 10; i++ {
			exec(t, b, "INSERT INTO "+tbl+" (p, c, v) VALUES (?, ?, ?)", "r", int64(i), make([]byte, 100))
		}
		_, err = b.Query(ctx(t), tether.Statement{SQL: "SELECT * FROM " + tbl + " WHERE p = ?", Params: []any{"r"}, MaxBytes: 500})
		wantCode(t, "a result over MaxBytes", err, tether.CodeTooLarge)
		_, err = b.Scan(ctx(t), tether.KeyRequest{Table: tbl, Prefix: []any{"r"}, MaxBytes: 500})
		wantCode(t, "a scan over MaxBytes", err, tether.CodeTooLarge)
	})
}

// TestBackend_DownAndBack puts a TCP proxy between the driver and the node:
// stopping it is the node going down, starting it again the node coming back.
func TestBackend_DownAndBack(t *testing.T) {
	h := host(t)
	open(t, "") // creates the keyspace
	proxy := backendtest.NewProxy(t, h)
	// discovery=false: the driver must not go around the proxy to the address
	// the node advertises.
	b := openDSN(t, dsn(proxy.Addr(), keyspace, "discovery=false&reconnect_interval=200ms"))
	tbl := createTable(t, b, "down", "CREATE TABLE %s (k text PRIMARY KEY, v text)")
	exec(t, b, "INSERT INTO "+tbl+" (k, v) VALUES (?, ?)", "a", "1")
	if _, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a"}}); err != nil {
		t.Fatal(err)
	}

	proxy.Stop()
	start := time.Now()
	var err error
	// The first request may race the driver noticing the closed connections.
	for i := 0; i < 50; i++ {
		if _, err = b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a"}}); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := wantCode(t, "a read while the node is down", err, tether.CodeUnavailable)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the node being down took %s to notice", d)
	}
	t.Logf("down: %v after %s", e, time.Since(start))
	// Every later request fails fast.
	start = time.Now()
	for i := 0; i < 20; i++ {
		_, err = b.Exec(ctx(t), tether.Statement{SQL: "INSERT INTO " + tbl + " (k, v) VALUES (?, ?)", Params: []any{"b", "2"}})
		wantCode(t, "a write while the node is down", err, tether.CodeUnavailable)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 requests to a down node took %s", d)
	}

	proxy.Start()
	start = time.Now()
	for {
		_, err = b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{"a"}})
		if err == nil {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the node came back, requests still fail after %s: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("service resumed %s after the node came back", time.Since(start))

	t.Run("OpenWhileDown", func(t *testing.T) {
		proxy.Stop()
		defer proxy.Start()
		b, err := cassandra.New(config(dsn(proxy.Addr(), keyspace, "discovery=false")))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = b.Open(ctx(t))
		wantCode(t, "open while the node is down", err, tether.CodeUnavailable)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("open while the node is down took %s", d)
		}
	})
}

// TestBackend_Prepared checks that parameters are bound to a prepared
// statement, never put into its text: Cassandra lists the statement, with its
// bind markers, in system.prepared_statements, and twenty executions with
// twenty values add no entry. (It may be listed twice: the driver prepares it
// once to learn its routing key and once to run it, in different keyspace
// contexts; both are cached and reused.)
func TestBackend_Prepared(t *testing.T) {
	b := open(t, "")
	tbl := createTable(t, b, "prep", "CREATE TABLE %s (k text PRIMARY KEY, v text)")
	sel := "SELECT v FROM " + tbl + " WHERE k = ?"
	count := func() int {
		n := 0
		for _, row := range query(t, b, "SELECT query_string FROM system.prepared_statements").Rows {
			if s, _ := row[0].(string); strings.Contains(s, tbl) {
				n++
			}
			if s, _ := row[0].(string); strings.Contains(s, "'v7'") {
				t.Fatalf("a parameter was put into a statement: %q", s)
			}
		}
		return n
	}
	query(t, b, sel, "first")
	before := count()
	for i := 0; i < 20; i++ {
		query(t, b, sel, fmt.Sprint("v", i))
	}
	if after := count(); before == 0 || after != before {
		t.Fatalf("%q: %d prepared statements after one execution, %d after twenty more", sel, before, after)
	}
}

func TestBackend_Concurrency(t *testing.T) {
	b := open(t, "")
	tbl := createTable(t, b, "conc", "CREATE TABLE %s (k text, c int, v text, PRIMARY KEY (k, c))")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprint("g", g)
			for i := 0; i < 20; i++ {
				if _, err := b.Put(ctx(t), tether.KeyRequest{Table: tbl, Row: map[string]any{"k": k, "c": int64(i), "v": "x"}}); err != nil {
					errs <- err
					return
				}
				if r, err := b.Get(ctx(t), tether.KeyRequest{Table: tbl, Key: []any{k, int64(i)}}); err != nil || len(r.Rows) != 1 {
					errs <- fmt.Errorf("get %s %d: %v %v", k, i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := b.Stats(); s.InUse != 0 {
		t.Fatalf("stats after the requests: %+v", s)
	}
}
