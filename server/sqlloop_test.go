package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the independent connections that watch the server
	_ "github.com/jackc/pgx/v5/stdlib"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/wire"
)

// Tests of the SQL path that the event loop drives (MariaDB, PostgreSQL),
// through the server and the protocol, as PHP clients reach it, against the
// real servers of TETHER_TEST_MYSQL_DSN and TETHER_TEST_POSTGRES_DSN.

// loopDB is one real SQL server the loop tests run against.
type loopDB struct {
	name string // the backend's name in tetherd's config
	typ  string
	dsn  string
	// watch is an independent connection that observes the server.
	watch *sql.DB
	// sessions returns the ids of tetherd's server sessions (all sessions of
	// the test's user, but the watcher's own).
	sessions func(ctx context.Context) ([]int64, error)
	// running counts tetherd's sessions still running a statement that
	// contains marker.
	running func(ctx context.Context, marker string) (int, error)
	sleep   func(seconds float64, marker string) string
	p       func(n int) string
}

// awaitRunning waits until n of tetherd's sessions run a statement that
// contains marker: the database's own view, polled, as it signals no event
// to tetherd's tests.
func (d *loopDB) awaitRunning(t testing.TB, marker string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := d.running(context.Background(), marker)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d statements with %q running after 10 s", d.typ, got, n, marker)
		}
	}
}

// loopDBs returns the loop-driven MariaDB and PostgreSQL backends to test
// (TETHER_TEST_{MYSQL,POSTGRES}_POOL_DSN), and skips the test, saying why,
// when there is none: a test of them must not pass having tested nothing.
// With TETHER_REQUIRE_BACKENDS set, a missing one fails instead.
func loopDBs(t *testing.T) []*loopDB {
	t.Helper()
	dbs := optionalLoopDBs(t)
	if len(dbs) == 0 {
		t.Skip("no database for the loop tests: set TETHER_TEST_MYSQL_POOL_DSN and/or TETHER_TEST_POSTGRES_POOL_DSN (make test does)")
	}
	return dbs
}

// optionalLoopDBs is loopDBs for a test that also runs without them (on
// SQLite): none is not a skip.
func optionalLoopDBs(t *testing.T) []*loopDB {
	t.Helper()
	var dbs []*loopDB
	for _, typ := range []string{"mysql", "postgres"} {
		// A database user of their own (scripts/lib/databases.sh), so that
		// the sessions counted on the server are this package's tetherd's,
		// not those of another package's tests running at the same time.
		key := map[string]string{"mysql": "TETHER_TEST_MYSQL_POOL_DSN", "postgres": "TETHER_TEST_POSTGRES_POOL_DSN"}[typ]
		if os.Getenv(key) == "" && os.Getenv("TETHER_REQUIRE_BACKENDS") == "" {
			continue
		}
		dsn := backendtest.RequireEnv(t, key)
		d := &loopDB{name: "db", typ: typ, dsn: dsn}
		var err error
		if typ == "mysql" {
			d.watch, err = sql.Open("mysql", dsn)
			d.sessions = func(ctx context.Context) ([]int64, error) {
				return ids(ctx, d.watch, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID()")
			}
			d.running = func(ctx context.Context, marker string) (int, error) {
				var n int
				// A session shows its statement a moment after it answered;
				// one in SLEEP() shows 'User sleep' only while it sleeps.
				err := d.watch.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID() AND (STATE = 'User sleep' OR INFO NOT LIKE '%SLEEP(%')", "%"+marker+"%").Scan(&n)
				return n, err
			}
			d.sleep = func(s float64, marker string) string {
				return fmt.Sprintf("SELECT SLEEP(%g) /* %s */", s, marker)
			}
			d.p = func(int) string { return "?" }
		} else {
			d.watch, err = sql.Open("pgx", dsn)
			d.sessions = func(ctx context.Context) ([]int64, error) {
				return ids(ctx, d.watch, "SELECT pid FROM pg_stat_activity WHERE usename = current_user AND datname = current_database() AND pid <> pg_backend_pid()")
			}
			d.running = func(ctx context.Context, marker string) (int, error) {
				var n int
				// A backend shows 'active' a moment after it answered; one
				// in pg_sleep shows its wait event only while it sleeps.
				err := d.watch.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid() AND (wait_event = 'PgSleep' OR query NOT LIKE '%pg_sleep%')", "%"+marker+"%").Scan(&n)
				return n, err
			}
			d.sleep = func(s float64, marker string) string {
				return fmt.Sprintf("SELECT pg_sleep(%g) /* %s */", s, marker)
			}
			d.p = func(n int) string { return "$" + strconv.Itoa(n) }
		}
		if err != nil {
			t.Fatal(err)
		}
		d.watch.SetMaxOpenConns(1)
		t.Cleanup(func() { d.watch.Close() })
		dbs = append(dbs, d)
	}
	return dbs
}

func ids(ctx context.Context, db *sql.DB, q string) ([]int64, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// start runs a tetherd whose backend "db" is d, with the pool settings
// tweak gives. From then on, d.sessions counts only the sessions opened
// since (other clients of the server may hold some).
func (d *loopDB) start(t *testing.T, tweak func(*tether.BackendConfig)) *testServer {
	t.Helper()
	return d.startWith(t, tweak, nil)
}

// startWith is start with the server's config tweaked too.
func (d *loopDB) startWith(t *testing.T, tweak func(*tether.BackendConfig), server func(*tether.Config)) *testServer {
	t.Helper()
	others, err := d.sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	all := d.sessions
	d.sessions = func(ctx context.Context) ([]int64, error) {
		ids, err := all(ctx)
		var ours []int64
		for _, id := range ids {
			if !contains64(others, id) {
				ours = append(ours, id)
			}
		}
		return ours, err
	}
	t.Cleanup(func() { d.sessions = all })
	bc := tether.DefaultBackendConfig(d.typ, d.dsn)
	if tweak != nil {
		tweak(&bc)
	}
	var b tether.Backend
	if d.typ == "mysql" {
		b, err = mysql.New(bc)
	} else {
		b, err = postgres.New(bc)
	}
	if err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, func(c *tether.Config) {
		c.Backends["db"] = bc
		c.Server.DefaultTimeout = tether.Duration(30 * time.Second)
		if server != nil {
			server(c)
		}
	}, map[string]tether.Backend{"db": b})
}

// sampler records the most sessions d's server held for tetherd at once,
// every 5 ms, until stopped.
type sampler struct {
	max, samples atomic.Int64
	seen         sync.Map // session id -> true
	stop         chan struct{}
	done         chan struct{}
}

func (d *loopDB) sample(t *testing.T) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	// A test that ends early (Fatal) stops it too, before the watcher closes.
	t.Cleanup(func() {
		select {
		case <-s.stop:
		default:
			s.finish()
		}
	})
	go func() {
		defer close(s.done)
		for {
			ids, err := d.sessions(context.Background())
			if err != nil {
				t.Errorf("sample sessions: %v", err)
				return
			}
			for _, id := range ids {
				s.seen.Store(id, true)
			}
			if n := int64(len(ids)); n > s.max.Load() {
				s.max.Store(n)
			}
			s.samples.Add(1)
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() { close(s.stop); <-s.done }

// okOnceFree sends r until it is answered with anything but busy, for up to
// 8 s, and fails on an error. For the first statement after cancels: a
// connection stays out of the pool until its KILL has returned, and MariaDB
// can take 2 s over a KILL of a statement in SLEEP() (several go one after
// the other on the side connection), or cancel_timeout (5 s) ends it.
func (c *client) okOnceFree(r wire.Request) *wire.Reply {
	c.t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		rep := c.do(r)
		e := rep.Error()
		if e == nil {
			return rep
		}
		if fmt.Sprint(e["code"]) != string(tether.CodeBusy) || time.Now().After(deadline) {
			c.t.Fatalf("%s %q: %v", r.Op, r.SQL, e)
		}
	}
}

// TestLoopSQL_SessionSettings runs 10,000 short sessions that set their
// session variables as PHP frameworks' connectors do, many at once with
// different values: each statement must see its own client's values, and
// the backend connections must stay those of the pool, with no new ones.
func TestLoopSQL_SessionSettings(t *testing.T) {
	sessions := 10000
	if testing.Short() {
		sessions = 1000
	}
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 4, 4 })
			ctx := context.Background()
			before, err := d.sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			smp := d.sample(t)
			const workers = 16
			var done, wrong atomic.Int64
			var firstWrong atomic.Value
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < sessions; i += workers {
						if msg := settingsSession(t, ts, d, i); msg != "" {
							wrong.Add(1)
							firstWrong.CompareAndSwap(nil, msg)
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			smp.finish()
			after, err := d.sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var fresh []int64
			smp.seen.Range(func(k, _ any) bool {
				if !contains64(before, k.(int64)) {
					fresh = append(fresh, k.(int64))
				}
				return true
			})
			t.Logf("%d sessions of 16 clients at once in %s (%.0f/s); server sessions of tetherd: %d before, at most %d during (%d samples), %d after; new ones: %d",
				done.Load(), el.Round(time.Millisecond), float64(done.Load())/el.Seconds(), len(before), smp.max.Load(), smp.samples.Load(), len(after), len(fresh))
			if n := wrong.Load(); n > 0 {
				t.Errorf("%d sessions saw settings not their own; first: %v", n, firstWrong.Load())
			}
			if m := smp.max.Load(); m > 4 {
				t.Errorf("tetherd held %d sessions at once with max_conns 4", m)
			}
			if len(fresh) > 0 {
				t.Errorf("tetherd opened %d new server sessions (%v): settings must not cost a client its pooled connection", len(fresh), fresh)
			}
		})
	}
}

func contains64(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// settingsSession is one PHP request's worth of a framework's connection:
// its connect-time SETs with values of its own, then statements that read
// them back. It returns what was wrong, or "".
func settingsSession(t *testing.T, ts *testServer, d *loopDB, i int) string {
	c, err := net.Dial("unix", ts.socket)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	cl := &client{t: t, conn: c}
	id := uint32(0)
	exec := func(sql string) string {
		id++
		rep := cl.do(wire.Request{ID: id, Op: wire.OpExec, Backend: "db", SQL: sql})
		if e := rep.Error(); e != nil {
			return fmt.Sprintf("%s: %v", sql, e)
		}
		return ""
	}
	query := func(sql string) ([]any, string) {
		id++
		rep := cl.do(wire.Request{ID: id, Op: wire.OpQuery, Backend: "db", SQL: sql})
		if e := rep.Error(); e != nil {
			return nil, fmt.Sprintf("%s: %v", sql, e)
		}
		return rep.Fields["rows"].([]any)[0].([]any), ""
	}
	if d.typ == "mysql" {
		// Laravel's and WordPress's MySQL connectors.
		tz := fmt.Sprintf("+%02d:00", i%14)
		coll := []string{"utf8mb4_unicode_ci", "utf8mb4_general_ci", "utf8mb4_bin"}[i%3]
		mode := []string{"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION", "NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO", "ANSI_QUOTES"}[i%3]
		for _, s := range []string{"SET NAMES utf8mb4 COLLATE " + coll, "SET SESSION sql_mode = '" + mode + "'", "SET time_zone = '" + tz + "'"} {
			if msg := exec(s); msg != "" {
				return msg
			}
		}
		for k := 0; k < 2; k++ {
			row, msg := query("SELECT @@session.time_zone, @@session.collation_connection, @@session.sql_mode")
			if msg != "" {
				return msg
			}
			if got := fmt.Sprintf("%s|%s|%s", row...); got != tz+"|"+coll+"|"+mode {
				return fmt.Sprintf("session %d read %q, set %q", i, got, tz+"|"+coll+"|"+mode)
			}
		}
		return ""
	}
	// Laravel's PostgreSQL connector.
	tz := []string{"UTC", "Asia/Tokyo", "Europe/Paris", "America/New_York"}[i%4]
	path := []string{`public`, `"$user", public`}[i%2]
	app := fmt.Sprintf("client-%d", i%50)
	for _, s := range []string{"set names 'utf8'", "set time zone '" + tz + "'", "set search_path to " + path, "set application_name to '" + app + "'"} {
		if msg := exec(s); msg != "" {
			return msg
		}
	}
	for k := 0; k < 2; k++ {
		row, msg := query("SELECT current_setting('TimeZone') || '|' || current_setting('search_path') || '|' || current_setting('application_name') || '|' || current_setting('client_encoding')")
		if msg != "" {
			return msg
		}
		if want := tz + "|" + path + "|" + app + "|UTF8"; row[0] != want {
			return fmt.Sprintf("session %d read %q, set %q", i, row[0], want)
		}
	}
	return ""
}

// TestLoopSQL_PoolHolds drives timeouts, clients that vanish mid-statement
// and statements that burn CPU at ten times max_conns, and asserts, by
// sampling the server's own view of its sessions, that tetherd's never exceed
// max_conns (plus the one side connection a MySQL backend opens for KILL),
// and that every statement given up on was stopped on the server.
func TestLoopSQL_PoolHolds(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			const maxConns = 4
			ts := d.start(t, func(bc *tether.BackendConfig) {
				bc.MaxConns, bc.MinConns = maxConns, maxConns
				bc.AcquireTimeout = tether.Duration(500 * time.Millisecond)
			})
			smp := d.sample(t)
			ctx := context.Background()
			storm := func(name string, clients int, sql string, timeoutMS uint32, vanishAfter time.Duration) {
				t.Helper()
				var wg sync.WaitGroup
				var timeouts, busy, other atomic.Int64
				start := time.Now()
				for i := 0; i < clients; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cl := dialInGoroutine(t, ts)
						if cl == nil {
							return
						}
						defer cl.conn.Close()
						cl.send(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: sql, TimeoutMS: timeoutMS})
						if vanishAfter > 0 {
							time.Sleep(vanishAfter)
							return // the client goes away with its statement running
						}
						rep := cl.recv()
						switch code := fmt.Sprint(rep.Error()["code"]); code {
						case string(tether.CodeTimeout):
							timeouts.Add(1)
						case string(tether.CodeBusy):
							busy.Add(1)
						default:
							other.Add(1)
							t.Errorf("%s: reply %v", name, rep.Fields)
						}
					}()
				}
				wg.Wait()
				answered := time.Since(start)
				// Every statement given up on must stop on the server.
				var left int
				for deadline := time.Now().Add(3 * time.Second); ; {
					n, err := d.running(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					if left = n; n == 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				stopped := time.Since(start)
				t.Logf("%s: %d clients, answered in %s (%d timeout, %d busy), statements left running on the server: %d, all stopped after %s",
					name, clients, answered.Round(time.Millisecond), timeouts.Load(), busy.Load(), left, stopped.Round(time.Millisecond))
				if left > 0 {
					t.Errorf("%s: %d statements still running on the server 3 s after their clients gave up", name, left)
				}
			}
			sleep := func(marker string) string { return d.sleep(10, marker) }
			storm("deadline_sleep", 10*maxConns, sleep("deadline_sleep"), 200, 0)
			storm("vanished_sleep", 10*maxConns, sleep("vanished_sleep"), 0, 150*time.Millisecond)
			burn := "SELECT BENCHMARK(300000000, MD5('x')) /* deadline_burn */"
			if d.typ == "postgres" {
				burn = "SELECT count(*) FROM generate_series(1, 300000000) /* deadline_burn */"
			}
			storm("deadline_burn", 10*maxConns, burn, 300, 0)
			smp.finish()
			t.Logf("tetherd's server sessions: at most %d at once over %d samples (max_conns %d)", smp.max.Load(), smp.samples.Load(), maxConns)
			if m := smp.max.Load(); m > maxConns+1 {
				t.Errorf("tetherd held %d server sessions at once with max_conns %d", m, maxConns)
			}
			// And the pool serves again, once its connections are back.
			c := dial(t, ts)
			for i := 0; i < 20; i++ {
				c.okOnceFree(wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
			}
		})
	}
}

// TestLoopSQL_SlowKillsKeepTheBound: MariaDB can take 2 s over one KILL
// QUERY when several sessions sleep in SLEEP() (it retries waking the victim),
// so that the cancels of many clients that vanish at once queue for seconds
// on the side connection. Before, a KILL still running when its cancel's
// context ended made go-sql-driver close the side connection, and the next
// cancel opened another while the server still listed the first, running
// its KILL: max_conns + 2 sessions. The bound must hold however long the
// server takes, and every statement must still stop.
func TestLoopSQL_SlowKillsKeepTheBound(t *testing.T) {
	for _, d := range loopDBs(t) {
		if d.typ != "mysql" {
			continue
		}
		const maxConns = 32
		ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = maxConns, maxConns })
		smp := d.sample(t)
		marker := fmt.Sprintf("slow_kills_%d", time.Now().UnixNano())
		for round := 0; round < 2; round++ {
			var wg sync.WaitGroup
			gone := make(chan struct{})
			for i := 0; i < maxConns; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := dialInGoroutine(t, ts)
					if cl == nil {
						return
					}
					cl.send(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: d.sleep(60, marker)})
					<-gone
					cl.conn.Close() // gone, its statement running
				}()
			}
			d.awaitRunning(t, marker, maxConns)
			close(gone)
			wg.Wait()
			start := time.Now()
			for {
				n, err := d.running(context.Background(), marker)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				// Behind one side connection, each of the 32 KILLs may take
				// MariaDB 2 s: 64 s at worst (measured: 0.02-8 s); the statements sleep 60 s.
				if time.Since(start) > 55*time.Second {
					t.Fatalf("round %d: %d statements still running 55 s after their clients went", round, n)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("round %d: %d statements of vanished clients stopped %s after they went", round, maxConns, time.Since(start).Round(time.Millisecond))
		}
		smp.finish()
		t.Logf("tetherd's server sessions: at most %d at once over %d samples (max_conns %d)", smp.max.Load(), smp.samples.Load(), maxConns)
		if m := smp.max.Load(); m > maxConns+1 {
			t.Errorf("tetherd held %d server sessions at once with max_conns %d (+1 side connection)", m, maxConns)
		}
		c := dial(t, ts)
		c.okOnceFree(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
	}
}

// TestLoopSQL_PipelinedStatementsCancelled: a batch's statements share a
// connection when the pool has no other (pipelined, one behind the other);
// when the batch's deadline passes, every one of them must be stopped on the
// server, not only the one running first: each needs a cancel of its own, and
// a cancel that reaches the server before its statement began is dropped
// there, so tetherd repeats it until the statement answers. Before, the
// second statement ran to its end and the connection was terminated after
// cancel_timeout (5 s), a new session dialled in its place.
func TestLoopSQL_PipelinedStatementsCancelled(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 1, 1 })
			ctx := context.Background()
			before, err := d.sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cl := dial(t, ts)
			marker := fmt.Sprintf("pipelined_%d", time.Now().UnixNano())
			var ops []wire.Request
			for i := 0; i < 3; i++ {
				ops = append(ops, wire.Request{Op: wire.OpQuery, Backend: "db", SQL: d.sleep(10, fmt.Sprintf("%s_%d", marker, i))})
			}
			start := time.Now()
			rep := cl.do(wire.Request{ID: 1, Op: wire.OpBatch, TimeoutMS: 300, Ops: ops})
			answered := time.Since(start)
			results, _ := rep.Fields["results"].([]any)
			if len(results) != 3 {
				t.Fatalf("batch answered %v", rep.Fields)
			}
			for i, r := range results {
				if code := fmt.Sprint(r.(map[string]any)["error"].(map[string]any)["code"]); code != "timeout" {
					t.Errorf("statement %d: %s, want timeout", i, code)
				}
			}
			// Every statement stops on the server, and soon.
			var stopped time.Duration
			for {
				n, err := d.running(ctx, marker)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					stopped = time.Since(start)
					break
				}
				if time.Since(start) > 3*time.Second {
					t.Fatalf("%d of the batch's statements still running 3 s after its 300 ms deadline", n)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The connection is kept: a statement runs on it, and the pool's
			// session is still there (a terminated one would have been
			// replaced; MySQL's side connection for KILL may be new).
			cl.okOnceFree(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
			after, err := d.sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range before {
				if !contains64(after, id) {
					t.Errorf("server session %d is gone: the connection was terminated rather than its statements cancelled", id)
				}
			}
			t.Logf("3 pipelined statements given up at 300 ms: answered after %s, all stopped on the server after %s", answered.Round(time.Millisecond), stopped.Round(time.Millisecond))
		})
	}
}

// TestLoopSQL_DeadlineTooNearNotSent: a request that waited for a connection
// and has less time left than its statement takes is answered timeout
// (retryable: it did not run) instead of being sent to be cancelled half way.
// Under overload with deadlines, sending such requests is what collapsed
// goodput: the server worked on statements nobody would get (the overload
// campaign of tests/faults measured 8-21% of capacity before).
func TestLoopSQL_DeadlineTooNearNotSent(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 1, 1 })
			stmt := d.sleep(0.05, "too_near")
			// The pool learns what the statement takes while others wait.
			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dial(t, ts)
					for j := 0; j < 2; j++ {
						c.ok(wire.Request{ID: uint32(j + 1), Op: wire.OpQuery, Backend: "db", SQL: stmt})
					}
				}()
			}
			wg.Wait()
			// The one connection busy for 300 ms; then a request with 30 ms
			// left for a statement of 50 ms.
			busy := dial(t, ts)
			busy.send(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: d.sleep(0.3, "too_near_busy")})
			d.awaitRunning(t, "too_near_busy", 1)
			late := dial(t, ts)
			rep := late.do(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: stmt, TimeoutMS: 310})
			e := errCode(t, rep, tether.CodeTimeout)
			if e["retry"] != true {
				t.Fatalf("the request was sent with too little time left and cancelled: %v", e)
			}
			if busy.recv().Error() != nil {
				t.Fatal("the statement that held the connection failed")
			}
			// A request with time enough still runs.
			late.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: stmt, TimeoutMS: 2000})
			t.Logf("answered: %v", e["message"])
		})
	}
}

// TestLoopSQL_VanishedClientReleasesLocks: a PHP worker killed in a
// transaction, in the middle of a statement, must not keep its row locks: the
// statement is cancelled and the transaction rolled back at once.
func TestLoopSQL_VanishedClientReleasesLocks(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 2, 2 })
			tbl := fmt.Sprintf("locks_%d", time.Now().UnixNano()%1e6)
			ctx := context.Background()
			if _, err := d.watch.ExecContext(ctx, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, n INT)"); err != nil {
				t.Fatal(err)
			}
			defer d.watch.ExecContext(ctx, "DROP TABLE "+tbl)
			if _, err := d.watch.ExecContext(ctx, "INSERT INTO "+tbl+" VALUES (1, 0)"); err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("unix", ts.socket)
			if err != nil {
				t.Fatal(err)
			}
			cl := &client{t: t, conn: c}
			rep := cl.ok(wire.Request{ID: 1, Op: wire.OpBegin, Backend: "db"})
			tx := toUint(rep.Fields["tx"])
			cl.ok(wire.Request{ID: 2, Op: wire.OpExec, Tx: tx, SQL: "UPDATE " + tbl + " SET n = n + 1 WHERE id = 1"})
			cl.send(wire.Request{ID: 3, Op: wire.OpQuery, Tx: tx, SQL: d.sleep(10, "locked_sleep")})
			d.awaitRunning(t, "locked_sleep", 1)
			c.Close() // the worker dies with the statement running and the row locked
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := d.watch.ExecContext(cctx, "UPDATE "+tbl+" SET n = n + 10 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			waited := time.Since(start)
			var n int
			if err := d.watch.QueryRowContext(ctx, "SELECT n FROM "+tbl+" WHERE id = 1").Scan(&n); err != nil {
				t.Fatal(err)
			}
			t.Logf("the row lock of a vanished client was released after %s; n = %d", waited.Round(time.Millisecond), n)
			if n != 10 {
				t.Errorf("n = %d: the vanished client's update was committed (want it rolled back: 10)", n)
			}
			if waited > time.Second {
				t.Errorf("the lock was held %s after the client vanished", waited)
			}
		})
	}
}

// BenchmarkLoopSQL_PointRead measures a point read through the server, one at
// a time from one raw client, in process (go test -bench LoopSQL -benchmem,
// with -memprofile to see what the server allocates per read).
func BenchmarkLoopSQL_PointRead(b *testing.B) {
	t := &testing.T{}
	for _, d := range loopDBs(t) {
		b.Run(d.typ, func(b *testing.B) {
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 1, 1 })
			c := dial(b, ts)
			tbl := fmt.Sprintf("bench_read_%d", time.Now().UnixNano()%1e6)
			if _, err := d.watch.Exec("CREATE TABLE " + tbl + " (id INT PRIMARY KEY, name VARCHAR(64), score INT)"); err != nil {
				b.Fatal(err)
			}
			defer d.watch.Exec("DROP TABLE " + tbl)
			if _, err := d.watch.Exec("INSERT INTO " + tbl + " VALUES (1, 'ada', 42)"); err != nil {
				b.Fatal(err)
			}
			q := wire.Request{Op: wire.OpQuery, Backend: "db", SQL: "SELECT id, name, score FROM " + tbl + " WHERE id = " + d.p(1), Params: []any{int64(1)}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.ID = uint32(i + 1)
				if rep := c.do(q); rep.Error() != nil {
					b.Fatal(rep.Error())
				}
			}
		})
	}
}

// TestLoopSQL_TimeFormat: with time_format "sql" a query's DATETIME and
// TIMESTAMP values come in the databases' own text form, as PHP's mysqli, PDO
// and pgsql give them (frameworks compare them with '0000-00-00 00:00:00'
// and parse them with 'Y-m-d H:i:s'), alone, in a transaction and in a batch;
// without it, ISO 8601; DATE and TIME are the same in both.
func TestLoopSQL_TimeFormat(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			c := dial(t, ts)
			sqlText := "SELECT CAST('2024-02-29 23:59:58.5' AS DATETIME(1)) AS dt, CAST('2024-02-29' AS DATE) AS d, " +
				"CAST('0000-00-00 00:00:00' AS DATETIME) AS zero"
			iso := []any{"2024-02-29T23:59:58.5", "2024-02-29", nil}
			sqlForm := []any{"2024-02-29 23:59:58.5", "2024-02-29", nil}
			if d.typ == "postgres" {
				sqlText = "SELECT TIMESTAMP '2024-02-29 23:59:58.5' AS dt, DATE '2024-02-29' AS d, " +
					"TIMESTAMPTZ '2024-02-29 23:59:58+01' AS tz, TIMESTAMP 'infinity' AS inf"
				iso = []any{"2024-02-29T23:59:58.5", "2024-02-29", "2024-02-29T22:59:58Z", "infinity"}
				sqlForm = []any{"2024-02-29 23:59:58.5", "2024-02-29", "2024-02-29 22:59:58+00", "infinity"}
			} else {
				// MariaDB's zero date, which WordPress stores for drafts; the
				// session's sql_mode must allow it for the CAST.
				c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "SET SESSION sql_mode = ''"})
				iso[2], sqlForm[2] = "0000-00-00T00:00:00", "0000-00-00 00:00:00"
			}
			row := func(rep *wire.Reply) []any {
				t.Helper()
				rows, _ := rep.Fields["rows"].([]any)
				if len(rows) != 1 {
					t.Fatalf("want one row, got %v", rep.Fields)
				}
				return rows[0].([]any)
			}
			check := func(what string, got, want []any) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: got %q, want %q", what, got, want)
				}
			}
			check("default", row(c.ok(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: sqlText})), iso)
			check("iso", row(c.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: sqlText, TimeFormat: "iso"})), iso)
			check("sql", row(c.ok(wire.Request{ID: 4, Op: wire.OpQuery, Backend: "db", SQL: sqlText, TimeFormat: "sql"})), sqlForm)
			check("sql, columnar", func() []any {
				cols := c.ok(wire.Request{ID: 5, Op: wire.OpQuery, Backend: "db", SQL: sqlText, TimeFormat: "sql", Columnar: true}).Fields["data"].([]any)
				var r []any
				for _, col := range cols {
					r = append(r, col.([]any)[0])
				}
				return r
			}(), sqlForm)

			tx := toUint(c.ok(wire.Request{ID: 6, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			check("sql, in a transaction", row(c.ok(wire.Request{ID: 7, Op: wire.OpQuery, Tx: tx, SQL: sqlText, TimeFormat: "sql"})), sqlForm)
			c.ok(wire.Request{ID: 8, Op: wire.OpRollback, Tx: tx})

			results := c.ok(wire.Request{ID: 9, Op: wire.OpBatch, Ops: []wire.Request{
				{Op: wire.OpQuery, Backend: "db", SQL: sqlText, TimeFormat: "sql"},
				{Op: wire.OpQuery, Backend: "db", SQL: sqlText},
			}}).Fields["results"].([]any)
			for i, want := range [][]any{sqlForm, iso} {
				rows := results[i].(map[string]any)["rows"].([]any)
				check(fmt.Sprintf("batch op %d", i), rows[0].([]any), want)
			}

			errCode(t, c.do(wire.Request{ID: 10, Op: wire.OpQuery, Backend: "db", SQL: sqlText, TimeFormat: "local"}), tether.CodeBadRequest)
		})
	}
}

// TestLoopSQL_AutocommitOffRefused: SET autocommit = 0 outside a transaction
// would make every later statement of whoever gets the connection open a
// transaction; tetherd resets the session and says so (bad_request), as for
// START TRANSACTION, rather than dropping the setting silently. Inside a
// transaction it is the client's own business until the transaction ends.
func TestLoopSQL_AutocommitOffRefused(t *testing.T) {
	for _, d := range loopDBs(t) {
		if d.typ != "mysql" {
			continue // PostgreSQL has no server-side autocommit
		}
		ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 1, 1 })
		c := dial(t, ts)
		for i, stmt := range []string{"SET autocommit = 0", "/*!40101 SET autocommit = 0 */", "SET SESSION autocommit = OFF"} {
			e := errCode(t, c.do(wire.Request{ID: uint32(10 + i), Op: wire.OpExec, Backend: "db", SQL: stmt}), tether.CodeBadRequest)
			if msg, _ := e["message"].(string); !strings.Contains(msg, "autocommit") {
				t.Errorf("%q: the error does not name autocommit: %q", stmt, msg)
			}
			rows := c.ok(wire.Request{ID: uint32(20 + i), Op: wire.OpQuery, Backend: "db", SQL: "SELECT @@autocommit"}).Fields["rows"].([]any)
			if got := fmt.Sprint(rows[0].([]any)[0]); got != "1" {
				t.Errorf("%q: the next statement runs with autocommit %s", stmt, got)
			}
		}
		tx := toUint(c.ok(wire.Request{ID: 30, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
		c.ok(wire.Request{ID: 31, Op: wire.OpExec, Tx: tx, SQL: "SET autocommit = 0"})
		c.ok(wire.Request{ID: 32, Op: wire.OpCommit, Tx: tx})
		rows := c.ok(wire.Request{ID: 33, Op: wire.OpQuery, Backend: "db", SQL: "SELECT @@autocommit"}).Fields["rows"].([]any)
		if got := fmt.Sprint(rows[0].([]any)[0]); got != "1" {
			t.Errorf("after a transaction that turned autocommit off, the next statement runs with autocommit %s", got)
		}
	}
}

// TestLoopSQL_TransactionEndedBySQL: a transaction that a statement ends on
// the server (COMMIT or ROLLBACK sent as SQL, DDL that commits implicitly on
// MySQL) is over whatever tetherd holds; its commit or rollback must not
// answer OK as if the transaction had been one unit: it says what happened.
func TestLoopSQL_TransactionEndedBySQL(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			c := dial(t, ts)
			table := "tx_ended_by_sql"
			c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS " + table})
			c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE " + table + " (id INT PRIMARY KEY)"})
			t.Cleanup(func() {
				c.do(wire.Request{ID: 99, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS " + table})
			})
			insert := func(id int, tx uint64) {
				t.Helper()
				r := wire.Request{ID: uint32(100 + id), Op: wire.OpExec, SQL: "INSERT INTO " + table + " (id) VALUES (" + strconv.Itoa(id) + ")", Tx: tx}
				if tx == 0 {
					r.Backend = "db"
				}
				c.ok(r)
			}
			ids := func() string {
				t.Helper()
				rows := c.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: "SELECT id FROM " + table + " ORDER BY id"}).Fields["rows"].([]any)
				return fmt.Sprint(rows)
			}
			begin := func() uint64 {
				return toUint(c.ok(wire.Request{ID: 4, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			}

			// A transaction of reads and writes only commits as usual.
			tx := begin()
			c.ok(wire.Request{ID: 5, Op: wire.OpQuery, Tx: tx, SQL: "SELECT 1"})
			insert(1, tx)
			c.ok(wire.Request{ID: 6, Op: wire.OpCommit, Tx: tx})
			tx = begin()
			c.ok(wire.Request{ID: 7, Op: wire.OpQuery, Tx: tx, SQL: "SELECT 1"})
			c.ok(wire.Request{ID: 8, Op: wire.OpCommit, Tx: tx})

			// ROLLBACK in SQL, then a write: the rollback the client asks for
			// cannot undo the write, and says so.
			tx = begin()
			insert(2, tx)
			c.ok(wire.Request{ID: 9, Op: wire.OpExec, Tx: tx, SQL: "ROLLBACK"})
			insert(3, tx)
			e := errCode(t, c.do(wire.Request{ID: 10, Op: wire.OpRollback, Tx: tx}), tether.CodeBadRequest)
			if msg, _ := e["message"].(string); !strings.Contains(msg, `"ROLLBACK"`) || !strings.Contains(msg, "no transaction to roll back") {
				t.Errorf("the error does not name the statement that ended the transaction: %q", msg)
			}
			if got := ids(); got != "[[1] [3]]" {
				t.Errorf("rows after ROLLBACK in SQL: %s, want [[1] [3]] (2 rolled back by the SQL, 3 committed on its own)", got)
			}

			// COMMIT in SQL: commit answers the same way.
			tx = begin()
			insert(4, tx)
			c.ok(wire.Request{ID: 11, Op: wire.OpExec, Tx: tx, SQL: "COMMIT"})
			errCode(t, c.do(wire.Request{ID: 12, Op: wire.OpCommit, Tx: tx}), tether.CodeBadRequest)
			if d.typ == "mysql" {
				// DDL commits implicitly on MySQL/MariaDB.
				tx = begin()
				insert(5, tx)
				c.ok(wire.Request{ID: 13, Op: wire.OpExec, Tx: tx, SQL: "CREATE TABLE IF NOT EXISTS tx_ended_by_ddl (id INT)"})
				c.ok(wire.Request{ID: 14, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS tx_ended_by_ddl"})
				e := errCode(t, c.do(wire.Request{ID: 15, Op: wire.OpRollback, Tx: tx}), tether.CodeBadRequest)
				if msg, _ := e["message"].(string); !strings.Contains(msg, "CREATE TABLE") {
					t.Errorf("the error does not name the DDL: %q", msg)
				}
			}
			// The handle is gone; the pool serves on.
			errCode(t, c.do(wire.Request{ID: 16, Op: wire.OpCommit, Tx: tx}), tether.CodeUnknownTx)
			want := "[[1] [3] [4]]"
			if d.typ == "mysql" {
				want = "[[1] [3] [4] [5]]"
			}
			if got := ids(); got != want {
				t.Errorf("rows at the end: %s, want %s", got, want)
			}
		})
	}
}

// TestLoopSQL_ProcedureResults: a CALL's one result set is a query's rows; a
// procedure that returns two is refused by name (unsupported) rather than
// answered with the first alone, and its writes stand; exec runs it for its
// effect.
func TestLoopSQL_ProcedureResults(t *testing.T) {
	for _, d := range loopDBs(t) {
		if d.typ != "mysql" {
			continue // PostgreSQL procedures return no result sets
		}
		ts := d.start(t, nil)
		ctx := context.Background()
		for _, stmt := range []string{
			"DROP TABLE IF EXISTS proc_log",
			"CREATE TABLE proc_log (v INT)",
			"DROP PROCEDURE IF EXISTS proc_one",
			"CREATE PROCEDURE proc_one(IN n INT) BEGIN SELECT n AS a, n * 2 AS b; END",
			"DROP PROCEDURE IF EXISTS proc_two",
			"CREATE PROCEDURE proc_two(IN n INT) BEGIN INSERT INTO proc_log VALUES (n); SELECT 1 AS x; SELECT 2 AS y; END",
		} {
			if _, err := d.watch.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		t.Cleanup(func() {
			d.watch.ExecContext(ctx, "DROP PROCEDURE IF EXISTS proc_one")
			d.watch.ExecContext(ctx, "DROP PROCEDURE IF EXISTS proc_two")
			d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS proc_log")
		})
		c := dial(t, ts)
		rows := c.ok(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: "CALL proc_one(?)", Params: []any{int64(21)}}).Fields["rows"]
		if fmt.Sprint(rows) != "[[21 42]]" {
			t.Errorf("CALL proc_one(21): rows %v, want [[21 42]]", rows)
		}
		e := errCode(t, c.do(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: "CALL proc_two(?)", Params: []any{int64(7)}}), tether.CodeUnsupported)
		if msg, _ := e["message"].(string); !strings.Contains(msg, "more than one result set") {
			t.Errorf("the error does not say why: %q", msg)
		}
		c.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: "CALL proc_two(?)", Params: []any{int64(8)}})
		var n int
		if err := d.watch.QueryRowContext(ctx, "SELECT COUNT(*) FROM proc_log").Scan(&n); err != nil || n != 2 {
			t.Errorf("proc_log holds %d rows (%v), want 2: the procedure ran both times", n, err)
		}
		// The connection serves on.
		if rows := c.ok(wire.Request{ID: 4, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 5"}).Fields["rows"]; fmt.Sprint(rows) != "[[5]]" {
			t.Errorf("after the procedures: %v", rows)
		}
	}
}

// TestLoopSQL_SessionSettingsNeedNoReset: clients that each set their session
// as WordPress does on connect (SET NAMES with a collation, sql_mode) and
// leave, one after another on one pooled connection, cost no reset of it: the
// settings are applied and unapplied, and the connection keeps its prepared
// statements. (Bringing a connection back to another client's settings took
// the character set change for unpooled state, and reset it every time.)
func TestLoopSQL_SessionSettingsNeedNoReset(t *testing.T) {
	for _, d := range loopDBs(t) {
		if d.typ != "mysql" {
			continue // the collation read-back is MariaDB's
		}
		bc := tether.DefaultBackendConfig(d.typ, d.dsn)
		bc.MaxConns, bc.MinConns = 1, 1
		b, err := mysql.New(bc)
		if err != nil {
			t.Fatal(err)
		}
		ts := startServerWith(t, func(c *tether.Config) { c.Backends["db"] = bc }, map[string]tether.Backend{"db": b})
		collation := "SELECT @@collation_connection"
		fresh := dial(t, ts)
		baseline := firstValue(t, fresh.do(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: collation}))
		fresh.conn.Close()
		for i := 0; i < 20; i++ {
			c := dial(t, ts)
			if i%2 == 0 { // every other client keeps the server's defaults
				c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_520_ci'"})
				c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "SET SESSION sql_mode = 'NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO'"})
			}
			want := "utf8mb4_unicode_520_ci"
			if i%2 == 1 {
				want = baseline // what a client that set nothing has
			}
			if got := firstValue(t, c.do(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: collation})); got != want {
				t.Errorf("client %d: collation %s, want %s", i, got, want)
			}
			c.conn.Close()
		}
		if n := b.Stats().Resets; n != 0 {
			t.Errorf("20 clients with and without session settings: %d resets of the pooled connection, want 0", n)
		}
	}
}
