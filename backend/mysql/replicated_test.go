package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/sqlpool"
)

// TestReplicated runs the routing suite over the replicated pair
// (start_mariadb_pair): reads on the replica, writes and transactions on
// the primary, read-your-writes while the replica lags, no reads for a
// replica that does not apply.
func TestReplicated(t *testing.T) {
	p := openPair(t)
	primaryDSN := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN")
	replicaDSN := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_DSN")
	s := &backendtest.ReplicaSuite{
		Open: func(t *testing.T, tweak func(*tether.BackendConfig)) backendtest.Replicated {
			bc := tether.DefaultBackendConfig("mysql", primaryDSN)
			bc.Replicas = []string{replicaDSN}
			tweak(&bc)
			b, err := mysql.NewReplicated(bc)
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
		// The marker's row is written on each server with sql_log_bin off,
		// so neither copy replicates.
		Marker: func(t *testing.T, b backendtest.Replicated) {
			if _, _, err := backendtest.Query(b, nil, sqlpool.KindExec, nil, "CREATE TABLE IF NOT EXISTS tether_whoami (who VARCHAR(16))"); err != nil {
				t.Fatal(err)
			}
			waitCaughtUp(t, p)
			for who, db := range map[string]*sql.DB{"primary": p.primaryAdmin, "replica": p.replicaAdmin} {
				c, err := db.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"SET SESSION sql_log_bin = 0", "DELETE FROM tether_whoami", "INSERT INTO tether_whoami VALUES ('" + who + "')"} {
					if _, err := c.ExecContext(context.Background(), q); err != nil {
						t.Fatalf("%s: %s: %v", who, q, err)
					}
				}
				c.Close()
			}
		},
		Who: func(t *testing.T, b backendtest.Replicated, cl *sqlpool.Client, tx *sqlpool.Tx, forUpdate bool) string {
			q := "SELECT who FROM tether_whoami"
			if forUpdate {
				q += " FOR UPDATE"
			}
			who, _, err := backendtest.Query(b, cl, sqlpool.KindQuery, tx, q)
			if err != nil {
				t.Fatal(err)
			}
			return who
		},
		P:          func(int) string { return "?" },
		SetSession: "SET time_zone = '+01:00'",
		DelayApply: func(t *testing.T, d time.Duration) {
			exec(t, p.replicaAdmin, "STOP SLAVE")
			exec(t, p.replicaAdmin, fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY = %d", int(d.Seconds())))
			exec(t, p.replicaAdmin, "START SLAVE")
		},
		PauseApply:   func(t *testing.T) { exec(t, p.replicaAdmin, "STOP SLAVE SQL_THREAD") },
		ResumeApply:  func(t *testing.T) { exec(t, p.replicaAdmin, "START SLAVE SQL_THREAD") },
		WaitCaughtUp: func(t *testing.T) { waitCaughtUp(t, p) },
	}
	s.Run(t)
}

// waitCaughtUp waits until the replica has applied the primary's binary log.
func waitCaughtUp(t *testing.T, p *pair) {
	t.Helper()
	var pos string
	if err := p.primaryAdmin.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	var got int
	if err := p.replicaAdmin.QueryRow("SELECT MASTER_GTID_WAIT(?, 15)", pos).Scan(&got); err != nil || got != 0 {
		t.Fatalf("the replica did not reach %s in 15 s: %d, %v", pos, got, err)
	}
}

// TestWriteReportsGTIDWithoutReset: with the binary log on, MariaDB reports
// each committed write's GTID (last_gtid) through session tracking. It is
// the write's position, for read-your-writes, and not session state: the
// connection is not reset after every write (it was).
func TestWriteReportsGTIDWithoutReset(t *testing.T) {
	p := openPair(t)
	b, err := mysql.New(tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	tbl := fmt.Sprintf("gtid_%d", time.Now().UnixNano()%1e9)
	if _, err := b.Exec(ctx, tether.Statement{SQL: "CREATE TABLE " + tbl + " (id INT AUTO_INCREMENT PRIMARY KEY)"}); err != nil {
		t.Fatal(err)
	}
	defer b.Exec(ctx, tether.Statement{SQL: "DROP TABLE " + tbl})
	resets := b.Stats().Resets
	var last string
	for i := 0; i < 3; i++ {
		r := &sqlpool.Request{Kind: sqlpool.KindExec, SQL: "INSERT INTO " + tbl + " VALUES ()"}
		if err := b.Do(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Report == nil || r.Report.Position == "" || r.Report.Position == last {
			t.Fatalf("write %d: report %+v, want a new GTID (last %q)", i, r.Report, last)
		}
		last = r.Report.Position
	}
	var gtid string
	if err := p.primaryAdmin.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gtid, last) {
		t.Errorf("the last write's GTID %s is not in the server's binlog position %s", last, gtid)
	}
	if n := b.Stats().Resets - resets; n != 0 {
		t.Errorf("%d connection resets over 3 writes, want 0", n)
	}
}

// TestReplicated_SharedSuite runs the shared suite of SQL backends against a
// replicated backend over the pair: through the Go API (the key API, the
// catalog: the primary) it must behave as one server does.
func TestReplicated_SharedSuite(t *testing.T) {
	backendtest.LockReplicaPairs(t)
	primaryDSN := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN")
	replicaDSN := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_DSN")
	backendtest.Run(t, &backendtest.Suite{
		Dialect: mysqlDialect(),
		Hosts:   2,
		Config: func(t *testing.T) tether.BackendConfig {
			bc := tether.DefaultBackendConfig("mysql", primaryDSN)
			bc.Replicas = []string{replicaDSN}
			return bc
		},
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := mysql.NewReplicated(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
