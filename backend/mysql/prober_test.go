package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/topology"
)

// The prober's tests run against the replicated pair scripts/lib/replicas.sh
// starts (start_mariadb_pair): a GTID primary and its read-only replica.

// pair is the replicated MariaDB pair: probers as the application's user,
// and root connections for the tests' own writes, pauses and promotes.
type pair struct {
	primary, replica           *mysql.Prober
	primaryAdmin, replicaAdmin *sql.DB
}

func openPair(t *testing.T) *pair {
	t.Helper()
	backendtest.LockReplicaPairs(t)
	p := &pair{}
	var err error
	if p.primary, err = mysql.NewProber(backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.primary.Close() })
	if p.replica, err = mysql.NewProber(backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_DSN")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.replica.Close() })
	for _, a := range []struct {
		db  **sql.DB
		env string
	}{{&p.primaryAdmin, "TETHER_TEST_MYSQL_PRIMARY_ADMIN_DSN"}, {&p.replicaAdmin, "TETHER_TEST_MYSQL_REPLICA_ADMIN_DSN"}} {
		db, err := sql.Open("mysql", backendtest.RequireEnv(t, a.env))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		*a.db = db
	}
	return p
}

func probe(t *testing.T, p *mysql.Prober) topology.HostStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := p.Probe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func exec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// waitFor probes p until ok holds for its status, failing after 15 s.
func waitFor(t *testing.T, p *mysql.Prober, what string, ok func(topology.HostStatus) bool) topology.HostStatus {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := probe(t, p)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s; last status %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newTable creates a table of its own on the primary and waits until the
// replica has it.
func (p *pair) newTable(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano())
	exec(t, p.primaryAdmin, "CREATE TABLE "+name+" (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	t.Cleanup(func() { _, _ = p.primaryAdmin.Exec("DROP TABLE IF EXISTS " + name) })
	p.caughtUp(t)
	return name
}

// caughtUp waits until the replica has applied the primary's position.
func (p *pair) caughtUp(t *testing.T) topology.HostStatus {
	t.Helper()
	want := probe(t, p.primary).Position
	return waitFor(t, p.replica, "replica applies "+want, func(st topology.HostStatus) bool { return st.Position == want })
}

// TestProber_Roles: the primary says primary and writable, the replica
// replica, read-only and replicating, each at its own address.
func TestProber_Roles(t *testing.T) {
	p := openPair(t)
	p.newTable(t, "prober_roles") // a position to report
	pr := probe(t, p.primary)
	if pr.Role != topology.RolePrimary || pr.ReadOnly || pr.Replicating || pr.Position == "" || !pr.LagKnown || pr.Lag != 0 {
		t.Errorf("primary: %+v, want a writable primary with a position and no lag", pr)
	}
	re := probe(t, p.replica)
	if re.Role != topology.RoleReplica || !re.ReadOnly || !re.Replicating || !re.LagKnown || re.Position != pr.Position {
		t.Errorf("replica: %+v, want a read-only replica replicating, at the primary's position %q", re, pr.Position)
	}
	if pr.Addr == "" || pr.Addr == re.Addr {
		t.Errorf("addresses %q and %q: want two", pr.Addr, re.Addr)
	}
	// The role is the server's: the replica refuses the application's write.
	db, err := sql.Open("mysql", os.Getenv("TETHER_TEST_MYSQL_REPLICA_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE prober_refused (id INT)"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write on the replica: %v, want refused as read-only", err)
	}
}

// TestProber_Position: a write on the primary moves its position, and the
// replica reaches it.
func TestProber_Position(t *testing.T) {
	p := openPair(t)
	table := p.newTable(t, "prober_pos")
	before := probe(t, p.primary).Position
	exec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) VALUES (1)")
	after := probe(t, p.primary).Position
	if after == before {
		t.Fatalf("primary position %q unchanged by a write", after)
	}
	re := p.caughtUp(t)
	if re.BehindBy != 0 || re.ReceivedPosition != after {
		t.Errorf("caught-up replica: %+v, want received %q and nothing behind", re, after)
	}
}

// TestProber_LagPaused: with the replica's SQL thread stopped, a write is
// received but not applied: the replica says so (not replicating, behind by
// a transaction, Seconds_Behind_Master NULL), and catches up once started.
func TestProber_LagPaused(t *testing.T) {
	p := openPair(t)
	table := p.newTable(t, "prober_paused")
	exec(t, p.replicaAdmin, "STOP SLAVE SQL_THREAD")
	t.Cleanup(func() { _, _ = p.replicaAdmin.Exec("START SLAVE SQL_THREAD") })
	exec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) VALUES (1), (2)")
	exec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) VALUES (3)")
	want := probe(t, p.primary).Position
	re := waitFor(t, p.replica, "replica receives "+want, func(st topology.HostStatus) bool { return st.ReceivedPosition == want })
	if re.Replicating || re.LagKnown || re.BehindBy != 2 || re.Position == want || re.Role != topology.RoleReplica {
		t.Errorf("paused replica: %+v, want a replica not replicating, lag unknown, 2 transactions behind", re)
	}
	exec(t, p.replicaAdmin, "START SLAVE SQL_THREAD")
	re = p.caughtUp(t)
	re = waitFor(t, p.replica, "replica replicating again", func(st topology.HostStatus) bool { return st.Replicating })
	if re.BehindBy != 0 || !re.LagKnown || re.Lag != 0 {
		t.Errorf("resumed replica: %+v, want nothing behind and no lag", re)
	}
}

// TestProber_LagGrows: with the replica's apply held behind a table lock,
// Seconds_Behind_Master grows, and falls to 0 once the lock goes.
func TestProber_LagGrows(t *testing.T) {
	p := openPair(t)
	table := p.newTable(t, "prober_lag")
	ctx := context.Background()
	lock, err := p.replicaAdmin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "LOCK TABLES "+table+" READ"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			_, _ = lock.ExecContext(ctx, "UNLOCK TABLES")
		}
	}()
	exec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) VALUES (1)")
	re := waitFor(t, p.replica, "lag reaches 2s", func(st topology.HostStatus) bool { return st.LagKnown && st.Lag >= 2*time.Second })
	if re.Role != topology.RoleReplica || !re.Replicating || re.Position == probe(t, p.primary).Position {
		t.Errorf("held replica: %+v, want a replica still replicating, behind the primary", re)
	}
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	unlocked = true
	p.caughtUp(t)
	re = waitFor(t, p.replica, "lag falls to 0", func(st topology.HostStatus) bool { return st.LagKnown && st.Lag == 0 })
	if re.BehindBy != 0 {
		t.Errorf("released replica: %+v, want nothing behind", re)
	}
}

// TestProber_Promote: after STOP SLAVE, RESET SLAVE ALL and read_only off,
// the old replica says primary, and a Monitor of the pair calls back with the
// change. The test then makes it a replica again, as it found it.
func TestProber_Promote(t *testing.T) {
	p := openPair(t)
	p.newTable(t, "prober_promote")
	srcHost, srcPort, err := net.SplitHostPort(backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	replUser := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPL_USER")
	replPassword := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPL_PASSWORD")

	changes := make(chan [2]topology.HostStatus, 16)
	m, err := topology.NewMonitor(topology.MonitorConfig{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second,
		OnChange: func(o, n topology.HostStatus) { changes <- [2]topology.HostStatus{o, n} }},
		[]topology.Host{{Addr: "primary", Prober: p.primary}, {Addr: "replica", Prober: p.replica}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	next := func(what string) topology.HostStatus {
		t.Helper()
		select {
		case c := <-changes:
			return c[1]
		case <-time.After(10 * time.Second):
			t.Fatalf("no callback for %s within 10s", what)
			return topology.HostStatus{}
		}
	}
	seen := map[string]topology.Role{}
	for len(seen) < 2 {
		st := next("the first probes")
		seen[st.Addr] = st.Role
	}
	if seen["primary"] != topology.RolePrimary || seen["replica"] != topology.RoleReplica {
		t.Fatalf("monitor's first roles %v, want primary and replica", seen)
	}

	restore := func() {
		for _, q := range []string{"STOP SLAVE", "SET GLOBAL read_only = 1",
			fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '%s', MASTER_PORT = %s, MASTER_USER = '%s', MASTER_PASSWORD = '%s', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
				srcHost, srcPort, replUser, replPassword),
			"START SLAVE"} {
			if _, err := p.replicaAdmin.Exec(q); err != nil {
				t.Errorf("making the replica a replica again: %s: %v", q, err)
			}
		}
	}
	promoted := false
	defer func() {
		if promoted {
			restore()
		}
	}()
	promoted = true
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0"} {
		exec(t, p.replicaAdmin, q)
	}
	if st := next("the promote"); st.Addr != "replica" || st.Role != topology.RolePrimary {
		t.Errorf("callback after the promote: %+v, want the replica's host now primary", st)
	}
	st := probe(t, p.replica)
	if st.Role != topology.RolePrimary || st.ReadOnly || st.Replicating || st.ReceivedPosition != "" {
		t.Errorf("promoted replica: %+v, want a writable primary replicating from nothing", st)
	}

	promoted = false
	restore()
	if st := next("the demote"); st.Addr != "replica" || st.Role != topology.RoleReplica {
		t.Errorf("callback after the demote: %+v, want the replica's host a replica again", st)
	}
	waitFor(t, p.replica, "replicating again", func(st topology.HostStatus) bool { return st.Replicating })
	p.caughtUp(t)
}

// TestProber_Unreachable: a server that does not answer fails the probe
// with an error naming it; no server needed.
func TestProber_Unreachable(t *testing.T) {
	p, err := mysql.NewProber("u:p@tcp(127.0.0.1:1)/db")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := p.Probe(ctx); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("probe of a closed port: %+v, %v; want an error naming the address", st, err)
	}
}
