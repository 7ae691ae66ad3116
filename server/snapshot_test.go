package server_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/admin"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/server"
	"github.com/tether-php/tether/wire"
)

// TestSnapshot_MovesAsRequestsRun: the operator's figures that are not
// request counts (rollbacks by cause, the event loop's work, the pools'
// dials) move when what they count happens.
func TestSnapshot_MovesAsRequestsRun(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.TxIdleTimeout = tether.Duration(200 * time.Millisecond) })
	before := ts.Snapshot()
	if before.Rollbacks["client_gone"] != 0 || before.Rollbacks["idle_timeout"] != 0 {
		t.Fatalf("rollbacks before any transaction: %v", before.Rollbacks)
	}
	gone := dial(t, ts)
	gone.ok(wire.Request{ID: 1, Op: wire.OpBegin})
	gone.conn.Close()
	idle := dial(t, ts)
	idle.ok(wire.Request{ID: 1, Op: wire.OpBegin})
	for i := 0; ; i++ {
		snap := ts.Snapshot()
		if snap.Rollbacks["client_gone"] == 1 && snap.Rollbacks["idle_timeout"] == 1 {
			if snap.EventLoop.Turns <= before.EventLoop.Turns || snap.EventLoop.BusySeconds <= before.EventLoop.BusySeconds {
				t.Fatalf("the event loop's work did not move: %+v then %+v", before.EventLoop, snap.EventLoop)
			}
			break
		}
		if i == 300 {
			t.Fatalf("rollbacks by cause: %v, want one client_gone and one idle_timeout", snap.Rollbacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range optionalLoopDBs(t) {
		dts := d.start(t, nil)
		c := dial(t, dts)
		c.ok(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
		if st := dts.Snapshot().Pools[0].Stats; st.Dials < 1 || st.DialErrors != 0 {
			t.Errorf("%s: dials %d, dial errors %d after a query", d.typ, st.Dials, st.DialErrors)
		}
	}
}

// replicatedPair is a real primary and its replica, for a server test of
// what operators see of a replicated backend.
type replicatedPair struct {
	typ                     string
	primary, replica        string // the DSNs of the backend's user
	replicaAdmin            string // a DSN that may pause the replica's apply
	driver                  string
	pauseApply, resumeApply string
}

// replicatedPairs returns the pairs of TETHER_TEST_{MYSQL,POSTGRES}_* (make
// test's start_mariadb_pair and start_postgres_pair), skipping the test when
// there is none (failing it with TETHER_REQUIRE_BACKENDS).
func replicatedPairs(t *testing.T) []replicatedPair {
	var out []replicatedPair
	if os.Getenv("TETHER_TEST_MYSQL_PRIMARY_DSN") != "" || os.Getenv("TETHER_REQUIRE_BACKENDS") != "" {
		out = append(out, replicatedPair{typ: "mysql", driver: "mysql",
			primary: backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN"), replica: backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_DSN"),
			replicaAdmin: backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN"),
			pauseApply:   "STOP SLAVE SQL_THREAD", resumeApply: "START SLAVE SQL_THREAD"})
	}
	if os.Getenv("TETHER_TEST_POSTGRES_PRIMARY_DSN") != "" || os.Getenv("TETHER_REQUIRE_BACKENDS") != "" {
		out = append(out, replicatedPair{typ: "postgres", driver: "pgx",
			primary: backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN"), replica: backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN"),
			replicaAdmin: backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN"),
			pauseApply:   "SELECT pg_wal_replay_pause()", resumeApply: "SELECT pg_wal_replay_resume()"})
	}
	if len(out) == 0 {
		t.Skip("no replicated pair: set TETHER_TEST_MYSQL_PRIMARY_DSN etc. and/or TETHER_TEST_POSTGRES_PRIMARY_DSN etc. (make test does)")
	}
	return out
}

// TestSnapshot_Topology: a replicated backend's hosts, as routing moves
// requests and as the replica stops applying, in the Snapshot and through
// the admin API's views of it (/status.json, /metrics, /status).
func TestSnapshot_Topology(t *testing.T) {
	pairs := replicatedPairs(t)
	backendtest.LockReplicaPairs(t)
	for _, p := range pairs {
		t.Run(p.typ, func(t *testing.T) {
			bc := tether.DefaultBackendConfig(p.typ, p.primary)
			bc.Replicas = []string{p.replica}
			bc.MonitorInterval = tether.Duration(50 * time.Millisecond)
			var b tether.Backend
			var err error
			if p.typ == "mysql" {
				b, err = mysql.NewReplicated(bc)
			} else {
				b, err = postgres.NewReplicated(bc)
			}
			if err != nil {
				t.Fatal(err)
			}
			ts := startServerWith(t, func(c *tether.Config) { c.Backends["db"] = bc }, map[string]tether.Backend{"db": b})
			topo := func() *tether.TopologyStats {
				for _, pool := range ts.Snapshot().Pools {
					if pool.Backend == "db" {
						return pool.Topology
					}
					if pool.Topology != nil {
						t.Fatalf("backend %s of one server reports a topology: %+v", pool.Backend, pool.Topology)
					}
				}
				t.Fatal("no pool db")
				return nil
			}
			eventually(t, "the primary to take writes and the replica reads", func() bool {
				tp := topo()
				return tp != nil && len(tp.Hosts) == 2 && tp.Hosts[0].State == "writes" && tp.Hosts[1].State == "reads"
			})

			writer, reader := dial(t, ts), dial(t, ts)
			before := *topo()
			writer.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE IF NOT EXISTS tether_topo_seen (n INT)"})
			writer.ok(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"}) // after its own write
			const reads = 10
			for i := 0; i < reads; i++ {
				reader.ok(wire.Request{ID: uint32(3 + i), Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
			}
			tp := topo()
			pri, rep := tp.Hosts[0], tp.Hosts[1]
			if pri.Role != "primary" || rep.Role != "replica" || pri.Addr == "" || rep.Addr == "" || pri.Addr == rep.Addr {
				t.Errorf("hosts %+v %+v: want a primary then a replica, each by its address", pri, rep)
			}
			// (A replica's position may still be empty: a new MariaDB
			// replica has none until it applied a transaction.)
			if pri.CheckedAt.IsZero() || rep.CheckedAt.IsZero() || pri.Position == "" {
				t.Errorf("hosts %+v %+v: want their last probe's time, and the primary's position", pri, rep)
			}
			if got := rep.Reads - before.Hosts[1].Reads; got < reads {
				t.Errorf("the replica served %d reads, want at least the other client's %d", got, reads)
			}
			if got := pri.Writes - before.Hosts[0].Writes; got < 1 {
				t.Errorf("the primary took %d requests, want at least the write", got)
			}
			if got := tp.CausalPrimary + tp.CausalReplica - before.CausalPrimary - before.CausalReplica; got < 1 {
				t.Errorf("%d reads after their client's own write counted, want 1", got)
			}
			if pri.Pool.Open < 1 || rep.Pool.Open < 1 || pri.Pool.Dials < 1 || rep.Pool.Dials < 1 {
				t.Errorf("the hosts' pools: %+v %+v, want a connection each", pri.Pool, rep.Pool)
			}
			if tp.FailoversTotal != 0 || len(tp.Failovers) != 0 {
				t.Errorf("failovers %d %+v with the primary up all along", tp.FailoversTotal, tp.Failovers)
			}

			h := admin.Handler(ts.Server)
			_, metrics := adminGet(t, h, "/metrics")
			for _, want := range []string{
				fmt.Sprintf(`tether_host_state{backend="db",host=%q,state="writes"} 1`, pri.Addr),
				fmt.Sprintf(`tether_host_state{backend="db",host=%q,state="reads"} 1`, rep.Addr),
				fmt.Sprintf(`tether_host_role{backend="db",host=%q,role="replica"} 1`, rep.Addr),
				fmt.Sprintf(`tether_host_up{backend="db",host=%q} 1`, pri.Addr),
				`tether_failovers_total{backend="db"} 0`,
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("/metrics has no line %q", want)
				}
			}
			if !strings.Contains(metrics, fmt.Sprintf(`tether_host_routed_total{backend="db",host=%q,kind="read"} `, rep.Addr)) {
				t.Errorf("/metrics has no routed reads for the replica")
			}
			_, page := adminGet(t, h, "/status")
			if !strings.Contains(page, "<h2>Hosts of db</h2>") || !strings.Contains(page, "<td>"+rep.Addr+"</td><td>replica</td><td class=\"host-reads\">reads</td>") {
				t.Errorf("/status has no host table for db:\n%s", page)
			}
			_, js := adminGet(t, h, "/status.json")
			var snap server.Snapshot
			if err := json.Unmarshal([]byte(js), &snap); err != nil {
				t.Fatal(err)
			}
			if got := snap.Pools[0].Topology; snap.Pools[0].Backend != "db" || got == nil || len(got.Hosts) != 2 || got.Hosts[1].Addr != rep.Addr {
				t.Errorf("/status.json: pool %s topology %+v", snap.Pools[0].Backend, got)
			}

			// The replica stops applying: shunned, said why, counted; and
			// back in reads once it applies again.
			adm, err := sql.Open(p.driver, p.replicaAdmin)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			if _, err := adm.Exec(p.pauseApply); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					adm.Exec(p.resumeApply)
				}
			}()
			eventually(t, "the replica to be shunned", func() bool { return topo().Hosts[1].State == "shunned" })
			rep = topo().Hosts[1]
			// Why: not replicating, or (PostgreSQL, whose lag is the time since
			// the last replayed commit while WAL waits) too far behind.
			if rep.Shunned <= before.Hosts[1].Shunned || !strings.Contains(rep.Why, "not replicating") && !strings.Contains(rep.Why, "behind") {
				t.Errorf("shunned replica %+v: want its shunned count up and why", rep)
			}
			_, metrics = adminGet(t, h, "/metrics")
			for _, want := range []string{
				fmt.Sprintf(`tether_host_state{backend="db",host=%q,state="shunned"} 1`, rep.Addr),
				fmt.Sprintf(`tether_host_state{backend="db",host=%q,state="reads"} 0`, rep.Addr),
				fmt.Sprintf(`tether_host_shunned_total{backend="db",host=%q} %d`, rep.Addr, rep.Shunned),
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("/metrics has no line %q", want)
				}
			}
			if _, err := adm.Exec(p.resumeApply); err != nil {
				t.Fatal(err)
			}
			resumed = true
			eventually(t, "the replica back in reads", func() bool { return topo().Hosts[1].State == "reads" })
		})
	}
}

// adminGet serves one GET of the admin API from h.
func adminGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}
