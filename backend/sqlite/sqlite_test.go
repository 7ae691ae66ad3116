package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/sqlite"
	"github.com/tether-php/tether/internal/fault"
)

func TestBackend(t *testing.T) {
	dir := t.TempDir()
	backendtest.Run(t, &backendtest.Suite{
		Dialect: backendtest.Dialect{
			Placeholder: func(int) string { return "?" },
			BigInt:      "INTEGER", Float: "REAL", Text: "TEXT", Blob: "BLOB", Decimal: "DECIMAL(10,2)",
			Date: "DATE", DateTime: "DATETIME", Bool: "BOOLEAN",
			DecimalExact: false, // NUMERIC affinity stores 12345.67 as a REAL
			HasInsertID:  true,
			AutoID:       "INTEGER PRIMARY KEY AUTOINCREMENT",
			Sleep: func(int) string {
				return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
			},
			SetSession: "PRAGMA cache_size = 1234", ReadSession: "PRAGMA cache_size", SessionLeaked: "1234",
			CreateTemp: "CREATE TEMP TABLE tmp_leak (id INTEGER)",
		},
		Config: func(t *testing.T) tether.BackendConfig {
			return tether.DefaultBackendConfig("sqlite", filepath.Join(dir, "test.db"))
		},
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := sqlite.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}

// TestBackend_DriverPanic: a panic inside the SQLite driver (injected at
// fault.DriverCall, under database/sql) reaches the caller as a panic, for
// the server to answer internal, and its connection is discarded: more such
// panics than max_conns, outside and inside transactions, leave the pool
// whole. Before sqldb guarded the driver, each panic outside a transaction
// left its connection counted in use for good, so the third query waited for
// a connection until its deadline, and rolling back a transaction whose
// statement panicked deadlocked.
func TestBackend_DriverPanic(t *testing.T) {
	cfg := tether.DefaultBackendConfig("sqlite", filepath.Join(t.TempDir(), "test.db"))
	cfg.MaxConns, cfg.MinConns = 2, 1
	cfg.AcquireTimeout = tether.Duration(2 * time.Second)
	b, err := sqlite.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Close(cctx)
	}()
	ctx := context.Background()
	if _, err := b.Exec(ctx, tether.Statement{SQL: "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"}); err != nil {
		t.Fatal(err)
	}
	const boom = "/*boom*/"
	var injected atomic.Int64
	restore := fault.Set(func(p fault.Point, detail string) {
		if p == fault.DriverCall && strings.Contains(detail, boom) {
			injected.Add(1)
			panic("injected by the test")
		}
	})
	defer restore()

	// within runs fn, which must panic with the driver's panic, giving up
	// after 5 s (a leaked connection makes the call wait, a leaked lock
	// makes it hang).
	within := func(what string, fn func()) {
		t.Helper()
		got := make(chan any, 1)
		go func() {
			defer func() { got <- recover() }()
			fn()
		}()
		select {
		case v := <-got:
			if v == nil {
				t.Fatalf("%s: no panic", what)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still blocked after 5 s", what)
		}
	}
	const panics = 5 // > max_conns
	for i := 0; i < panics; i++ {
		ictx, cancel := context.WithTimeout(ctx, 4*time.Second)
		within(fmt.Sprint("query ", i), func() {
			res, err := b.Query(ictx, tether.Statement{SQL: "SELECT k FROM t " + boom})
			t.Errorf("query %d answered %v, %v: want a panic", i, res, err)
		})
		cancel()
		within(fmt.Sprint("exec ", i), func() {
			b.Exec(ctx, tether.Statement{SQL: "INSERT INTO t (v) VALUES (?) " + boom, Params: []any{"x"}})
		})
		bctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		tx, err := b.Begin(bctx)
		cancel()
		if err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		within(fmt.Sprint("statement in transaction ", i), func() {
			tx.Exec(ctx, tether.Statement{SQL: "UPDATE t SET v = 'y' " + boom})
		})
		done := make(chan struct{})
		go func() { tx.(tether.Discarder).Discard(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("discarding transaction %d: still blocked after 5 s", i)
		}
	}
	restore()
	if got := injected.Load(); got != 3*panics {
		t.Errorf("%d panics injected, want %d", got, 3*panics)
	}
	for i := 0; i < 10; i++ {
		qctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		if _, err := b.Exec(qctx, tether.Statement{SQL: "INSERT INTO t (v) VALUES (?)", Params: []any{"ok"}}); err != nil {
			t.Fatalf("exec %d after the panics: %v", i, err)
		}
		res, err := b.Query(qctx, tether.Statement{SQL: "SELECT count(*) FROM t"})
		cancel()
		if err != nil {
			t.Fatalf("query %d after the panics: %v", i, err)
		}
		if n := res.Rows[0][0]; n != int64(i+1) {
			t.Fatalf("query %d after the panics: count %v, want %d (a statement that panicked wrote)", i, n, i+1)
		}
	}
	if s := b.DB.DB().Stats(); s.InUse != 0 || s.OpenConnections > cfg.MaxConns {
		t.Errorf("database/sql after the panics: %d in use (want 0), %d open (max %d)", s.InUse, s.OpenConnections, cfg.MaxConns)
	}
}
