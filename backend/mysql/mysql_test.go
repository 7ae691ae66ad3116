package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/sqlpool"
)

// TestBackend runs the shared suite against the real MariaDB/MySQL server
// named by TETHER_TEST_MYSQL_DSN (and, for the fault tests, reachable over TCP
// at TETHER_TEST_MYSQL_ADDR).
func TestBackend(t *testing.T) {
	runSuite(t, backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN"), backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_ADDR"))
}

// runSuite runs the shared suite against the server at dsn, reachable over
// TCP at addr for the fault tests.
func runSuite(t *testing.T, dsn, addr string) {
	newBackend := func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
		b, err := mysql.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backendtest.Run(t, &backendtest.Suite{
		Dialect: mysqlDialect(),
		Config:  func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("mysql", dsn) },
		New:     newBackend,
		ProxiedConfig: func(t *testing.T, via string) (tether.BackendConfig, string) {
			return tether.DefaultBackendConfig("mysql", withDSN(t, dsn, func(mc *gomysql.Config) { mc.Net, mc.Addr = "tcp", via })), addr
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

// mysqlDialect is MariaDB's, for the shared suite.
func mysqlDialect() backendtest.Dialect {
	return backendtest.Dialect{
		Placeholder: func(int) string { return "?" },
		BigInt:      "BIGINT", Float: "DOUBLE", Text: "TEXT", Blob: "BLOB", Decimal: "DECIMAL(10,2)",
		Date: "DATE", DateTime: "DATETIME", Bool: "BOOLEAN",
		DecimalExact: true, BoolIsInt: true, HasInsertID: true,
		AutoID:     "BIGINT AUTO_INCREMENT PRIMARY KEY",
		Sleep:      func(s int) string { return fmt.Sprintf("SELECT SLEEP(%d)", s) },
		SetSession: "SET time_zone = '+05:00'", ReadSession: "SELECT @@session.time_zone", SessionLeaked: "+05:00",
		CreateTemp: "CREATE TEMPORARY TABLE tmp_leak (id INT)",
	}
}

// openBackend opens a backend for cfg, closed when the test ends.
func openBackend(t *testing.T, cfg tether.BackendConfig) (*mysql.Backend, context.Context) {
	t.Helper()
	b, err := mysql.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(ctx) })
	return b, ctx
}

// TestBackend_PreparesOnce checks on the server that a statement run many times
// is prepared once on its connection, not once per run.
func TestBackend_PreparesOnce(t *testing.T) {
	cfg := tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN"))
	cfg.MaxConns, cfg.MinConns = 1, 1 // every statement on the same session
	b, ctx := openBackend(t, cfg)
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
		New:    newSQLBackend,
		Direct: openDirect(dsn),
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

// TestBackend_TextAndBinaryRowsAgree checks that a statement answers the same
// typed values whether it ran as text (no parameters: COM_QUERY) or prepared
// (parameters: COM_STMT_EXECUTE), over every column type.
func TestBackend_TextAndBinaryRowsAgree(t *testing.T) {
	b, ctx := openBackend(t, tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN")))
	exec := func(sql string) {
		t.Helper()
		if _, err := b.Exec(ctx, tether.Statement{SQL: sql}); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("DROP TABLE IF EXISTS text_binary")
	exec(`CREATE TABLE text_binary (id INT PRIMARY KEY,
		ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, iu INT UNSIGNED,
		bi BIGINT, bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(20,6), y YEAR,
		dt DATE, dtt DATETIME, dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL, tm TIME, tm6 TIME(6),
		c CHAR(4), vc VARCHAR(20), tx TEXT, bl BLOB, vb VARBINARY(8), bt BIT(12), js JSON,
		en ENUM('a','b'), st SET('x','y'), nn INT, zf INT(25) UNSIGNED ZEROFILL)`)
	defer exec("DROP TABLE text_binary")
	exec(`INSERT INTO text_binary VALUES (1,
		-128, 255, -32768, 65535, -8388608, 4294967295,
		-9223372036854775808, 18446744073709551615, 1.1, 0.1, -12345678901234.123456, 2155,
		'2024-02-29', '2024-02-29 23:59:58', '1999-12-31 23:59:59.000001', '2038-01-19 03:14:07.123',
		'-838:59:59', '12:34:56.5',
		'ab', 'héllo', 'text', x'00ff10', x'0102', b'101010101010', '{"a": [1, 2.5]}', 'b', 'x,y', NULL, 42),
		(2, 127, 0, 32767, 0, 8388607, 0, 9223372036854775807, 0, -3.4e38, 1.7976931348623157e308,
		0, 1901, '1000-01-01', '0000-00-00 00:00:00', '2024-01-01 00:00:00', NULL, '00:00:00', '-00:00:00.000001',
		'', '', '', x'', x'', b'0', 'null', 'a', '', 0, 0)`)
	for _, id := range []int{1, 2} {
		text, err := b.Query(ctx, tether.Statement{SQL: fmt.Sprintf("SELECT * FROM text_binary WHERE id = %d", id)})
		if err != nil {
			t.Fatal(err)
		}
		prepared, err := b.Query(ctx, tether.Statement{SQL: "SELECT * FROM text_binary WHERE id = ?", Params: []any{int64(id)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(text.Rows) != 1 || len(prepared.Rows) != 1 {
			t.Fatalf("row %d: %d text rows, %d prepared", id, len(text.Rows), len(prepared.Rows))
		}
		for i, col := range prepared.Columns {
			tv, pv := text.Rows[0][i], prepared.Rows[0][i]
			if fmt.Sprintf("%T %#v", tv, tv) != fmt.Sprintf("%T %#v", pv, pv) {
				t.Errorf("row %d column %s: text %T %#v, prepared %T %#v", id, col, tv, tv, pv, pv)
			}
		}
	}
	// Expressions: computed columns have their own types and decimals.
	const exprs = "1, -1, 1.5, 1e0, NULL, NOW() - NOW(), CAST('2024-01-02 03:04:05.5' AS DATETIME(2)), 'x', 18446744073709551615"
	text, err := b.Query(ctx, tether.Statement{SQL: "SELECT " + exprs})
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := b.Query(ctx, tether.Statement{SQL: "SELECT " + exprs + " FROM DUAL WHERE ? = 1", Params: []any{int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range prepared.Columns {
		tv, pv := text.Rows[0][i], prepared.Rows[0][i]
		if fmt.Sprintf("%T %#v", tv, tv) != fmt.Sprintf("%T %#v", pv, pv) {
			t.Errorf("expression %d: text %T %#v, prepared %T %#v", i+1, tv, tv, pv, pv)
		}
	}
}

// TestBackend_SchemaChanges runs a migration under load on MariaDB, which
// prepares a statement again itself when its tables changed: what is checked
// is that tetherd answers the new schema's columns.
func TestBackend_SchemaChanges(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN")
	backendtest.RunSchemaChanges(t, &backendtest.SchemaSuite{
		Config:      func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("mysql", dsn) },
		New:         newSQLBackend,
		Direct:      openDirect(dsn),
		Placeholder: func(int) string { return "?" },
		AlterType:   "ALTER TABLE {table} MODIFY v VARCHAR(64)",
		TextType:    "VARCHAR(64)",
	})
}

// TestBackend_NeedReprepare: an execute the server refuses with
// ER_NEED_REPREPARE (1615, a schema change between prepare and execute; here
// faked by a hook, as the race is hard to provoke in a bounded test) ran
// nothing. Outside a transaction the statement is prepared again and run
// once, its answer in turn among requests pipelined behind it; in one the
// request fails with tx_aborted naming the schema change. Before, the client
// got the 1615 error.
func TestBackend_NeedReprepare(t *testing.T) {
	cfg := tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN"))
	cfg.MaxConns, cfg.MinConns = 1, 1 // every statement on the same session, pipelined
	b, ctx := openBackend(t, cfg)
	for _, sql := range []string{"DROP TABLE IF EXISTS t_reprepare", "CREATE TABLE t_reprepare (id BIGINT AUTO_INCREMENT PRIMARY KEY, v TEXT)"} {
		if _, err := b.Exec(ctx, tether.Statement{SQL: sql}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { b.Exec(ctx, tether.Statement{SQL: "DROP TABLE IF EXISTS t_reprepare"}) })
	status := func(name string) int64 {
		r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE '" + name + "'"})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		fmt.Sscan(fmt.Sprint(r.Rows[0][1]), &n)
		return n
	}
	const insert = "INSERT INTO t_reprepare (v) VALUES (?) /*stale*/"
	const query = "SELECT v, ? FROM t_reprepare WHERE v = ? /*stale*/"
	// Prepared once, then the hook refuses the next execute of each.
	if _, err := b.Exec(ctx, tether.Statement{SQL: insert, Params: []any{"warm"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Query(ctx, tether.Statement{SQL: query, Params: []any{int64(0), "warm"}}); err != nil {
		t.Fatal(err)
	}
	status("Com_stmt_prepare")
	prepares := status("Com_stmt_prepare")
	// The hook refuses the next execute of each armed statement.
	var mu sync.Mutex
	armed, faked := map[string]int{}, map[string]int{}
	arm := func(sql string) {
		mu.Lock()
		armed[sql]++
		mu.Unlock()
	}
	restore := mysql.SetStaleHook(func(sql string) bool {
		mu.Lock()
		defer mu.Unlock()
		if armed[sql] == 0 {
			return false
		}
		armed[sql]--
		faked[sql]++
		return true
	})
	defer restore()
	arm(insert)
	arm(query)

	t.Run("OutsideTx", func(t *testing.T) {
		// Bystanders pipelined on the same connection keep their answers.
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := b.Query(ctx, tether.Statement{SQL: "SELECT ? AS n", Params: []any{int64(i)}})
				if err != nil {
					errs <- err
				} else if fmt.Sprint(r.Rows[0][0]) != fmt.Sprint(i) {
					errs <- fmt.Errorf("bystander %d got %v", i, r.Rows)
				}
			}()
		}
		res, err := b.Exec(ctx, tether.Statement{SQL: insert, Params: []any{"a"}})
		if err != nil {
			t.Fatalf("insert refused once with 1615: %v, want it retried", err)
		}
		if res.Affected != 1 {
			t.Errorf("insert: %d affected, want 1", res.Affected)
		}
		qr, err := b.Query(ctx, tether.Statement{SQL: query, Params: []any{int64(7), "a"}})
		if err != nil {
			t.Fatalf("query refused once with 1615: %v, want it retried", err)
		}
		if len(qr.Rows) != 1 || fmt.Sprint(qr.Rows[0]) != "[a 7]" {
			t.Errorf("query: %v, want one row [a 7] (the insert ran once)", qr.Rows)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		mu.Lock()
		n := len(faked)
		mu.Unlock()
		if n != 2 {
			t.Errorf("the hook refused %d statements, want 2", n)
		}
		// Each was prepared again (plus the status statement's own prepare).
		if d := status("Com_stmt_prepare") - prepares; d < 2 {
			t.Errorf("%d prepares after the refusals, want each statement prepared again", d)
		}
	})

	t.Run("LocalAnswerBehind", func(t *testing.T) {
		// A request tetherd answers itself (a wrong count of arguments),
		// pipelined behind the refused execute, is answered in its turn
		// with its own error; the prepare written for the retry gets its
		// own answer, not the local request's.
		const local = "SELECT ? AS one /*local*/"
		if _, err := b.Query(ctx, tether.Statement{SQL: local, Params: []any{int64(1)}}); err != nil { // prepared
			t.Fatal(err)
		}
		arm(insert)
		batch := new(int)
		done := make(chan *sqlpool.Request, 2)
		finish := func(r *sqlpool.Request) { done <- r }
		ra := &sqlpool.Request{Kind: sqlpool.KindExec, SQL: insert, Params: []any{"local-behind"}, Group: batch, Done: finish}
		rb := &sqlpool.Request{Kind: sqlpool.KindQuery, SQL: local, Params: []any{int64(1), int64(2)}, Group: batch,
			Sink: tether.NewResultBuilder(0), Done: finish}
		if err := b.Loop().Post(func() { b.Submit(ra); b.Submit(rb) }); err != nil {
			t.Fatal(err)
		}
		var order []*sqlpool.Request
		for range 2 {
			select {
			case r := <-done:
				order = append(order, r)
			case <-time.After(10 * time.Second):
				t.Fatalf("answers after 10 s: %d of 2", len(order))
			}
		}
		if order[0] != ra {
			t.Errorf("the request behind was answered first")
		}
		if ra.Err != nil || ra.Affected != 1 {
			t.Errorf("refused insert: %v, %d affected; want retried, 1", ra.Err, ra.Affected)
		}
		var te *tether.Error
		if !errors.As(rb.Err, &te) || te.Code != tether.CodeBadRequest {
			t.Errorf("request with 2 arguments for 1: %v, want bad_request", rb.Err)
		}
		if r, err := b.Query(ctx, tether.Statement{SQL: "SELECT 5"}); err != nil || fmt.Sprint(r.Rows) != "[[5]]" {
			t.Errorf("the connection after: %v, %v", r, err)
		}
	})

	t.Run("PreparedAgainTwice", func(t *testing.T) {
		// Two executes of one statement pipelined, both refused: each is
		// prepared again, the second replaces the first in the cache, and
		// the first is closed on the server, not left open there.
		const twice = "SELECT ? AS twice /*stale*/"
		if _, err := b.Query(ctx, tether.Statement{SQL: twice, Params: []any{int64(0)}}); err != nil { // prepared
			t.Fatal(err)
		}
		closes := status("Com_stmt_close")
		arm(twice)
		arm(twice)
		batch := new(int)
		done := make(chan *sqlpool.Request, 2)
		finish := func(r *sqlpool.Request) { done <- r }
		reqs := []*sqlpool.Request{
			{Kind: sqlpool.KindQuery, SQL: twice, Params: []any{int64(1)}, Group: batch, Sink: tether.NewResultBuilder(0), Done: finish},
			{Kind: sqlpool.KindQuery, SQL: twice, Params: []any{int64(2)}, Group: batch, Sink: tether.NewResultBuilder(0), Done: finish},
		}
		if err := b.Loop().Post(func() { b.Submit(reqs[0]); b.Submit(reqs[1]) }); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			select {
			case r := <-done:
				if r != reqs[i] {
					t.Errorf("answer %d is request %d's", i, 1-i)
				}
				if r.Err != nil {
					t.Errorf("request %d: %v, want retried", i, r.Err)
				} else if rows := r.Sink.(*tether.ResultBuilder).Result().Rows; fmt.Sprint(rows) != fmt.Sprintf("[[%d]]", i+1) {
					t.Errorf("request %d: rows %v", i, rows)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("answers after 10 s: %d of 2", i)
			}
		}
		// The statement refused (closed when refused) and the first
		// statement prepared again (closed when the second replaced it).
		if d := status("Com_stmt_close") - closes; d != 2 {
			t.Errorf("%d statements closed, want 2: the replaced one left open on the server", d)
		}
	})

	t.Run("InTx", func(t *testing.T) {
		const inTx = "UPDATE t_reprepare SET v = ? WHERE v = 'a' /*stale*/"
		if _, err := b.Exec(ctx, tether.Statement{SQL: inTx, Params: []any{"a"}}); err != nil { // prepared
			t.Fatal(err)
		}
		tx, err := b.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		arm(inTx)
		_, err = tx.Exec(ctx, tether.Statement{SQL: inTx, Params: []any{"b"}})
		var te *tether.Error
		if !errors.As(err, &te) || te.Code != tether.CodeTxAborted || !errors.Is(err, mysql.ErrSchemaChanged) || !strings.Contains(te.Message, "schema changed") {
			t.Fatalf("statement refused with 1615 in a transaction: %v, want tx_aborted naming the schema change", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if faked[inTx] != 1 {
			t.Errorf("the hook refused the statement %d times, want 1", faked[inTx])
		}
		// Prepared afresh at its next use.
		res, err := b.Exec(ctx, tether.Statement{SQL: inTx, Params: []any{"c"}})
		if err != nil || res.Affected != 1 {
			t.Fatalf("the statement after the transaction: %v %v, want 1 row changed", res, err)
		}
	})
}

// newSQLBackend is the suites' New: a mysql backend on cfg.
func newSQLBackend(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
	b, err := mysql.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openDirect is the suites' Direct: a database/sql handle on dsn, beside
// tetherd's backend.
func openDirect(dsn string) func(t *testing.T) *sql.DB {
	return func(t *testing.T) *sql.DB {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
}
