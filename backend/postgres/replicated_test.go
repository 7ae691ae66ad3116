package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
		// An unlogged table: its rows stay on the primary, and a hot
		// standby refuses to read it, which names the replica.
		Marker: func(t *testing.T, b backendtest.Replicated) {
			for _, q := range []string{"CREATE UNLOGGED TABLE IF NOT EXISTS tether_whoami (who text)",
				"INSERT INTO tether_whoami SELECT 'primary' WHERE NOT EXISTS (SELECT 1 FROM tether_whoami)"} {
				if _, _, err := backendtest.Query(b, nil, sqlpool.KindExec, nil, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			waitCaughtUp(t, p)
		},
		Who: func(t *testing.T, b backendtest.Replicated, cl *sqlpool.Client, tx *sqlpool.Tx, forUpdate bool) string {
			q := "SELECT who FROM tether_whoami"
			if forUpdate {
				q += " FOR UPDATE"
			}
			who, _, err := backendtest.Query(b, cl, sqlpool.KindQuery, tx, q)
			if err != nil {
				if strings.Contains(err.Error(), "cannot access temporary or unlogged relations during recovery") {
					return "replica"
				}
				t.Fatal(err)
			}
			return who
		},
		P: func(n int) string { return "$" + strconv.Itoa(n) },
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
