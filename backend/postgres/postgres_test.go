package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the independent connection of the leak tests

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/sqlpool"
)

// TestBackend runs the shared suite against the real PostgreSQL server named by
// TETHER_TEST_POSTGRES_DSN (and, for the fault tests, reachable over TCP at
// TETHER_TEST_POSTGRES_ADDR).
func TestBackend(t *testing.T) {
	runSuite(t, backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN"), backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_ADDR"))
}

// runSuite runs the shared suite against the server at dsn (key=value
// form), reachable over TCP at addr for the fault tests.
func runSuite(t *testing.T, dsn, addr string) {
	backendtest.Run(t, &backendtest.Suite{
		Dialect: postgresDialect(),
		Config:  func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("postgres", dsn) },
		New:     newSQLBackend,
		ProxiedConfig: func(t *testing.T, via string) (tether.BackendConfig, string) {
			host, port := "127.0.0.1", "1"
			if via != "" {
				host, port, _ = net.SplitHostPort(via)
			}
			// The DSN's own settings (TLS among them), the last host and
			// port winning.
			return tether.DefaultBackendConfig("postgres", fmt.Sprintf("%s host=%s port=%s", dsn, host, port)), addr
		},
		KillConnections: func(ctx context.Context, b backendtest.SQLBackend) error {
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid() AND datname = current_database()"})
			if err != nil {
				return err
			}
			if fmt.Sprint(r.Rows[0][0]) == "0" {
				return fmt.Errorf("terminated no session")
			}
			return nil
		},
	})
}

// TestBackend_PreparesOnce checks on the server that a statement run many times
// stays prepared on its session and is not prepared again per run.
func TestBackend_PreparesOnce(t *testing.T) {
	cfg := tether.DefaultBackendConfig("postgres", backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN"))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, err := postgres.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	const q = "SELECT $1::int + 1"
	for i := 0; i < 50; i++ {
		if _, err := b.Query(ctx, tether.Statement{SQL: q, Params: []any{int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", Params: []any{q}})
	if err != nil {
		t.Fatal(err)
	}
	if n := fmt.Sprint(r.Rows[0][0]); n != "1" {
		t.Fatalf("statement prepared %s times on the session after 50 runs", n)
	}
}

// TestBackend_SessionLeaks runs, on PostgreSQL, every statement a fault
// campaign found to leak session state past the former SQL-text guess, each
// followed by other clients probing what leaked.
func TestBackend_SessionLeaks(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN")
	appName := "SELECT current_setting('application_name')"
	backendtest.RunLeaks(t, &backendtest.LeakSuite{
		Config: func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("postgres", dsn) },
		New:    newSQLBackend,
		Direct: openDirect(dsn),
		AutoID: "BIGSERIAL PRIMARY KEY",
		Cases: []backendtest.LeakCase{
			{Name: "Begin", Statement: "BEGIN", WriteLoss: true},
			{Name: "StartTransactionAfterFormFeed", Statement: "\fSTART TRANSACTION", WriteLoss: true},
			{Name: "SelectIntoTempShadow", Statement: "SELECT * INTO TEMP {table} FROM {table} WHERE false", WriteLoss: true},
			{Name: "CreateTempShadow", Statement: "CREATE TEMP TABLE {table} (id bigint, v text)", WriteLoss: true},
			{Name: "PgTempSchemaShadow", Statement: "CREATE TABLE pg_temp.{table} (id bigint, v text)", WriteLoss: true},
			{Name: "NestedCommentSetSearchPath", Statement: "/* a /* nested */ comment */ SET search_path = nowhere", Probe: "SHOW search_path", CleanFromDirect: true},
			{Name: "FormFeedsSet", Statement: "\f\fSET application_name = 'leaked'", Probe: appName, CleanFromDirect: true},
			{Name: "FormFeedSetTimeZone", Statement: "\fSET TIME ZONE 'Asia/Tokyo'", Probe: "SHOW TimeZone", CleanFromDirect: true},
			{Name: "SetConfig", Statement: "SELECT set_config('application_name', 'leaked', false)", Probe: appName, CleanFromDirect: true},
			{Name: "DoBlockSetConfig", Statement: "DO $$BEGIN PERFORM set_config('application_name', 'leaked', false); END$$", Probe: appName, CleanFromDirect: true},
			{Name: "SessionCharacteristics", Statement: "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE", Probe: "SHOW default_transaction_isolation", CleanFromDirect: true},
			{Name: "UnpooledVariable", Statement: "SET enable_seqscan = off", Probe: "SHOW enable_seqscan", CleanFromDirect: true},
			{Name: "AdvisoryLock", Statement: "SELECT pg_advisory_lock(424242)", DirectProbe: "SELECT CASE WHEN pg_try_advisory_lock(424243) AND pg_try_advisory_lock(424242) THEN 'free' ELSE 'held' END", DirectClean: "free"},
			{Name: "PreparedSQL", Statement: "PREPARE tether_leak AS SELECT 1", Probe: "EXECUTE tether_leak", ProbeErr: true},
			{Name: "Listen", Statement: "LISTEN tether_leak", Probe: "SELECT count(*) FROM pg_listening_channels()", Clean: "0"},
			// Every kind of object in the session's temporary schema, not only
			// tables: the next client of the connection would see and call it.
			{Name: "TempFunction", Statement: "CREATE FUNCTION pg_temp.tether_leak() RETURNS int LANGUAGE sql AS 'SELECT 42'", Probe: "SELECT pg_temp.tether_leak()", ProbeErr: true},
			{Name: "TempProcedure", Statement: "CREATE PROCEDURE pg_temp.tether_leak_p() LANGUAGE sql AS 'SELECT 1'", Probe: "CALL pg_temp.tether_leak_p()", ProbeErr: true},
			{Name: "TempEnumType", Statement: "CREATE TYPE pg_temp.tether_leak AS ENUM ('a')", Probe: "SELECT 'a'::pg_temp.tether_leak", ProbeErr: true},
			{Name: "TempDomain", Statement: "CREATE DOMAIN pg_temp.tether_leak_d AS int CHECK (VALUE > 0)", Probe: "SELECT 1::pg_temp.tether_leak_d", ProbeErr: true},
			{Name: "TempSequence", Statement: "CREATE TEMP SEQUENCE tether_leak_seq", Probe: "SELECT nextval('tether_leak_seq')", ProbeErr: true},
			{Name: "TempView", Statement: "CREATE TEMP VIEW tether_leak_v AS SELECT 1 AS x", Probe: "SELECT x FROM tether_leak_v", ProbeErr: true},
			{Name: "TempCollation", Statement: "CREATE COLLATION pg_temp.tether_leak (locale = 'C')", Probe: "SELECT 'a' COLLATE pg_temp.tether_leak", ProbeErr: true},
			{Name: "TempOperator", Statement: "CREATE OPERATOR pg_temp.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq)", Probe: "SELECT 1 OPERATOR(pg_temp.===) 1", ProbeErr: true},
			{Name: "CursorWithHold", Statement: "DECLARE tether_leak CURSOR WITH HOLD FOR SELECT 1", Probe: "SELECT count(*) FROM pg_cursors WHERE name = 'tether_leak'", Clean: "0"},
		},
	})
}

// TestBackend_SchemaChanges runs a migration under load on PostgreSQL, where
// a statement prepared before a schema change fails with "cached plan must
// not change result type" unless tetherd prepares it again.
func TestBackend_SchemaChanges(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN")
	backendtest.RunSchemaChanges(t, &backendtest.SchemaSuite{
		Config:           func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("postgres", dsn) },
		New:              newSQLBackend,
		Direct:           openDirect(dsn),
		Placeholder:      func(n int) string { return fmt.Sprintf("$%d", n) },
		AlterType:        "ALTER TABLE {table} ALTER COLUMN v TYPE TEXT",
		TextType:         "TEXT",
		TxSchemaError:    true,
		TransactionalDDL: true,
	})
}

// TestBackend_SchemaChangeUnderPipeline sends a batch of statements written
// back to back on one connection (one Group), several of them prepared before
// another client changed their table: each refused Bind is prepared again and
// run again, and the pool still gets every answer in the order sent, each
// without an error and with the new schema, but for the one tetherd answers
// itself (a wrong count of arguments) behind a refused Bind.
func TestBackend_SchemaChangeUnderPipeline(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN")
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	const tbl = "schema_pipeline"
	for _, q := range []string{"DROP TABLE IF EXISTS " + tbl, "CREATE TABLE " + tbl + " (id int PRIMARY KEY, k int, v int)",
		"INSERT INTO " + tbl + " SELECT i, i, i FROM generate_series(1, 10) i"} {
		if _, err := direct.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	defer direct.Exec("DROP TABLE " + tbl)
	cfg := tether.DefaultBackendConfig("postgres", dsn)
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, err := postgres.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	star := "SELECT * FROM " + tbl + " WHERE id = $1"
	kid := "SELECT k, id FROM " + tbl + " WHERE id = $1"
	upd := "UPDATE " + tbl + " SET k = k + 1 WHERE id = $1"
	for _, q := range []string{star, kid, upd} { // prepared on the one connection
		if _, err := b.Exec(ctx, tether.Statement{SQL: q, Params: []any{int64(1)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := direct.Exec("ALTER TABLE " + tbl + " ADD COLUMN w text"); err != nil {
		t.Fatal(err)
	}
	batch := []string{star, star, kid, "SELECT $1::int + 1", upd, star, "SELECT * FROM " + tbl + " WHERE k > $1"}
	// The second request has one argument too many: tetherd answers it
	// itself, in its turn, behind the refused Bind of the first (whose
	// retry's answers are the retry's, not the local answer's).
	const local = 1
	var answered []int
	reqs := make([]*sqlpool.Request, len(batch))
	sinks := make([]*tether.ResultBuilder, len(batch))
	done := make(chan struct{})
	group := new(int)
	for i, q := range batch {
		kind := sqlpool.KindQuery
		if q == upd {
			kind = sqlpool.KindExec
		}
		sinks[i] = tether.NewResultBuilder(0)
		params := []any{int64(i + 1)}
		if i == local {
			params = append(params, int64(0))
		}
		reqs[i] = &sqlpool.Request{Kind: kind, SQL: q, Params: params, Sink: sinks[i], Group: group, Done: func(*sqlpool.Request) {
			answered = append(answered, i)
			if len(answered) == len(batch) {
				close(done)
			}
		}}
	}
	b.Loop().Post(func() {
		for _, r := range reqs {
			b.Submit(r)
		}
	})
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("answered %v of %d", answered, len(batch))
	}
	for i, r := range reqs {
		if answered[i] != i {
			t.Errorf("answered in the order %v", answered)
			break
		}
		if i == local {
			var te *tether.Error
			if !errors.As(r.Err, &te) || te.Code != tether.CodeBadRequest {
				t.Errorf("%d %q with 2 arguments for 1: %v, want bad_request", i, batch[i], r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("%d %q: %v", i, batch[i], r.Err)
			continue
		}
		if strings.HasPrefix(batch[i], "SELECT *") {
			if cols := sinks[i].Result().Columns; !slices.Equal(cols, []string{"id", "k", "v", "w"}) {
				t.Errorf("%d %q: columns %v", i, batch[i], cols)
			}
		}
	}
}

// TestBackend_SchemaChangeParameterType recreates a table with another type
// for the column a parameter is compared with: the statement prepared before
// (its parameter inferred as int) is refused at Bind with 42883 (no text =
// integer operator), and tetherd prepares it again, inferring text, as a
// fresh prepare by any client would.
func TestBackend_SchemaChangeParameterType(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN")
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	const tbl = "schema_param_type"
	exec := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := direct.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec("DROP TABLE IF EXISTS "+tbl, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, k int)", "INSERT INTO "+tbl+" VALUES (1, 4)")
	defer direct.Exec("DROP TABLE " + tbl)
	cfg := tether.DefaultBackendConfig("postgres", dsn)
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, err := postgres.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	q := tether.Statement{SQL: "SELECT k FROM " + tbl + " WHERE id = $1", Params: []any{int64(1)}}
	if r, err := b.Query(ctx, q); err != nil || fmt.Sprint(r.Rows) != "[[4]]" {
		t.Fatalf("before: %v %v", r, err)
	}
	exec("DROP TABLE "+tbl, "CREATE TABLE "+tbl+" (id text PRIMARY KEY, k int)", "INSERT INTO "+tbl+" VALUES ('1', 5)")
	if r, err := b.Query(ctx, q); err != nil || fmt.Sprint(r.Rows) != "[[5]]" {
		t.Fatalf("after the table was created again with a text id: %v %v", r, err)
	}
}

// newSQLBackend is the suites' New: a postgres backend on cfg.
func newSQLBackend(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
	b, err := postgres.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openDirect is the suites' Direct: a database/sql handle on dsn, beside
// tetherd's backend.
func openDirect(dsn string) func(t *testing.T) *sql.DB {
	return func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
}

// postgresDialect is PostgreSQL's, for the shared suite.
func postgresDialect() backendtest.Dialect {
	return backendtest.Dialect{
		Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		BigInt:      "BIGINT", Float: "DOUBLE PRECISION", Text: "TEXT", Blob: "BYTEA", Decimal: "NUMERIC(10,2)",
		Date: "DATE", DateTime: "TIMESTAMP", Bool: "BOOLEAN",
		DecimalExact: true, HasInsertID: false,
		AutoID:     "BIGSERIAL PRIMARY KEY",
		Sleep:      func(s int) string { return fmt.Sprintf("SELECT pg_sleep(%d)", s) },
		SetSession: "SET application_name = 'leaked'", ReadSession: "SELECT current_setting('application_name')", SessionLeaked: "leaked",
		CreateTemp: "CREATE TEMP TABLE tmp_leak (id int)",
	}
}
