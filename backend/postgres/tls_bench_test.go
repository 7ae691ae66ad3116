package postgres_test

import (
	"fmt"
	"os"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
)

// transportBench is the shared transport benchmarks' description of the
// server: over its Unix socket, over TCP in clear, and over TCP with TLS,
// those set.
func transportBench(b *testing.B) *backendtest.TransportBench {
	dsns := map[string]string{}
	if dsn := os.Getenv("TETHER_TEST_POSTGRES_DSN"); dsn != "" {
		dsns["Unix"] = dsn
		if port := os.Getenv("PG_PORT"); port != "" {
			dsns["TCP"] = fmt.Sprintf("%s host=127.0.0.1 port=%s sslmode=disable", dsn, port)
		}
	}
	if dsn := os.Getenv("TETHER_TEST_POSTGRES_TLS_DSN"); dsn != "" {
		dsns["TLS"] = dsn
	}
	if len(dsns) == 0 {
		b.Skip("TETHER_TEST_POSTGRES_DSN not set")
	}
	return &backendtest.TransportBench{
		Driver:    "postgres",
		New:       newTLSBackend,
		DSNs:      dsns,
		PointRead: tether.Statement{SQL: "SELECT $1::int AS id, 'user@example.com' AS email, 42.5 AS score", Params: []any{int64(7)}},
		DialOnce:  dialOnce,
	}
}

// BenchmarkPointRead is a prepared point read of one row, one at a time:
// cpu-ns/op is the process's CPU per read (pool, loop, protocol, TLS).
func BenchmarkPointRead(b *testing.B) { transportBench(b).BenchPointRead(b) }

// BenchmarkConnect dials and closes one server connection as the pool does
// (pgconn's startup and authentication, the hijack, the loop's fd). The
// server resumes no TLS session, so there is no TLSNoResume.
func BenchmarkConnect(b *testing.B) { transportBench(b).BenchConnect(b) }
