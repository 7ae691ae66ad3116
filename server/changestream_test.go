package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/wire"
)

// TestCache_ChangeStream: with change_stream on, a write made behind
// tetherd's back (a direct connection) drops the cached result it made stale
// within the stream's delay, not the TTL (here a minute); once a read saw the
// new value, no later read sees the old one; and when the stream breaks (its
// session killed on the server) tetherd follows it again by itself. It
// prints how long after the write's acknowledgement the first fresh read came
// (docs/operations.md quotes it). MariaDB's binary log, PostgreSQL's logical
// replication.
func TestCache_ChangeStream(t *testing.T) {
	env := map[string][2]string{
		"mysql":    {"TETHER_TEST_MYSQL_BINLOG", "TETHER_TEST_MYSQL_DSN"},
		"postgres": {"TETHER_TEST_POSTGRES_LOGICAL", "TETHER_TEST_POSTGRES_DSN"},
	}
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			backendtest.RequireEnv(t, env[d.typ][0])
			testChangeStream(t, d, backendtest.RequireEnv(t, env[d.typ][1]))
		})
	}
}

// testChangeStream runs the check on d, with the backend's DSN set to dsn (a
// user that may follow the change stream).
func testChangeStream(t *testing.T, d *loopDB, dsn string) {
	ctx := context.Background()
	ts := d.start(t, func(b *tether.BackendConfig) {
		b.DSN = dsn // the user that may replicate
		b.ChangeStream = true
	})
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS stream_t"})
	c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE stream_t (id INT PRIMARY KEY, v INT)"})
	t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS stream_t") })
	c.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO stream_t VALUES (1, 0)"})
	if d.typ == "postgres" {
		// The test server runs with synchronous_commit off, where a commit is
		// visible before its WAL is flushed, and so before the walsender
		// sends it (up to wal_writer_delay later): the direct writer commits
		// as production servers do.
		if _, err := d.watch.ExecContext(ctx, "SET synchronous_commit = on"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		return firstValue(t, c.do(wire.Request{ID: 10, Op: wire.OpQuery, Backend: "db",
			SQL: "SELECT v FROM stream_t WHERE id = " + d.p(1), Params: []any{int64(1)}, CacheTTLMS: 60000}))
	}
	// behind writes v with a direct connection, then reads through tetherd
	// until it answers v, and returns how long after the write's
	// acknowledgement that took.
	behind := func(v int, within time.Duration) time.Duration {
		t.Helper()
		if got := read(); got == fmt.Sprint(v) {
			t.Fatalf("read %s before writing it", got)
		}
		if _, err := d.watch.ExecContext(ctx, "UPDATE stream_t SET v = "+d.p(1)+" WHERE id = 1", v); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		for {
			if read() == fmt.Sprint(v) {
				took := time.Since(acked)
				for i := 0; i < 5; i++ {
					if got := read(); got != fmt.Sprint(v) {
						t.Fatalf("after a read of %d, a later read answered %s", v, got)
					}
				}
				return took
			}
			if time.Since(acked) > within {
				t.Fatalf("a write behind tetherd's back was still not seen after %v (the TTL is a minute)", within)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	// The stream opens just after tetherd does: the first write waits for it.
	behind(1, 15*time.Second)
	if got := read(); got != "1" {
		t.Fatalf("read %s", got)
	}

	const writes = 200
	delays := make([]time.Duration, 0, writes)
	for i := 0; i < writes; i++ {
		delays = append(delays, behind(100+i, 5*time.Second))
	}
	slices.Sort(delays)
	t.Logf("%s: a direct write seen through the cache after (n=%d): p50 %v, p99 %v, max %v", d.typ, writes,
		delays[writes/2], delays[writes*99/100], delays[writes-1])

	// The stream's session killed on the server: tetherd opens it again. (Its
	// user's own connection sees it, and may end it.)
	driver, list, kill := "mysql", "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'", "KILL %d"
	if d.typ == "postgres" {
		driver, list, kill = "pgx", "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender' AND usename = current_user", "SELECT pg_terminate_backend(%d)"
	}
	own, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	streams, err := ids(ctx, own, list)
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, id := range streams {
		if _, err := own.ExecContext(ctx, fmt.Sprintf(kill, id)); err == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("found no change stream session to end")
	}
	behind(1000, 15*time.Second)
	behind(1001, 5*time.Second)

	// A table without a primary key: writes to it are allowed (no
	// publication asks for a replica identity) and seen by the stream.
	c.ok(wire.Request{ID: 4, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE stream_nopk (v INT)"})
	t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS stream_nopk") })
	c.ok(wire.Request{ID: 5, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO stream_nopk VALUES (1)"})
	c.ok(wire.Request{ID: 6, Op: wire.OpExec, Backend: "db", SQL: "UPDATE stream_nopk SET v = 2"})
	readNoPK := func() string {
		return firstValue(t, c.do(wire.Request{ID: 11, Op: wire.OpQuery, Backend: "db", SQL: "SELECT v FROM stream_nopk", CacheTTLMS: 60000}))
	}
	if got := readNoPK(); got != "2" {
		t.Fatalf("read %s from the table without a primary key, want 2", got)
	}
	if _, err := d.watch.ExecContext(ctx, "UPDATE stream_nopk SET v = 3"); err != nil {
		t.Fatalf("a direct UPDATE of a table without a primary key: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); readNoPK() != "3"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a direct UPDATE of a table without a primary key was not seen through the cache within 5 s")
		}
	}
}
