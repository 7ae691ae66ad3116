package postgres_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
)

// TestBackend runs the shared suite against the real PostgreSQL server named by
// TETHER_TEST_POSTGRES_DSN (and, for the fault tests, reachable over TCP at
// TETHER_TEST_POSTGRES_ADDR).
func TestBackend(t *testing.T) {
	dsn := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_DSN")
	addr := backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_ADDR")
	backendtest.Run(t, &backendtest.Suite{
		Dialect: backendtest.Dialect{
			Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
			BigInt:      "BIGINT", Float: "DOUBLE PRECISION", Text: "TEXT", Blob: "BYTEA", Decimal: "NUMERIC(10,2)",
			Date: "DATE", DateTime: "TIMESTAMP", Bool: "BOOLEAN",
			DecimalExact: true, HasInsertID: false,
			AutoID:     "BIGSERIAL PRIMARY KEY",
			Sleep:      func(s int) string { return fmt.Sprintf("SELECT pg_sleep(%d)", s) },
			SetSession: "SET application_name = 'leaked'", ReadSession: "SELECT current_setting('application_name')", SessionLeaked: "leaked",
			CreateTemp: "CREATE TEMP TABLE tmp_leak (id int)",
		},
		Config: func(t *testing.T) tether.BackendConfig { return tether.DefaultBackendConfig("postgres", dsn) },
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := postgres.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		ProxiedConfig: func(t *testing.T, via string) (tether.BackendConfig, string) {
			pc, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			host, port := "127.0.0.1", "1"
			if via != "" {
				host, port, _ = net.SplitHostPort(via)
			}
			return tether.DefaultBackendConfig("postgres", fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
				host, port, pc.User, pc.Password, pc.Database)), addr
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
