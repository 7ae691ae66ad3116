package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/sqlpool"
)

// TestReplicated runs the routing suite over the streaming pair
// (start_postgres_pair): reads on the replica, writes and transactions on
// the primary, read-your-writes while the replica lags, no reads for a
// replica whose replay is paused.
func TestReplicated(t *testing.T) {
	p := openPair(t)
	primaryDSN := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN")
	replicaDSN := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")
	s := &backendtest.ReplicaSuite{
		Open: func(t *testing.T, tweak func(*tether.BackendConfig)) backendtest.Replicated {
			bc := tether.DefaultBackendConfig("postgres", primaryDSN)
			bc.Replicas = []string{replicaDSN}
			tweak(&bc)
			b, err := postgres.NewReplicated(bc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Open(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			return b
		},
		Primary: p.primaryAdmin,
		Replica: p.replicaAdmin,
		// Where a read ran is seen on the servers: the read sleeps 50 ms
		// with a unique comment, and pg_stat_activity on each server is
		// watched for it meanwhile. (A hot standby has no data of its own
		// to tell it by, and a read it refuses, such as one of an unlogged
		// table, now runs again on the primary.)
		Marker: func(t *testing.T, b backendtest.Replicated) {
			for _, q := range []string{"CREATE TABLE IF NOT EXISTS tether_whoami (who text)",
				"INSERT INTO tether_whoami SELECT 'row' WHERE NOT EXISTS (SELECT 1 FROM tether_whoami)"} {
				if _, _, err := backendtest.Query(b, nil, sqlpool.KindExec, nil, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			waitCaughtUp(t, p)
		},
		Who: func(t *testing.T, b backendtest.Replicated, cl *sqlpool.Client, tx *sqlpool.Tx, forUpdate bool) string {
			return whoRan(t, p, b, cl, tx, forUpdate)
		},
		P:          func(n int) string { return "$" + strconv.Itoa(n) },
		SetSession: "SET application_name = 'tether_replica_test'",
		DelayApply: func(t *testing.T, d time.Duration) {
			mustExec(t, p.replicaAdmin, fmt.Sprintf("ALTER SYSTEM SET recovery_min_apply_delay = '%dms'", d.Milliseconds()))
			mustExec(t, p.replicaAdmin, "SELECT pg_reload_conf()")
		},
		PauseApply:   func(t *testing.T) { mustExec(t, p.replicaAdmin, "SELECT pg_wal_replay_pause()") },
		ResumeApply:  func(t *testing.T) { mustExec(t, p.replicaAdmin, "SELECT pg_wal_replay_resume()") },
		WaitCaughtUp: func(t *testing.T) { waitCaughtUp(t, p) },
	}
	s.Run(t)
}

// waitCaughtUp waits until the replica has replayed the primary's WAL.
func waitCaughtUp(t *testing.T, p *pair) {
	t.Helper()
	var want string
	if err := p.primaryAdmin.QueryRow("SELECT pg_current_wal_insert_lsn()::text").Scan(&want); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ok bool
		if err := p.replicaAdmin.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", want).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not replay up to %s in 15 s", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var whoSeq atomic.Int64

// whoRan runs a 50 ms read through b and returns which server's
// pg_stat_activity showed it: "primary" or "replica".
func whoRan(t *testing.T, p *pair, b backendtest.Replicated, cl *sqlpool.Client, tx *sqlpool.Tx, forUpdate bool) string {
	t.Helper()
	for try := 1; ; try++ {
		tag := fmt.Sprintf("whoami_%d_%d", os.Getpid(), whoSeq.Add(1))
		q := fmt.Sprintf("SELECT pg_sleep(%g) /* %s */", 0.05*float64(try), tag)
		if forUpdate {
			q = fmt.Sprintf("SELECT pg_sleep(%g) /* %s */ FROM tether_whoami FOR UPDATE", 0.05*float64(try), tag)
		}
		errc := make(chan error, 1)
		go func() { _, _, err := backendtest.Query(b, cl, sqlpool.KindQuery, tx, q); errc <- err }()
		seen := ""
		for seen == "" {
			select {
			case err := <-errc:
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if try == 5 {
					t.Fatalf("%s ran where no pg_stat_activity saw it, 5 times", q)
				}
				seen = "-"
			default:
				for who, db := range map[string]*sql.DB{"primary": p.primaryAdmin, "replica": p.replicaAdmin} {
					var n int
					if err := db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()", tag).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n > 0 {
						seen = who
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		if seen != "-" {
			if err := <-errc; err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return seen
		}
	}
}

// TestReplicated_RefusedReadRunsOnPrimary: a read the standby refuses as a
// standby (an unlogged table) is answered by the primary, not with the
// standby's error.
func TestReplicated_RefusedReadRunsOnPrimary(t *testing.T) {
	p := openPair(t)
	bc := tether.DefaultBackendConfig("postgres", backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN"))
	bc.Replicas = []string{backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")}
	bc.MonitorInterval = tether.Duration(50 * time.Millisecond)
	b, err := postgres.NewReplicated(bc)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	tbl := fmt.Sprintf("unlogged_%d", time.Now().UnixNano()%1e9)
	for _, q := range []string{"CREATE UNLOGGED TABLE " + tbl + " (v text)", "INSERT INTO " + tbl + " VALUES ('on the primary')"} {
		if _, _, err := backendtest.Query(b, nil, sqlpool.KindExec, nil, q); err != nil {
			t.Fatal(err)
		}
	}
	defer p.primaryAdmin.Exec("DROP TABLE " + tbl)
	waitCaughtUp(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for b.Topology().Hosts[1].State != "reads" {
		if time.Now().After(deadline) {
			t.Fatalf("the replica takes no reads: %+v", b.Topology())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := b.Topology().Hosts[1].Reads
	for i := 0; i < 5; i++ {
		v, _, err := backendtest.Query(b, nil, sqlpool.KindQuery, nil, "SELECT v FROM "+tbl)
		if err != nil || v != "on the primary" {
			t.Fatalf("read of an unlogged table: %q, %v", v, err)
		}
	}
	if got := b.Topology().Hosts[1].Reads - before; got != 5 {
		t.Errorf("%d of the 5 reads were routed to the replica first, want 5 (the test proves nothing)", got)
	}
}

// TestReplicated_SharedSuite runs the shared suite of SQL backends against a
// replicated backend over the pair: through the Go API (the key API, the
// catalog: the primary) it must behave as one server does.
func TestReplicated_SharedSuite(t *testing.T) {
	backendtest.LockReplicaPairs(t)
	primaryDSN := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN")
	replicaDSN := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")
	backendtest.Run(t, &backendtest.Suite{
		Dialect: postgresDialect(),
		Hosts:   2,
		Config: func(t *testing.T) tether.BackendConfig {
			bc := tether.DefaultBackendConfig("postgres", primaryDSN)
			bc.Replicas = []string{replicaDSN}
			return bc
		},
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := postgres.NewReplicated(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}

// TestReplicated_SessionReadOnlyIsNotAFailover: a client that made its own
// session read-only gets the server's refusal of its write (25006), and
// the primary keeps the writes: the refusal is not taken for a demotion.
func TestReplicated_SessionReadOnlyIsNotAFailover(t *testing.T) {
	openPair(t)
	bc := tether.DefaultBackendConfig("postgres", backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN"))
	bc.Replicas = []string{backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")}
	bc.MonitorInterval = tether.Duration(50 * time.Millisecond)
	b, err := postgres.NewReplicated(bc)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	tbl := fmt.Sprintf("ro_%d", time.Now().UnixNano()%1e9)
	if _, _, err := backendtest.Query(b, nil, sqlpool.KindExec, nil, "CREATE TABLE "+tbl+" (v int)"); err != nil {
		t.Fatal(err)
	}
	defer b.Exec(context.Background(), tether.Statement{SQL: "DROP TABLE " + tbl})
	ro := &sqlpool.Client{}
	if _, _, err := backendtest.Query(b, ro, sqlpool.KindExec, nil, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = backendtest.Query(b, ro, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" VALUES (1)")
	var te *tether.Error
	if !errors.As(err, &te) || te.BackendCode != "25006" {
		t.Fatalf("a write in the client's read-only session: %v, want its 25006", err)
	}
	t.Logf("answered 25006 after %s", time.Since(start).Round(time.Millisecond))
	// Others write on as before.
	if _, _, err := backendtest.Query(b, &sqlpool.Client{}, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if top := b.Topology(); top.FailoversTotal != 0 || top.Hosts[0].State != "writes" {
		t.Errorf("a client's read-only session moved the writes: %+v", top)
	}
}
