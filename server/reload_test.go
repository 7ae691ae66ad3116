package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/sqlite"
	"github.com/tether-php/tether/server"
	"github.com/tether-php/tether/wire"
)

// buildBackend is the reload's backend constructor (tetherd's, for the
// types these tests use).
func buildBackend(_ string, bc tether.BackendConfig) (tether.Backend, error) {
	switch bc.Type {
	case "sqlite":
		return sqlite.New(bc)
	case "mysql":
		return mysql.New(bc)
	case "postgres":
		return postgres.New(bc)
	}
	return nil, fmt.Errorf("unknown type %q", bc.Type)
}

func reload(t *testing.T, ts *testServer, cfg tether.Config) server.ReloadReport {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := ts.Reload(ctx, cfg, buildBackend)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	return rep
}

// waitRetired waits until no pool a reload replaced is still open.
func waitRetired(t *testing.T, ts *testServer, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		retiring := 0
		for _, p := range ts.Snapshot().Pools {
			if p.Retiring {
				retiring++
			}
		}
		if retiring == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d retired pools still open after %s", retiring, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// copyConfig returns cfg with a map of backends of its own.
func copyConfig(cfg tether.Config) tether.Config {
	out := cfg
	out.Backends = map[string]tether.BackendConfig{}
	for k, v := range cfg.Backends {
		out.Backends[k] = v
	}
	return out
}

// TestReload_UnderLoad reloads 100 times while clients on persistent
// connections run reads, writes and transactions that span the reloads:
// every pool is replaced on each reload (its max_conns changes) and a backend
// comes and goes. Not one request may fail, and the replaced pools must all
// close (on MariaDB and PostgreSQL: the server's sessions go back to the pool
// bound).
func TestReload_UnderLoad(t *testing.T) {
	dbs := optionalLoopDBs(t)
	tweakDB := func(c *tether.Config) {
		for _, d := range dbs {
			bc := tether.DefaultBackendConfig(d.typ, d.dsn)
			bc.MaxConns = 4
			c.Backends[d.typ] = bc
		}
	}
	given := map[string]tether.Backend{}
	for _, d := range dbs {
		bc := tether.DefaultBackendConfig(d.typ, d.dsn)
		bc.MaxConns = 4
		b, err := buildBackend(d.typ, bc)
		if err != nil {
			t.Fatal(err)
		}
		given[d.typ] = b
	}
	ts := startServerWith(t, func(c *tether.Config) {
		c.Backends["main"] = func() tether.BackendConfig { bc := c.Backends["main"]; bc.MaxConns = 4; return bc }()
		tweakDB(c)
	}, given)
	backends := []string{"main"}
	for _, d := range dbs {
		backends = append(backends, d.typ)
		setup := dial(t, ts)
		setup.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: d.typ, SQL: "DROP TABLE IF EXISTS reload_load"})
		setup.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: d.typ, SQL: "CREATE TABLE reload_load (id INT PRIMARY KEY, n INT)"})
	}
	setup := dial(t, ts)
	setup.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE reload_load (id INT PRIMARY KEY, n INT)"})

	const workers = 8
	var ops, failures atomic.Int64
	var failMu sync.Mutex
	var failed []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, ts)
			fail := func(what string, rep *wire.Reply) bool {
				if e := rep.Error(); e != nil {
					failures.Add(1)
					failMu.Lock()
					if len(failed) < 10 {
						failed = append(failed, fmt.Sprintf("%s: %v", what, e))
					}
					failMu.Unlock()
					return true
				}
				ops.Add(1)
				return false
			}
			var id uint32
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				be := backends[i%len(backends)]
				id++
				if i%4 != 3 {
					fail("query "+be, c.do(wire.Request{ID: id, Op: wire.OpQuery, Backend: be, SQL: "SELECT COUNT(*) FROM reload_load"}))
					continue
				}
				// A transaction that lives across a reload or two.
				rep := c.do(wire.Request{ID: id, Op: wire.OpBegin, Backend: be})
				if fail("begin "+be, rep) {
					continue
				}
				tx := toUint(rep.Fields["tx"])
				key := w*1_000_000 + i
				id++
				p := "?"
				if be == "postgres" {
					p = "$1"
				}
				fail("insert "+be, c.do(wire.Request{ID: id, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO reload_load (id, n) VALUES (" + p + ", 1)", Params: []any{int64(key)}}))
				time.Sleep(3 * time.Millisecond) // the transaction stays open across reloads
				id++
				fail("commit "+be, c.do(wire.Request{ID: id, Op: wire.OpCommit, Tx: tx}))
			}
		}()
	}

	var samplers []*sampler
	for _, d := range dbs {
		samplers = append(samplers, d.sample(t))
	}
	maxRetiring := 0
	base := copyConfig(ts.cfg)
	start := time.Now()
	var reports []server.ReloadReport
	for i := 0; i < 100; i++ {
		cfg := copyConfig(base)
		for name, bc := range cfg.Backends {
			bc.MaxConns = 4 + (i+1)%2*2 // 6, 4, 6...: every pool changes on every reload
			cfg.Backends[name] = bc
		}
		if i%2 == 0 {
			cfg.Backends["extra"] = tether.DefaultBackendConfig("sqlite", filepath.Join(t.TempDir(), "extra.db"))
		}
		reports = append(reports, reload(t, ts, cfg))
		time.Sleep(10 * time.Millisecond) // the load runs between reloads; the count below is sampled, not awaited
		retiring := 0
		for _, p := range ts.Snapshot().Pools {
			if p.Retiring {
				retiring++
			}
		}
		maxRetiring = max(maxRetiring, retiring)
	}
	took := time.Since(start)
	for i, s := range samplers {
		s.finish()
		// The new pool's max_conns (6), and the connections of replaced
		// pools still serving requests admitted before their reload (a
		// retiring pool keeps no idle one): at most one per worker. The
		// server may show a closed session a moment longer.
		t.Logf("%s: at most %d server sessions during the reloads", dbs[i].typ, s.max.Load())
		if s.max.Load() > 6+workers+10 {
			t.Errorf("%s: %d server sessions during the reloads: the replaced pools hold connections they do not need", dbs[i].typ, s.max.Load())
		}
	}
	t.Logf("at most %d pools retiring at once", maxRetiring)
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.Logf("server log:\n%s", ts.logs.String())
	}
	failMu.Lock()
	defer failMu.Unlock()
	if failures.Load() > 0 {
		t.Fatalf("%d of %d requests failed across 100 reloads; first: %s", failures.Load(), ops.Load()+failures.Load(), strings.Join(failed, "; "))
	}
	if ops.Load() < 1000 {
		t.Fatalf("only %d requests ran during the reloads", ops.Load())
	}
	if got := reports[0]; len(got.Changed) != len(backends) || len(got.Added) != 1 {
		t.Fatalf("first reload: %+v", got)
	}
	if got := reports[1]; len(got.Removed) != 1 || got.Removed[0] != "extra" {
		t.Fatalf("second reload: %+v", got)
	}
	waitRetired(t, ts, 10*time.Second)
	for _, d := range dbs {
		deadline := time.Now().Add(5 * time.Second)
		for {
			ids, err := d.sessions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) <= 6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d server sessions after the reloads, max_conns is 6: the replaced pools did not close", d.typ, len(ids))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("100 reloads in %s under load: %d requests, 0 failed", took.Round(time.Millisecond), ops.Load())
}

// TestReload_Refused: a reload whose backend cannot be built or reached
// changes nothing, and says which backend and why.
func TestReload_Refused(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE t (id INT)"})
	before := ts.Snapshot().Pools

	for _, tc := range []struct {
		name string
		bc   tether.BackendConfig
		want string
	}{
		{"unreachable", tether.DefaultBackendConfig("mysql", "tether:x@tcp(127.0.0.1:1)/none"), "down"},
		{"unbuildable", tether.BackendConfig{Type: "nosuch", DSN: "x"}, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := copyConfig(ts.cfg)
			main := cfg.Backends["main"]
			main.MaxConns = 7 // would be a change, if the reload went through
			cfg.Backends["main"] = main
			name := tc.want
			cfg.Backends[name] = tc.bc
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := ts.Reload(ctx, cfg, buildBackend)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "nothing changed") {
				t.Fatalf("want an error naming backend %q and saying nothing changed, got %v", name, err)
			}
			after := ts.Snapshot().Pools
			if len(after) != len(before) || after[0].Backend != "main" || after[0].Retiring {
				t.Fatalf("pools changed: %+v", after)
			}
			c.ok(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT COUNT(*) FROM t"})
			errCode(t, c.do(wire.Request{ID: 3, Op: wire.OpQuery, Backend: name, SQL: "SELECT 1"}), tether.CodeUnknownBackend)
		})
	}
}

// TestReload_RemovedBackendWithOpenTransaction: a reload removes a backend
// on which a client holds a transaction. New requests to it are refused at
// once; the transaction goes on and commits on the old pool, which closes
// after.
func TestReload_RemovedBackendWithOpenTransaction(t *testing.T) {
	dbs := optionalLoopDBs(t)
	sidePath := filepath.Join(t.TempDir(), "side.db")
	given := map[string]tether.Backend{}
	ts := startServerWith(t, func(c *tether.Config) {
		c.Backends["side"] = tether.DefaultBackendConfig("sqlite", sidePath)
		for _, d := range dbs {
			c.Backends[d.typ] = tether.DefaultBackendConfig(d.typ, d.dsn)
			b, err := buildBackend(d.typ, c.Backends[d.typ])
			if err != nil {
				t.Fatal(err)
			}
			given[d.typ] = b
		}
	}, given)
	names := []string{"side"}
	for _, d := range dbs {
		names = append(names, d.typ)
	}
	c := dial(t, ts)
	for _, be := range names {
		c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: be, SQL: "DROP TABLE IF EXISTS reload_tx"})
		c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: be, SQL: "CREATE TABLE reload_tx (id INT)"})
	}
	txs := map[string]uint64{}
	for _, be := range names {
		tx := toUint(c.ok(wire.Request{ID: 3, Op: wire.OpBegin, Backend: be}).Fields["tx"])
		c.ok(wire.Request{ID: 4, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO reload_tx VALUES (1)"})
		txs[be] = tx
	}
	cfg := copyConfig(ts.cfg)
	for _, be := range names {
		delete(cfg.Backends, be)
	}
	rep := reload(t, ts, cfg)
	if len(rep.Removed) != len(names) {
		t.Fatalf("removed %v, want %v", rep.Removed, names)
	}
	retiring := 0
	for _, p := range ts.Snapshot().Pools {
		if p.Retiring {
			retiring++
		}
	}
	if retiring != len(names) {
		t.Fatalf("%d pools retiring, want %d (their transactions are open)", retiring, len(names))
	}
	for _, be := range names {
		errCode(t, c.do(wire.Request{ID: 5, Op: wire.OpQuery, Backend: be, SQL: "SELECT 1"}), tether.CodeUnknownBackend)
		c.ok(wire.Request{ID: 6, Op: wire.OpExec, Tx: txs[be], SQL: "INSERT INTO reload_tx VALUES (2)"})
		c.ok(wire.Request{ID: 7, Op: wire.OpCommit, Tx: txs[be]})
	}
	waitRetired(t, ts, 5*time.Second)
	if n := sqliteCount(t, sidePath, "reload_tx"); n != 2 {
		t.Fatalf("side has %d rows after the commit, want 2", n)
	}
	for _, d := range dbs {
		var n int
		if err := d.watch.QueryRow("SELECT COUNT(*) FROM reload_tx").Scan(&n); err != nil || n != 2 {
			t.Fatalf("%s has %d rows after the commit (%v), want 2", d.typ, n, err)
		}
	}
}

// TestReload_SessionSettingsFollow: a client's session settings on a MySQL or
// PostgreSQL backend are kept when a reload replaces the backend's pool.
func TestReload_SessionSettingsFollow(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			c := dial(t, ts)
			set, show, want := "SET time_zone = '+03:00'", "SELECT @@time_zone", "+03:00"
			if d.typ == "postgres" {
				set, show, want = "SET application_name = 'reload_follow'", "SHOW application_name", "reload_follow"
			}
			c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: set})
			cfg := copyConfig(ts.cfg)
			bc := cfg.Backends["db"]
			bc.MaxConns++
			cfg.Backends["db"] = bc
			if rep := reload(t, ts, cfg); len(rep.Changed) != 1 {
				t.Fatalf("reload: %+v", rep)
			}
			got := c.ok(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: show}).Fields["rows"].([]any)[0].([]any)[0]
			if fmt.Sprint(got) != want {
				t.Fatalf("after the reload the session's setting is %v, want %s", got, want)
			}
			other := dial(t, ts)
			if got := other.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: show}).Fields["rows"].([]any)[0].([]any)[0]; fmt.Sprint(got) == want {
				t.Fatalf("another client sees the first one's setting %v", got)
			}
		})
	}
}

// TestReload_CountersCarryOn: a backend's pool counters (dials, waits,
// cancels...) count since tetherd started, across the reloads that replace
// its pool: a Prometheus counter must never go down. Before, they started
// again from 0 with each new pool.
func TestReload_CountersCarryOn(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			bc := tether.DefaultBackendConfig(d.typ, d.dsn)
			bc.MaxConns, bc.MinConns = 2, 2
			b, err := buildBackend("db", bc)
			if err != nil {
				t.Fatal(err)
			}
			ts := startServerWith(t, func(c *tether.Config) { c.Backends["db"] = bc }, map[string]tether.Backend{"db": b})
			dials := func() int64 {
				for _, p := range ts.Snapshot().Pools {
					if p.Backend == "db" && !p.Retiring {
						return p.Stats.Dials
					}
				}
				t.Fatal("no pool db")
				return 0
			}
			// atLeast waits for the pools' dials (min_conns are dialled in
			// the background) to reach n.
			atLeast := func(n int64) int64 {
				deadline := time.Now().Add(5 * time.Second)
				for {
					got := dials()
					if got >= n || time.Now().After(deadline) {
						return got
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			c := dial(t, ts)
			last := atLeast(2)
			if last < 2 {
				t.Fatalf("dials %d, want at least min_conns (2)", last)
			}
			// Sampled all along: never lower than the sample before, the
			// moments of each swap included.
			var wentDown atomic.Value
			stop, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				prev := int64(0)
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, p := range ts.Snapshot().Pools {
						if p.Backend == "db" && !p.Retiring {
							if p.Stats.Dials < prev {
								wentDown.CompareAndSwap(nil, fmt.Sprintf("dials went from %d to %d", prev, p.Stats.Dials))
							}
							prev = p.Stats.Dials
						}
					}
				}
			}()
			defer func() {
				close(stop)
				<-sampled
				if msg := wentDown.Load(); msg != nil {
					t.Errorf("sampled during the reloads: %s", msg)
				}
			}()
			for i := 0; i < 5; i++ {
				cfg := copyConfig(ts.cfg)
				nb := cfg.Backends["db"]
				nb.MaxConns = 3 + i%2 // a change: the pool is replaced
				cfg.Backends["db"] = nb
				reload(t, ts, cfg)
				c.ok(wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
				if now := atLeast(last + 2); now < last+2 {
					t.Fatalf("reload %d: dials went from %d to %d; the new pool's 2 dials should add to them", i, last, now)
				}
				last = dials()
				waitRetired(t, ts, 10*time.Second)
				if now := dials(); now < last {
					t.Fatalf("reload %d: dials went down from %d to %d once the old pool closed", i, last, now)
				}
				last = dials()
			}
			if last < 12 {
				t.Fatalf("dials %d after 5 reloads of a pool of min_conns 2, want at least 12", last)
			}
		})
	}
}
