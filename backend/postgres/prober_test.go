package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/topology"
)

// The prober's tests run against the streaming pair scripts/lib/replicas.sh
// starts (start_postgres_pair): a primary and a hot standby made by
// pg_basebackup -R.

// pair is the streaming PostgreSQL pair: probers as the application's user,
// and superuser connections for the tests' own writes, pauses and promotes.
type pair struct {
	primary, replica           *postgres.Prober
	primaryAdmin, replicaAdmin *sql.DB
}

func openPair(t *testing.T) *pair {
	t.Helper()
	backendtest.LockReplicaPairs(t)
	p := &pair{}
	var err error
	if p.primary, err = postgres.NewProber(backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.primary.Close() })
	if p.replica, err = postgres.NewProber(backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.replica.Close() })
	for _, a := range []struct {
		db  **sql.DB
		env string
	}{{&p.primaryAdmin, "TETHER_TEST_POSTGRES_PRIMARY_ADMIN_DSN"}, {&p.replicaAdmin, "TETHER_TEST_POSTGRES_REPLICA_ADMIN_DSN"}} {
		db, err := sql.Open("pgx", backendtest.RequireEnv(t, a.env))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		*a.db = db
	}
	return p
}

func probe(t *testing.T, p *postgres.Prober) topology.HostStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := p.Probe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// lsn parses a PostgreSQL LSN ("16/B374D848"); "" is 0.
func lsn(t *testing.T, s string) uint64 {
	t.Helper()
	if s == "" {
		return 0
	}
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		t.Fatalf("lsn %q: %v", s, err)
	}
	return uint64(hi)<<32 | uint64(lo)
}

// waitFor probes p until ok holds for its status, failing after 15 s.
func waitFor(t *testing.T, p *postgres.Prober, what string, ok func(topology.HostStatus) bool) topology.HostStatus {
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

// waitForPrimary is waitFor, named for what it watches.
var waitForPrimary = waitFor

// newTable creates a table of its own on the primary and waits until the
// replica has replayed it.
func (p *pair) newTable(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano())
	mustExec(t, p.primaryAdmin, "CREATE TABLE "+name+" (id bigserial PRIMARY KEY, v int)")
	t.Cleanup(func() { _, _ = p.primaryAdmin.Exec("DROP TABLE IF EXISTS " + name) })
	p.caughtUp(t)
	return name
}

// caughtUp waits until the replica has replayed the primary's position.
func (p *pair) caughtUp(t *testing.T) topology.HostStatus {
	t.Helper()
	want := probe(t, p.primary).Position
	return waitFor(t, p.replica, "replica replays "+want, func(st topology.HostStatus) bool { return lsn(t, st.Position) >= lsn(t, want) })
}

// TestProber_Roles: the primary says primary and writable, the replica
// replica, read-only and streaming.
func TestProber_Roles(t *testing.T) {
	p := openPair(t)
	pr := probe(t, p.primary)
	if pr.Role != topology.RolePrimary || pr.ReadOnly || pr.Replicating || lsn(t, pr.Position) == 0 || pr.ReceivedPosition != "" || !pr.LagKnown || pr.Lag != 0 {
		t.Errorf("primary: %+v, want a writable primary at a WAL position, no lag", pr)
	}
	re := p.caughtUp(t)
	if re.Role != topology.RoleReplica || !re.ReadOnly || !re.Replicating || lsn(t, re.ReceivedPosition) == 0 || !re.LagKnown {
		t.Errorf("replica: %+v, want a read-only replica streaming", re)
	}
	if pr.Addr == "" || pr.Addr == re.Addr {
		t.Errorf("addresses %q and %q: want two", pr.Addr, re.Addr)
	}
}

// TestProber_Position: a write on the primary moves its WAL position, and
// the replica replays up to it.
func TestProber_Position(t *testing.T) {
	p := openPair(t)
	table := p.newTable(t, "prober_pos")
	before := probe(t, p.primary).Position
	mustExec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) VALUES (1)")
	// pg_current_wal_lsn() is what is written out: with synchronous_commit
	// off (the test servers') it follows a commit within wal_writer_delay.
	after := waitForPrimary(t, p.primary, "primary position moves past "+before, func(st topology.HostStatus) bool {
		return lsn(t, st.Position) > lsn(t, before)
	}).Position
	re := p.caughtUp(t)
	if re.BehindBy != 0 || lsn(t, re.ReceivedPosition) < lsn(t, after) {
		t.Errorf("caught-up replica: %+v, want received past %s and nothing behind", re, after)
	}
}

// TestProber_LagPaused: with replay paused (pg_wal_replay_pause()), WAL
// arrives but is not replayed: the replica says it is not replicating, bytes
// behind, its lag growing; after pg_wal_replay_resume() it catches up and
// the lag falls to 0.
func TestProber_LagPaused(t *testing.T) {
	p := openPair(t)
	table := p.newTable(t, "prober_paused")
	mustExec(t, p.replicaAdmin, "SELECT pg_wal_replay_pause()")
	t.Cleanup(func() { _, _ = p.replicaAdmin.Exec("SELECT pg_wal_replay_resume()") })
	before := probe(t, p.primary).Position
	mustExec(t, p.primaryAdmin, "INSERT INTO "+table+" (v) SELECT g FROM generate_series(1, 100) g")
	want := waitForPrimary(t, p.primary, "primary position moves past "+before, func(st topology.HostStatus) bool {
		return lsn(t, st.Position) > lsn(t, before)
	}).Position
	re := waitFor(t, p.replica, "replica receives "+want, func(st topology.HostStatus) bool {
		return lsn(t, st.ReceivedPosition) >= lsn(t, want)
	})
	if re.Replicating || re.BehindBy <= 0 || !re.LagKnown || re.Lag <= 0 || lsn(t, re.Position) >= lsn(t, want) {
		t.Errorf("paused replica: %+v, want not replicating, bytes behind, a lag, short of %s", re, want)
	}
	first := re.Lag
	waitFor(t, p.replica, "lag grows", func(st topology.HostStatus) bool { return st.Lag >= first+200*time.Millisecond })
	mustExec(t, p.replicaAdmin, "SELECT pg_wal_replay_resume()")
	re = p.caughtUp(t)
	if !re.Replicating || re.BehindBy != 0 || !re.LagKnown || re.Lag != 0 {
		t.Errorf("resumed replica: %+v, want replicating, nothing behind, no lag", re)
	}
}

// TestProber_Promote: after pg_promote() the old replica says primary, and a
// Monitor of the pair calls back with the change. A promoted standby cannot
// be made one again from here: the test runs only with
// TETHER_TEST_POSTGRES_PROMOTE=1, on a pair nothing uses after it
// (scripts/test.sh runs it last).
func TestProber_Promote(t *testing.T) {
	if os.Getenv("TETHER_TEST_POSTGRES_PROMOTE") != "1" {
		t.Skip("TETHER_TEST_POSTGRES_PROMOTE=1 not set: this test promotes the pair's replica for good")
	}
	p := openPair(t)
	p.newTable(t, "prober_promote")
	changes := make(chan topology.HostStatus, 16)
	m, err := topology.NewMonitor(topology.MonitorConfig{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second,
		OnChange: func(_, n topology.HostStatus) { changes <- n }},
		[]topology.Host{{Addr: "primary", Prober: p.primary}, {Addr: "replica", Prober: p.replica}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	next := func(what string) topology.HostStatus {
		t.Helper()
		select {
		case st := <-changes:
			return st
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
	mustExec(t, p.replicaAdmin, "SELECT pg_promote(true, 30)")
	if st := next("the promote"); st.Addr != "replica" || st.Role != topology.RolePrimary {
		t.Errorf("callback after the promote: %+v, want the replica's host now primary", st)
	}
	if st := probe(t, p.replica); st.Role != topology.RolePrimary || st.ReadOnly || st.Replicating || st.ReceivedPosition != "" {
		t.Errorf("promoted replica: %+v, want a writable primary", st)
	}
}

// TestProber_Unreachable: a server that does not answer fails the probe
// with an error naming it, and the next probe tries again; no server needed.
func TestProber_Unreachable(t *testing.T) {
	p, err := postgres.NewProber("host=127.0.0.1 port=1 user=u dbname=d sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := p.Probe(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("probe of a closed port: %+v, %v; want an error naming the address", st, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := p.Probe(context.Background()); err == nil {
		t.Error("Probe after Close succeeded")
	}
}
