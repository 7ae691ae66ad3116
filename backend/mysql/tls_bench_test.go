package mysql_test

import (
	"os"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
)

// transportBench is the shared transport benchmarks' description of the
// server: over its Unix socket, over TCP in clear, and over TCP with TLS,
// those set.
func transportBench(b *testing.B) *backendtest.TransportBench {
	dsns := map[string]string{}
	if dsn := os.Getenv("TETHER_TEST_MYSQL_DSN"); dsn != "" {
		dsns["Unix"] = dsn
		if addr := os.Getenv("TETHER_TEST_MYSQL_ADDR"); addr != "" {
			mc, err := gomysql.ParseDSN(dsn)
			if err != nil {
				b.Fatal(err)
			}
			mc.Net, mc.Addr = "tcp", addr
			dsns["TCP"] = mc.FormatDSN()
		}
	}
	if dsn := os.Getenv("TETHER_TEST_MYSQL_TLS_DSN"); dsn != "" {
		dsns["TLS"] = dsn
	}
	if len(dsns) == 0 {
		b.Skip("TETHER_TEST_MYSQL_DSN not set")
	}
	return &backendtest.TransportBench{
		Driver:    "mysql",
		New:       newTLSBackend,
		DSNs:      dsns,
		PointRead: tether.Statement{SQL: "SELECT ? AS id, 'user@example.com' AS email, 42.5 AS score", Params: []any{int64(7)}},
		DialOnce:  dialOnce,
		NoResume:  noResume,
	}
}

// BenchmarkPointRead is a prepared point read of one row, one at a time:
// cpu-ns/op is the process's CPU per read (pool, loop, protocol, TLS).
func BenchmarkPointRead(b *testing.B) { transportBench(b).BenchPointRead(b) }

// BenchmarkConnect dials and closes one server connection as the pool does
// (handshake, authentication, session setup): TLS with the backend's session
// cache (a reconnect resumes) and without.
func BenchmarkConnect(b *testing.B) { transportBench(b).BenchConnect(b) }
