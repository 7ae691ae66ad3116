package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
)

// TestBackend runs the shared suite against the real MariaDB/MySQL server
// named by TETHER_TEST_MYSQL_DSN (and, for the fault tests, reachable over TCP
// at TETHER_TEST_MYSQL_ADDR).
func TestBackend(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN")
	addr := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_ADDR")
	newBackend := func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
		b, err := mysql.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backendtest.Run(t, &backendtest.Suite{
		Dialect: backendtest.Dialect{
			Placeholder: func(int) string { return "?" },
			BigInt:      "BIGINT", Float: "DOUBLE", Text: "TEXT", Blob: "BLOB", Decimal: "DECIMAL(10,2)",
			Date: "DATE", DateTime: "DATETIME", Bool: "BOOLEAN",
			DecimalExact: true, BoolIsInt: true, HasInsertID: true,
			AutoID:     "BIGINT AUTO_INCREMENT PRIMARY KEY",
			Sleep:      func(s int) string { return fmt.Sprintf("SELECT SLEEP(%d)", s) },
			SetSession: "SET time_zone = '+05:00'", ReadSession: "SELECT @@session.time_zone", SessionLeaked: "+05:00",
			CreateTemp: "CREATE TEMPORARY TABLE tmp_leak (id INT)",
		},
		Config: func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("mysql", dsn) },
		New:    newBackend,
		ProxiedConfig: func(t *testing.T, via string) (tether.BackendConfig, string) {
			mc, err := gomysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			mc.Net, mc.Addr = "tcp", via
			return tether.DefaultBackendConfig("mysql", mc.FormatDSN()), addr
		},
		KillConnections: func(ctx context.Context, b backendtest.SQLBackend) error {
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = CURRENT_USER() OR USER = SUBSTRING_INDEX(USER(), '@', 1)"})
			if err != nil {
				return err
			}
			self, err := b.Query(ctx, tether.Statement{SQL: "SELECT CONNECTION_ID()"})
			if err != nil {
				return err
			}
			var killed []string
			for _, row := range r.Rows {
				if fmt.Sprint(row[0]) == fmt.Sprint(self.Rows[0][0]) {
					continue
				}
				if _, err := b.Exec(ctx, tether.Statement{SQL: fmt.Sprintf("KILL %d", row[0])}); err == nil {
					killed = append(killed, fmt.Sprint(row[0]))
				}
			}
			if len(killed) == 0 {
				return fmt.Errorf("killed no connection (saw %v)", r.Rows)
			}
			_ = strings.Join(killed, ",")
			return nil
		},
	})
}

// TestBackend_PreparesOnce checks on the server that a statement run many times
// is prepared once on its connection, not once per run.
func TestBackend_PreparesOnce(t *testing.T) {
	cfg := tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN"))
	cfg.MaxConns, cfg.MinConns = 1, 1 // every statement on the same session
	b, err := mysql.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	prepares := func() int64 {
		r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'"})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		fmt.Sscan(fmt.Sprint(r.Rows[0][1]), &n)
		return n
	}
	prepares() // the status statement itself is prepared (once) here
	before := prepares()
	for i := 0; i < 50; i++ {
		if _, err := b.Query(ctx, tether.Statement{SQL: "SELECT ? + 1", Params: []any{int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := prepares() - before; d != 1 {
		t.Fatalf("50 runs of one statement prepared it %d times on the session", d)
	}
}

// TestBackend_SessionLeaks runs, on MariaDB/MySQL, every statement a fault
// campaign found to leak session state past the former SQL-text guess, each
// followed by other clients probing what leaked.
func TestBackend_SessionLeaks(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN")
	backendtest.RunLeaks(t, &backendtest.LeakSuite{
		Config: func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("mysql", dsn) },
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := mysql.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Direct: func(t *testing.T) *sql.DB {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		AutoID: "BIGINT AUTO_INCREMENT PRIMARY KEY",
		Cases: []backendtest.LeakCase{
			{Name: "StartTransaction", Statement: "START TRANSACTION", WriteLoss: true},
			{Name: "BeginWork", Statement: "BEGIN WORK", WriteLoss: true},
			{Name: "XAStart", Statement: "XA START 'tether_leak'", WriteLoss: true},
			{Name: "AutocommitOff", Statement: "SET autocommit = 0", WriteLoss: true},
			{Name: "AutocommitOffVersioned", Statement: "/*!40101 SET autocommit = 0 */", WriteLoss: true},
			{Name: "ShadowingTempTable", Statement: "CREATE OR REPLACE TEMPORARY TABLE {table} (id INT, v VARCHAR(64))", WriteLoss: true},
			{Name: "ShadowingTempTableLike", Statement: "CREATE TEMPORARY TABLE {table} LIKE {table}", WriteLoss: true},
			{Name: "SetNamesAfterFormFeed", Statement: "\fSET NAMES latin1", Probe: "SELECT @@session.character_set_client", Clean: "utf8mb4"},
			{Name: "VersionedCommentSet", Statement: "/*!40101 SET time_zone = '+05:00' */", Probe: "SELECT @@session.time_zone", CleanFromDirect: true},
			{Name: "MariaDBCommentSet", Statement: "/*M!100000 SET sql_mode = 'ANSI_QUOTES' */", Probe: "SELECT @@session.sql_mode", CleanFromDirect: true},
			{Name: "VerticalTabUserVariable", Statement: "\vSET @tether_leak = 'x'", Probe: "SELECT COALESCE(@tether_leak, 'none')", Clean: "none"},
			{Name: "UserVariableInSelect", Statement: "SELECT @tether_leak := 'x'", Probe: "SELECT COALESCE(@tether_leak, 'none')", Clean: "none"},
			{Name: "SetPooledAndUserVariable", Statement: "SET time_zone = '+03:00', @tether_leak = 'x'", Probe: "SELECT COALESCE(@tether_leak, 'none')", Clean: "none"},
			{Name: "UnpooledVariable", Statement: "SET SESSION max_heap_table_size = 65536", Probe: "SELECT @@session.max_heap_table_size", CleanFromDirect: true},
			{Name: "LastInsertIDSet", Statement: "SELECT LAST_INSERT_ID(12345)", Probe: "SELECT LAST_INSERT_ID()", Clean: "0"},
			{Name: "LockTablesAfterFormFeed", Statement: "\fLOCK TABLES {table} WRITE", WriteLoss: true,
				DirectProbe: "SET STATEMENT lock_wait_timeout = 2 FOR SELECT CONCAT(COUNT(*)) FROM {table}", DirectClean: "0"},
			{Name: "GetLock", Statement: "SELECT GET_LOCK('tether_leak', 0)", DirectProbe: "SELECT CONCAT(IS_FREE_LOCK('tether_leak'))", DirectClean: "1"},
			{Name: "PreparedSQL", Statement: "PREPARE tether_leak FROM 'SELECT 1'", Probe: "EXECUTE tether_leak", ProbeErr: true},
			{Name: "Use", Statement: "USE information_schema", Probe: "SELECT DATABASE()", CleanFromDirect: true},
			{Name: "HandlerOpen", Statement: "HANDLER {table} OPEN", Probe: "HANDLER {table} READ FIRST", ProbeErr: true},
		},
	})
}
