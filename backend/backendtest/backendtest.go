// Package backendtest is the suite every SQL backend must pass, run against the
// real database by each backend's tests (Litestream's RunWithReplicaClient).
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// Dialect tells the suite how to speak to one backend.
type Dialect struct {
	// Placeholder returns the n-th (1-based) parameter placeholder.
	Placeholder func(n int) string
	// Column types for the value-mapping test.
	BigInt, Float, Text, Blob, Decimal, Date, DateTime, Bool string
	// DecimalExact is false where the backend cannot keep decimal digits
	// (SQLite: NUMERIC affinity stores 12.50 as a float).
	DecimalExact bool
	// BoolIsInt is true where booleans are integers (MySQL TINYINT(1)).
	BoolIsInt bool
	// HasInsertID is false on PostgreSQL, which has no last insert id.
	HasInsertID bool
	// AutoID is the column definition of an auto-increment primary key.
	AutoID string
	// Sleep returns a statement that takes the given seconds.
	Sleep func(seconds int) string
	// SetSession changes a session setting; ReadSession reads it back as one
	// column, which reads SessionLeaked (formatted with %v) only where the
	// change is visible.
	SetSession, ReadSession, SessionLeaked string
	// CreateTemp creates a temporary table named tmp_leak.
	CreateTemp string
}

// SQLBackend is what the SQL suite exercises: a backend with a query
// language and transactions.
type SQLBackend interface {
	tether.Backend
	tether.Querier
	tether.Transactor
}

// Suite describes the backend under test.
type Suite struct {
	Dialect Dialect
	// New returns an unopened backend with the given pool settings.
	New func(t *testing.T, cfg tether.BackendConfig) SQLBackend
	// Config returns the backend's config with default pool settings.
	Config func(t *testing.T) tether.BackendConfig
	// ProxiedConfig, when set, returns a config that reaches the backend
	// through addr (a Proxy), for the down-and-back tests.
	ProxiedConfig func(t *testing.T, addr string) (tether.BackendConfig, string)
	// KillConnections, when set, makes the server close every other session.
	KillConnections func(ctx context.Context, b SQLBackend) error
	// Hosts is how many servers the backend spreads over (a replicated one:
	// max_conns holds per host); 0 is one.
	Hosts int
}

// RequireEnv returns the environment variable key, skipping the test when it
// is unset, or failing it when TETHER_REQUIRE_BACKENDS is set (as the test
// command does, so that a missing database is never a silent pass).
func RequireEnv(t *testing.T, key string) string {
	v := os.Getenv(key)
	if v == "" {
		if os.Getenv("TETHER_REQUIRE_BACKENDS") != "" {
			t.Fatalf("%s is not set and TETHER_REQUIRE_BACKENDS is", key)
		}
		t.Skipf("%s not set", key)
	}
	return v
}

var tableSeq atomic.Int64

// table returns a table name unique to this test run.
func table(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), tableSeq.Add(1))
}

func (s *Suite) open(t *testing.T, tweak func(*tether.BackendConfig)) SQLBackend {
	t.Helper()
	cfg := s.Config(t)
	if tweak != nil {
		tweak(&cfg)
	}
	b := s.New(t, cfg)
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

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustExec(t *testing.T, b interface {
	Exec(context.Context, tether.Statement) (*tether.Result, error)
}, sql string, params ...any) *tether.Result {
	t.Helper()
	r, err := b.Exec(ctx(t), tether.Statement{SQL: sql, Params: params})
	if err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	return r
}

func mustQuery(t *testing.T, b interface {
	Query(context.Context, tether.Statement) (*tether.Result, error)
}, sql string, params ...any) *tether.Result {
	t.Helper()
	r, err := b.Query(ctx(t), tether.Statement{SQL: sql, Params: params})
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return r
}

func code(err error) tether.Code {
	if err == nil {
		return ""
	}
	return tether.AsError(err).Code
}

// Run runs the whole suite.
func Run(t *testing.T, s *Suite) {
	d := s.Dialect
	p := d.Placeholder

	t.Run("QueryAndExec", func(t *testing.T) {
		b := s.open(t, nil)
		tbl := table("qe")
		mustExec(t, b, fmt.Sprintf("CREATE TABLE %s (id %s, name %s)", tbl, d.AutoID, d.Text))
		t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + tbl}) })
		r1 := mustExec(t, b, fmt.Sprintf("INSERT INTO %s (name) VALUES (%s)", tbl, p(1)), "ada")
		r2 := mustExec(t, b, fmt.Sprintf("INSERT INTO %s (name) VALUES (%s)", tbl, p(1)), "bob")
		if r1.Affected != 1 || r2.Affected != 1 {
			t.Fatalf("affected %d, %d", r1.Affected, r2.Affected)
		}
		if d.HasInsertID && (r1.InsertID == 0 || r2.InsertID <= r1.InsertID) {
			t.Fatalf("insert ids %d, %d", r1.InsertID, r2.InsertID)
		}
		if !d.HasInsertID && r1.InsertID != 0 {
			t.Fatalf("insert id %d on a backend without one", r1.InsertID)
		}
		res := mustQuery(t, b, fmt.Sprintf("SELECT id, name FROM %s WHERE name <> %s ORDER BY id", tbl, p(1)), "nobody")
		if strings.Join(res.Columns, ",") != "id,name" || len(res.Rows) != 2 || res.Rows[1][1] != "bob" {
			t.Fatalf("got %v %v", res.Columns, res.Rows)
		}
		up := mustExec(t, b, fmt.Sprintf("UPDATE %s SET name = %s", tbl, p(1)), "x")
		if up.Affected != 2 {
			t.Fatalf("update affected %d", up.Affected)
		}
		empty := mustQuery(t, b, fmt.Sprintf("SELECT id FROM %s WHERE id < 0", tbl))
		if len(empty.Columns) != 1 || empty.Rows == nil || len(empty.Rows) != 0 {
			t.Fatalf("empty result %#v", empty)
		}
	})

	t.Run("Values", func(t *testing.T) {
		b := s.open(t, nil)
		tbl := table("vals")
		mustExec(t, b, fmt.Sprintf("CREATE TABLE %s (v_i %s, v_f %s, v_s %s, v_bl %s, v_dec %s, v_d %s, v_dt %s, v_bo %s, v_n %s)",
			tbl, d.BigInt, d.Float, d.Text, d.Blob, d.Decimal, d.Date, d.DateTime, d.Bool, d.Text))
		t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + tbl}) })
		blob := make([]byte, 256)
		for i := range blob {
			blob[i] = byte(i)
		}
		ins := fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", tbl, p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9))
		mustExec(t, b, ins, int64(math.MaxInt64), 1.25, "héllo ✓", blob, "12345.67", "2024-02-29", "2024-02-29 23:59:58", true, nil)
		mustExec(t, b, ins, int64(math.MinInt64), -0.5, "", []byte{}, "-0.01", "1970-01-01", "1999-12-31 00:00:00", false, nil)
		res := mustQuery(t, b, fmt.Sprintf("SELECT v_i, v_f, v_s, v_bl, v_dec, v_d, v_dt, v_bo, v_n FROM %s ORDER BY v_i DESC", tbl))
		r := res.Rows[0]
		if r[0] != int64(math.MaxInt64) || res.Rows[1][0] != int64(math.MinInt64) {
			t.Errorf("int64 extremes: %#v %#v", r[0], res.Rows[1][0])
		}
		if r[1] != 1.25 || res.Rows[1][1] != -0.5 {
			t.Errorf("floats: %#v %#v", r[1], res.Rows[1][1])
		}
		if r[2] != "héllo ✓" || res.Rows[1][2] != "" {
			t.Errorf("text: %#v %#v", r[2], res.Rows[1][2])
		}
		if got, ok := r[3].([]byte); !ok || !bytes.Equal(got, blob) {
			t.Errorf("blob: %#v", r[3])
		}
		if got, ok := res.Rows[1][3].([]byte); !ok || len(got) != 0 {
			t.Errorf("empty blob: %#v", res.Rows[1][3])
		}
		if d.DecimalExact {
			if r[4] != "12345.67" || res.Rows[1][4] != "-0.01" {
				t.Errorf("decimals: %#v %#v", r[4], res.Rows[1][4])
			}
		}
		if r[5] != "2024-02-29" || res.Rows[1][5] != "1970-01-01" {
			t.Errorf("dates: %#v %#v", r[5], res.Rows[1][5])
		}
		if r[6] != "2024-02-29T23:59:58" || res.Rows[1][6] != "1999-12-31T00:00:00" {
			t.Errorf("datetimes: %#v %#v", r[6], res.Rows[1][6])
		}
		wantTrue, wantFalse := any(true), any(false)
		if d.BoolIsInt {
			wantTrue, wantFalse = int64(1), int64(0)
		}
		if r[7] != wantTrue || res.Rows[1][7] != wantFalse {
			t.Errorf("booleans: %#v %#v", r[7], res.Rows[1][7])
		}
		if r[8] != nil {
			t.Errorf("null: %#v", r[8])
		}
	})

	t.Run("LooseParams", func(t *testing.T) {
		// What a PHP client sends: ext-msgpack has no binary type, so binary
		// data arrives as a string, valid UTF-8 or not; ids arrive as ints or
		// numeric strings whatever the column type.
		b := s.open(t, nil)
		tbl := table("loose")
		mustExec(t, b, fmt.Sprintf("CREATE TABLE %s (k %s, v_bl %s, v_s %s, v_i %s)", tbl, d.BigInt, d.Blob, d.Text, d.BigInt))
		t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + tbl}) })
		binaries := []string{"\x00\xff\\x41'\"", "\x00", "a\\b", "\\x41", "plain", "caf\u00e9", "\xff"}
		texts := []string{"back\\slash", `{"a":"x\"y\\z\n"}`, "it's", ""}
		for i, bin := range binaries {
			text := texts[i%len(texts)]
			mustExec(t, b, fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s)", tbl, p(1), p(2), p(3), p(4)), int64(i), bin, text, "17")
			r := mustQuery(t, b, fmt.Sprintf("SELECT v_bl, v_s, v_i FROM %s WHERE k = %s AND v_i = %s", tbl, p(1), p(2)), fmt.Sprint(i), "17").Rows
			if len(r) != 1 {
				t.Fatalf("value %d: rows %v", i, r)
			}
			if got := fmt.Sprintf("%s", r[0][0]); got != bin {
				t.Errorf("binary string %q came back as %q", bin, got)
			}
			if r[0][1] != text || r[0][2] != int64(17) {
				t.Errorf("text %q came back as %#v, numeric string as %#v", text, r[0][1], r[0][2])
			}
		}
		mustExec(t, b, fmt.Sprintf("UPDATE %s SET v_s = %s", tbl, p(1)), int64(42))
		if got := mustQuery(t, b, fmt.Sprintf("SELECT v_s FROM %s WHERE k = 0", tbl)).Rows[0][0]; got != "42" {
			t.Errorf("int bound to text: %#v", got)
		}
	})

	t.Run("KeyValue", func(t *testing.T) {
		b := s.open(t, nil)
		kv, ok := b.(tether.KeyValue)
		if !ok {
			t.Fatal("a SQL backend must implement the key API")
		}
		create := func(ddl string) func(t *testing.T, name string) {
			return func(t *testing.T, name string) {
				mustExec(t, b, fmt.Sprintf(ddl, name))
				t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + name}) })
			}
		}
		RunKeyValue(t, &KVSuite{
			Backend:     kv,
			CreateTable: create("CREATE TABLE %s (k VARCHAR(64) PRIMARY KEY, a TEXT, b TEXT)"),
			Key:         "k", A: "a", B: "b",
			CreateCompositeTable: create("CREATE TABLE %s (p VARCHAR(64), c VARCHAR(64), a TEXT, PRIMARY KEY (p, c))"),
			P:                    "p", C: "c",
		})
	})

	t.Run("KeyValueMixedCaseTable", func(t *testing.T) {
		// A table created with an unquoted mixed-case name: PostgreSQL folds
		// it to lower case, MySQL keeps it; the key API must find it and
		// query it by the name the catalog has, whichever case it is asked in.
		b := s.open(t, nil)
		kv := b.(tether.KeyValue)
		name := fmt.Sprintf("Mixed_Case_%d", tableSeq.Add(1))
		mustExec(t, b, fmt.Sprintf("CREATE TABLE %s (k VARCHAR(64) PRIMARY KEY, v %s)", name, d.Text))
		t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + name}) })
		if _, err := kv.Put(ctx(t), tether.KeyRequest{Table: name, Row: map[string]any{"k": "a", "v": "1"}}); err != nil {
			t.Fatalf("put into %s: %v", name, err)
		}
		r, err := kv.Get(ctx(t), tether.KeyRequest{Table: name, Key: []any{"a"}})
		if err != nil || len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][1]) != "1" {
			t.Errorf("get from %s: %v %v", name, r, err)
		}
		// In another case: found (names without case: PostgreSQL's
		// unquoted, SQLite's) or unknown_table (MySQL's, case-sensitive on
		// Linux), never a backend error from querying a name that is not.
		r, err = kv.Get(ctx(t), tether.KeyRequest{Table: strings.ToLower(name), Key: []any{"a"}})
		if err != nil && code(err) != tether.CodeUnknownTable || err == nil && len(r.Rows) != 1 {
			t.Errorf("get from %s (created %s): %v %v", strings.ToLower(name), name, r, err)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		b := s.open(t, nil)
		_, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT * FROM no_such_table_at_all"})
		if e := tether.AsError(err); e.Code != tether.CodeBackendError || e.BackendCode == "" || e.Message == "" {
			t.Fatalf("missing table: %#v", e)
		}
		_, err = b.Query(ctx(t), tether.Statement{SQL: "SELEKT 1"})
		if code(err) != tether.CodeBackendError {
			t.Fatalf("syntax error: %v", err)
		}
		_, err = b.Query(ctx(t), tether.Statement{SQL: "SELECT " + p(1), Params: []any{1, 2}})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("too many params: %v (%s)", err, code(err))
		}
		_, err = b.Query(ctx(t), tether.Statement{SQL: "SELECT " + p(1) + ", " + p(2), Params: []any{1}})
		if code(err) != tether.CodeBadRequest {
			t.Fatalf("too few params: %v (%s)", err, code(err))
		}
		// The pool is still healthy.
		if r := mustQuery(t, b, "SELECT 1"); len(r.Rows) != 1 {
			t.Fatal("no row after errors")
		}
	})

	t.Run("ResultLimit", func(t *testing.T) {
		b := s.open(t, nil)
		_, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT " + p(1), Params: []any{strings.Repeat("x", 5000)}, MaxBytes: 1000})
		if code(err) != tether.CodeTooLarge {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("Transactions", func(t *testing.T) {
		b := s.open(t, nil)
		tbl := table("tx")
		mustExec(t, b, fmt.Sprintf("CREATE TABLE %s (id %s, name %s)", tbl, d.AutoID, d.Text))
		t.Cleanup(func() { b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + tbl}) })
		ins := fmt.Sprintf("INSERT INTO %s (name) VALUES (%s)", tbl, p(1))
		count := func() any {
			return mustQuery(t, b, fmt.Sprintf("SELECT COUNT(*) FROM %s", tbl)).Rows[0][0]
		}

		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, ins, "committed")
		if got := mustQuery(t, tx, fmt.Sprintf("SELECT COUNT(*) FROM %s", tbl)).Rows[0][0]; got != int64(1) {
			t.Fatalf("inside the transaction: %v rows", got)
		}
		if err := tx.Commit(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != int64(1) {
			t.Fatalf("after commit: %v rows", got)
		}
		if err := tx.Rollback(ctx(t)); !errors.Is(err, tether.ErrTxDone) {
			t.Fatalf("rollback after commit: %v", err)
		}

		tx, err = b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, ins, "rolled back")
		if err := tx.Rollback(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != int64(1) {
			t.Fatalf("after rollback: %v rows", got)
		}

		// An error inside a transaction does not poison the pool.
		tx, _ = b.Begin(ctx(t))
		if _, err := tx.Query(ctx(t), tether.Statement{SQL: "SELECT * FROM no_such_table_at_all"}); code(err) != tether.CodeBackendError {
			t.Fatalf("error in tx: %v", err)
		}
		tx.Rollback(ctx(t))
		if got := count(); got != int64(1) {
			t.Fatalf("after failed tx: %v rows", got)
		}
	})

	t.Run("SessionStateDoesNotLeak", func(t *testing.T) {
		// One connection only, so every statement would share it if it were
		// returned to the pool dirty.
		b := s.open(t, func(c *tether.BackendConfig) { c.MaxConns, c.MinConns = 1, 1 })
		mustExec(t, b, d.SetSession)
		if got := fmt.Sprint(mustQuery(t, b, d.ReadSession).Rows[0][0]); got == d.SessionLeaked {
			t.Fatalf("session variable leaked to the next statement: %v", got)
		}
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, d.SetSession)
		if got := fmt.Sprint(mustQuery(t, tx, d.ReadSession).Rows[0][0]); got != d.SessionLeaked {
			t.Fatalf("inside its own transaction the variable must hold: %v", got)
		}
		tx.Commit(ctx(t))
		if got := fmt.Sprint(mustQuery(t, b, d.ReadSession).Rows[0][0]); got == d.SessionLeaked {
			t.Fatalf("session variable leaked out of a transaction: %v", got)
		}
		mustExec(t, b, d.CreateTemp)
		if _, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT * FROM tmp_leak"}); err == nil {
			t.Fatal("temporary table leaked to the next statement")
		}
	})

	t.Run("StatementCacheEviction", func(t *testing.T) {
		// Three statements through a cache of two: evicted statements are
		// closed and prepared again without a wrong or failed answer. (That
		// statements are reused is checked on the server, where it can be
		// seen: TestBackend_PreparesOnce in backend/mysql and backend/postgres.)
		b := s.open(t, func(c *tether.BackendConfig) { c.StmtCacheSize = 2 })
		for i := 0; i < 3; i++ {
			for _, q := range []string{"SELECT 1", "SELECT 2", "SELECT 3", "SELECT 1"} {
				if r := mustQuery(t, b, q); len(r.Rows) != 1 {
					t.Fatalf("%s: %v", q, r.Rows)
				}
			}
		}
	})

	t.Run("PoolBusy", func(t *testing.T) {
		b := s.open(t, func(c *tether.BackendConfig) {
			c.MaxConns, c.MinConns = 1, 1
			c.AcquireTimeout = tether.Duration(100 * time.Millisecond)
		})
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = b.Query(ctx(t), tether.Statement{SQL: "SELECT 1"})
		if e := tether.AsError(err); e.Code != tether.CodeBusy || !e.Retry {
			t.Fatalf("with the only connection in a transaction: %v", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("busy took %s", el)
		}
		if _, err := b.Begin(ctx(t)); code(err) != tether.CodeBusy {
			t.Fatalf("second begin: %v", err)
		}
		tx.Rollback(ctx(t))
		mustQuery(t, b, "SELECT 1")
	})

	t.Run("Deadline", func(t *testing.T) {
		b := s.open(t, func(c *tether.BackendConfig) { c.MaxConns = 2 })
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := b.Query(c, tether.Statement{SQL: d.Sleep(5)})
		if err == nil {
			t.Fatal("a 5 s statement finished within a 300 ms deadline")
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("deadline honoured only after %s", el)
		}
		// The pool recovers: every connection works.
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); mustQuery(t, b, "SELECT 1") }()
		}
		wg.Wait()
	})

	t.Run("Concurrency", func(t *testing.T) {
		b := s.open(t, func(c *tether.BackendConfig) { c.MaxConns = 4; c.AcquireTimeout = tether.Duration(10 * time.Second) })
		var wg sync.WaitGroup
		var failures atomic.Int64
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					r, err := b.Query(context.Background(), tether.Statement{SQL: "SELECT " + p(1), Params: []any{int64(g*100 + i)}})
					if err != nil || len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != fmt.Sprint(g*100+i) {
						failures.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if n := failures.Load(); n > 0 {
			t.Fatalf("%d of 800 concurrent queries failed or got another's result", n)
		}
		if st := b.Stats(); st.Open > 4*max(s.Hosts, 1) {
			t.Fatalf("%d connections open with max_conns 4 on each of %d hosts", st.Open, max(s.Hosts, 1))
		}
	})

	if s.KillConnections != nil {
		t.Run("BrokenConnectionsReplaced", func(t *testing.T) {
			b := s.open(t, func(c *tether.BackendConfig) { c.MaxConns, c.MinConns = 3, 3 })
			mustQuery(t, b, "SELECT 1")
			killer := s.open(t, func(c *tether.BackendConfig) { c.MaxConns, c.MinConns = 1, 1 })
			if err := s.KillConnections(ctx(t), killer); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			// database/sql notices the dead connections and dials new ones;
			// at most one statement per dead connection may fail, and not
			// with a silent wrong answer.
			ok := 0
			for i := 0; i < 10; i++ {
				if r, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT 1"}); err == nil && len(r.Rows) == 1 {
					ok++
				}
			}
			if ok < 7 {
				t.Fatalf("only %d of 10 queries worked after the connections were killed", ok)
			}
		})
	}

	if s.ProxiedConfig != nil {
		t.Run("DownAndBack", func(t *testing.T) {
			_, target := s.ProxiedConfig(t, "")
			proxy := NewProxy(t, target)
			cfg, _ := s.ProxiedConfig(t, proxy.Addr())
			cfg.MinConns = 1
			b := s.New(t, cfg)
			if err := b.Open(ctx(t)); err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			mustQuery(t, b, "SELECT 1")

			proxy.Stop()
			for i := 0; i < 3; i++ {
				start := time.Now()
				_, err := b.Query(ctx(t), tether.Statement{SQL: "SELECT 1"})
				if code(err) != tether.CodeUnavailable {
					t.Fatalf("query %d with the backend down: %v (%s)", i, err, code(err))
				}
				if el := time.Since(start); el > 3*time.Second {
					t.Fatalf("unavailable took %s", el)
				}
			}

			proxy.Start()
			var err error
			for i := 0; i < 50; i++ {
				if _, err = b.Query(ctx(t), tether.Statement{SQL: "SELECT 1"}); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("service did not resume after the backend came back: %v", err)
			}
		})

		t.Run("OpenWhileDown", func(t *testing.T) {
			cfg, _ := s.ProxiedConfig(t, "127.0.0.1:1")
			b := s.New(t, cfg)
			start := time.Now()
			err := b.Open(ctx(t))
			if code(err) != tether.CodeUnavailable {
				t.Fatalf("open with the backend down: %v (%s)", err, code(err))
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("open took %s to fail", el)
			}
		})
	}
}
