package server_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// Tests of the shared result cache (cache.go, internal/resultcache) on the
// real servers the loop tests use (sqlloop_test.go).

// firstValue returns the first column of the only row of a query's reply.
func firstValue(t *testing.T, rep *wire.Reply) string {
	t.Helper()
	if e := rep.Error(); e != nil {
		t.Fatalf("query failed: %v", e)
	}
	rows, _ := rep.Fields["rows"].([]any)
	if len(rows) != 1 {
		t.Fatalf("want one row, got %v", rep.Fields)
	}
	return fmt.Sprint(rows[0].([]any)[0])
}

// TestCache_ServesUntilAWriteThroughTether: a cached read is answered from
// memory (a write made behind tetherd's back is not seen within the TTL), and
// every write through tetherd on the backend (exec, a committed transaction,
// a batch's exec) drops it before its own client is answered; the TTL bounds
// what it does not see; session settings and reply forms are not mixed.
func TestCache_ServesUntilAWriteThroughTether(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			ctx := context.Background()
			c, other := dial(t, ts), dial(t, ts)
			c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS cache_t"})
			c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE cache_t (id INT PRIMARY KEY, v INT)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS cache_t") })
			c.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO cache_t VALUES (1, 10)"})
			behind := func(v int) { // a write tetherd does not see
				t.Helper()
				if _, err := d.watch.ExecContext(ctx, fmt.Sprintf("UPDATE cache_t SET v = %d WHERE id = 1", v)); err != nil {
					t.Fatal(err)
				}
			}
			read := func(cl *client, ttl int64) string {
				t.Helper()
				return firstValue(t, cl.do(wire.Request{ID: 10, Op: wire.OpQuery, Backend: "db",
					SQL: "SELECT v FROM cache_t WHERE id = " + d.p(1), Params: []any{int64(1)}, CacheTTLMS: ttl}))
			}
			expect := func(what, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s: read %s, want %s", what, got, want)
				}
			}

			expect("first read", read(c, 60000), "10")
			behind(11)
			expect("cached, a write behind tetherd's back", read(c, 60000), "10")
			expect("another client, same settings", read(other, 60000), "10")
			expect("without cache_ttl_ms", read(c, 0), "11")

			other.ok(wire.Request{ID: 4, Op: wire.OpExec, Backend: "db", SQL: "UPDATE cache_t SET v = 12 WHERE id = 1"})
			expect("after another client's exec", read(c, 60000), "12")
			c.ok(wire.Request{ID: 5, Op: wire.OpExec, Backend: "db", SQL: "UPDATE cache_t SET v = 13 WHERE id = 1"})
			expect("the writer reads its own write", read(c, 60000), "13")

			tx := toUint(other.ok(wire.Request{ID: 6, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			other.ok(wire.Request{ID: 7, Op: wire.OpExec, Tx: tx, SQL: "UPDATE cache_t SET v = 14 WHERE id = 1"})
			expect("a transaction not committed yet", read(c, 60000), "13")
			other.ok(wire.Request{ID: 8, Op: wire.OpCommit, Tx: tx})
			expect("after the commit", read(c, 60000), "14")

			other.ok(wire.Request{ID: 9, Op: wire.OpBatch, Ops: []wire.Request{
				{Op: wire.OpExec, Backend: "db", SQL: "UPDATE cache_t SET v = 15 WHERE id = 1"},
			}})
			expect("after a batch's exec", read(c, 60000), "15")

			// A session setting is no write: a framework's connect-time SET on
			// every page must not empty the cache.
			behind(99)
			set := "SET TimeZone = 'UTC'"
			if d.typ == "mysql" {
				set = "SET time_zone = '+00:00'"
			}
			other.ok(wire.Request{ID: 22, Op: wire.OpExec, Backend: "db", SQL: set})
			expect("after another client's SET", read(c, 60000), "15")
			behind(15)

			// In a batch: a hit, and a read whose result the batch stores.
			batchRead := func(sql string) string {
				t.Helper()
				res := c.ok(wire.Request{ID: 30, Op: wire.OpBatch, Ops: []wire.Request{
					{Op: wire.OpQuery, Backend: "db", SQL: sql, Params: []any{int64(1)}, CacheTTLMS: 60000},
				}}).Fields["results"].([]any)
				item := res[0].(map[string]any)
				if e := item["error"]; e != nil {
					t.Fatalf("batch read: %v", e)
				}
				return fmt.Sprint(item["rows"].([]any)[0].([]any)[0])
			}
			same, derived := "SELECT v FROM cache_t WHERE id = "+d.p(1), "SELECT v + 0 AS w FROM cache_t WHERE id = "+d.p(1)
			expect("a batch's read of a cached result", batchRead(same), "15")
			expect("a batch's read stored", batchRead(derived), "15")
			behind(97)
			expect("a batch's read, a hit", batchRead(same), "15")
			expect("a batch's read, stored by a batch", batchRead(derived), "15")
			behind(15)

			// The TTL bounds what tetherd does not see.
			expect("stored with a short TTL", read(c, 150), "15")
			behind(16)
			expect("within the TTL", read(c, 150), "15")
			time.Sleep(250 * time.Millisecond) // not a wait for an event: the TTL passing is what is tested
			expect("past the TTL", read(c, 150), "16")

			// Results that depend on a session setting are kept apart.
			x, y := dial(t, ts), dial(t, ts)
			probe := "SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00'::text"
			setX, setY := "SET TimeZone = 'UTC'", "SET TimeZone = 'Asia/Karachi'"
			if d.typ == "mysql" {
				c.ok(wire.Request{ID: 11, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE IF NOT EXISTS cache_ts (ts TIMESTAMP NULL)"})
				c.ok(wire.Request{ID: 12, Op: wire.OpExec, Backend: "db", SQL: "DELETE FROM cache_ts"})
				c.ok(wire.Request{ID: 13, Op: wire.OpExec, Backend: "db", SQL: "SET time_zone = '+00:00'"})
				c.ok(wire.Request{ID: 14, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO cache_ts VALUES ('2024-01-01 00:00:00')"})
				t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS cache_ts") })
				probe = "SELECT CAST(ts AS CHAR) FROM cache_ts"
				setX, setY = "SET time_zone = '+00:00'", "SET time_zone = '+05:00'"
			}
			x.ok(wire.Request{ID: 15, Op: wire.OpExec, Backend: "db", SQL: setX})
			y.ok(wire.Request{ID: 16, Op: wire.OpExec, Backend: "db", SQL: setY})
			q := wire.Request{ID: 17, Op: wire.OpQuery, Backend: "db", SQL: probe, CacheTTLMS: 60000}
			inX, inY := firstValue(t, x.do(q)), firstValue(t, y.do(q))
			if inX == inY || firstValue(t, x.do(q)) != inX || firstValue(t, y.do(q)) != inY {
				t.Errorf("clients with different time zones share a cached result: %s and %s", inX, inY)
			}

			// A columnar reply is cached apart from a row one.
			col := c.do(wire.Request{ID: 18, Op: wire.OpQuery, Backend: "db", SQL: "SELECT v FROM cache_t WHERE id = " + d.p(1),
				Params: []any{int64(1)}, CacheTTLMS: 60000, Columnar: true})
			if data, _ := col.Fields["data"].([]any); fmt.Sprint(data) != "[[16]]" {
				t.Errorf("columnar cached read: %v", col.Fields)
			}
			expect("rows after columnar", read(c, 60000), "16")

			// A result that changes by itself is not cached.
			now := "SELECT NOW(6)"
			if d.typ == "postgres" {
				now = "SELECT clock_timestamp()::text"
			}
			first := firstValue(t, c.do(wire.Request{ID: 19, Op: wire.OpQuery, Backend: "db", SQL: now, CacheTTLMS: 60000}))
			time.Sleep(5 * time.Millisecond) // the database's clock must move between the two reads
			if again := firstValue(t, c.do(wire.Request{ID: 20, Op: wire.OpQuery, Backend: "db", SQL: now, CacheTTLMS: 60000})); again == first {
				t.Errorf("%s was answered from the cache: %s twice", now, first)
			}

			errCode(t, c.do(wire.Request{ID: 21, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1", CacheTTLMS: -1}), tether.CodeBadRequest)
		})
	}
}

// TestCache_MergesIdenticalReads: 100 identical cacheable reads in flight at
// once run once on the server (counted there, by a function that logs each
// call), and every one of them gets the result: reads that ask for the cache,
// and, with merge_uncached and caching off, reads that do not.
func TestCache_MergesIdenticalReads(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			testMerge(t, d, d.start(t, nil), 60000)
		})
		t.Run(d.typ+"/merge_uncached", func(t *testing.T) {
			testMerge(t, d, d.startWith(t, nil, func(c *tether.Config) {
				c.Cache.MaxBytes, c.Cache.MergeUncached = 0, true
			}), 0)
		})
	}
}

// testMerge runs the merge check on ts, whose backend "db" is d, with reads
// asking for the cache for ttl ms (0: not asking; then nothing is stored).
func testMerge(t *testing.T, d *loopDB, ts *testServer, ttl int64) {
	ctx := context.Background()
	setup := []string{
		"DROP TABLE IF EXISTS cache_calls",
		"CREATE TABLE cache_calls (n INT)",
		"DROP FUNCTION IF EXISTS cache_probe",
		"CREATE FUNCTION cache_probe(n INT) RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO cache_calls VALUES (n); DO SLEEP(0.3); RETURN n * 2; END",
	}
	if d.typ == "postgres" {
		setup[3] = "CREATE FUNCTION cache_probe(n INT) RETURNS INT LANGUAGE plpgsql AS $$ BEGIN INSERT INTO cache_calls VALUES (n); PERFORM pg_sleep(0.3); RETURN n * 2; END $$"
	}
	for _, s := range setup {
		if _, err := d.watch.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		d.watch.ExecContext(ctx, "DROP FUNCTION IF EXISTS cache_probe")
		d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS cache_calls")
	})
	calls := func() int {
		t.Helper()
		var n int
		if err := d.watch.QueryRowContext(ctx, "SELECT COUNT(*) FROM cache_calls").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	probe := func(n int64, id uint32) wire.Request {
		return wire.Request{ID: id, Op: wire.OpQuery, Backend: "db", SQL: "SELECT cache_probe(" + d.p(1) + ") AS r",
			Params: []any{n}, CacheTTLMS: ttl}
	}
	const readers = 100
	var wg sync.WaitGroup
	got := make([]string, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i] = firstValue(t, dial(t, ts).do(probe(21, uint32(i+1))))
		}(i)
	}
	wg.Wait()
	for i, v := range got {
		if v != "42" {
			t.Errorf("reader %d got %s, want 42", i, v)
		}
	}
	if n := calls(); n != 1 {
		t.Errorf("%d identical reads in flight at once ran %d times on the server, want 1", readers, n)
	}
	// A later identical read is a hit when cached, a new run when not.
	later := 1
	if ttl == 0 {
		later = 2
	}
	c := dial(t, ts)
	if v := firstValue(t, c.do(probe(21, 1000))); v != "42" || calls() != later {
		t.Errorf("a later identical read: %s, and %d runs on the server (want 42, %d)", v, calls(), later)
	}
	if v := firstValue(t, c.do(probe(5, 1001))); v != "10" || calls() != later+1 {
		t.Errorf("another parameter: %s, and %d runs on the server (want 10, %d)", v, calls(), later+1)
	}
}

// TestCache_NoStaleReads is the concurrent checker of issue 12: clients write
// and read the same keys through tetherd with the cache on (writes by exec, in
// transactions and in batches; reads cached, merged); every read is checked
// against the history: a read that began after a write was acknowledged must
// not return a value older than that write. Values only grow (each write sets
// a key to the greatest of its value and a new version), so "older" is "less".
func TestCache_NoStaleReads(t *testing.T) {
	ops := 100000 // per database; TETHER_CACHE_CHECK_OPS for a longer stress run
	if v, err := strconv.Atoi(os.Getenv("TETHER_CACHE_CHECK_OPS")); err == nil && v > 0 {
		ops = v
	}
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			ctx := context.Background()
			const keys, clients = 8, 12
			setup := dial(t, ts)
			setup.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS cache_kv"})
			setup.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE cache_kv (k INT PRIMARY KEY, v BIGINT NOT NULL)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS cache_kv") })
			for k := 0; k < keys; k++ {
				setup.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: fmt.Sprintf("INSERT INTO cache_kv VALUES (%d, 0)", k)})
			}
			var (
				mu      sync.Mutex
				acked   [keys]int64 // the greatest version acknowledged per key
				version atomic.Int64
				stale   atomic.Int64
				reads   atomic.Int64
				writes  atomic.Int64
				first   atomic.Value
			)
			write := fmt.Sprintf("UPDATE cache_kv SET v = GREATEST(v, %s) WHERE k = %s", d.p(1), d.p(2))
			read := "SELECT v FROM cache_kv WHERE k = " + d.p(1)
			var wg sync.WaitGroup
			per := ops / clients
			for ci := 0; ci < clients; ci++ {
				wg.Add(1)
				go func(ci int) {
					defer wg.Done()
					c := dial(t, ts)
					rng := uint64(ci)*0x9E3779B97F4A7C15 + 1
					next := func(n int) int {
						rng ^= rng << 13
						rng ^= rng >> 7
						rng ^= rng << 17
						return int(rng % uint64(n))
					}
					ack := func(k int, v int64) {
						mu.Lock()
						if v > acked[k] {
							acked[k] = v
						}
						mu.Unlock()
						writes.Add(1)
					}
					for i := 0; i < per; i++ {
						k := next(keys)
						id := uint32(i%1000 + 1)
						switch op := next(20); {
						case op < 2: // exec
							v := version.Add(1)
							c.ok(wire.Request{ID: id, Op: wire.OpExec, Backend: "db", SQL: write, Params: []any{v, int64(k)}})
							ack(k, v)
						case op < 3: // a transaction
							v := version.Add(1)
							tx := toUint(c.ok(wire.Request{ID: id, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
							c.ok(wire.Request{ID: id, Op: wire.OpExec, Tx: tx, SQL: write, Params: []any{v, int64(k)}})
							c.ok(wire.Request{ID: id, Op: wire.OpCommit, Tx: tx})
							ack(k, v)
						case op < 4: // a batch
							v := version.Add(1)
							res := c.ok(wire.Request{ID: id, Op: wire.OpBatch, Ops: []wire.Request{
								{Op: wire.OpExec, Backend: "db", SQL: write, Params: []any{v, int64(k)}},
							}}).Fields["results"].([]any)
							if e, _ := res[0].(map[string]any)["error"]; e != nil {
								t.Errorf("batch write: %v", e)
								return
							}
							ack(k, v)
						default: // a cached read
							mu.Lock()
							floor := acked[k]
							mu.Unlock()
							var value string
							if id%2 == 0 { // half the reads in a batch
								res := c.ok(wire.Request{ID: id, Op: wire.OpBatch, Ops: []wire.Request{
									{Op: wire.OpQuery, Backend: "db", SQL: read, Params: []any{int64(k)}, CacheTTLMS: 60000},
								}}).Fields["results"].([]any)
								rows, _ := res[0].(map[string]any)["rows"].([]any)
								if len(rows) != 1 {
									t.Errorf("batch read: %v", res[0])
									return
								}
								value = fmt.Sprint(rows[0].([]any)[0])
							} else {
								value = firstValue(t, c.do(wire.Request{ID: id, Op: wire.OpQuery, Backend: "db", SQL: read, Params: []any{int64(k)}, CacheTTLMS: 60000}))
							}
							got, err := strconv.ParseInt(value, 10, 64)
							if err != nil {
								t.Errorf("read: %v", err)
								return
							}
							reads.Add(1)
							if got < floor {
								stale.Add(1)
								first.CompareAndSwap(nil, fmt.Sprintf("key %d read %d after %d was acknowledged", k, got, floor))
							}
						}
					}
				}(ci)
			}
			wg.Wait()
			t.Logf("%d reads, %d writes by %d clients on %d keys: %d stale", reads.Load(), writes.Load(), clients, keys, stale.Load())
			if n := stale.Load(); n > 0 {
				t.Errorf("%d stale reads; the first: %v", n, first.Load())
			}
		})
	}
}
