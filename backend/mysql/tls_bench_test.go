package mysql_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/mysql"
)

// cpuTime is the process's CPU time so far (user and system): the loop's
// goroutine works outside the benchmark's, so ns/op does not show it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchDSNs are the same server over its Unix socket, over TCP in clear,
// and over TCP with TLS, those set.
func benchDSNs(b *testing.B) map[string]string {
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
	return dsns
}

// BenchmarkPointRead is a prepared point read of one row, one at a time:
// cpu-ns/op is the process's CPU per read (pool, loop, protocol, TLS).
func BenchmarkPointRead(b *testing.B) {
	for _, name := range []string{"Unix", "TCP", "TLS"} {
		dsn, ok := benchDSNs(b)[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			cfg := tether.DefaultBackendConfig("mysql", dsn)
			cfg.MaxConns, cfg.MinConns = 1, 1
			db, err := mysql.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := db.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer db.Close(ctx)
			st := tether.Statement{SQL: "SELECT ? AS id, 'user@example.com' AS email, 42.5 AS score", Params: []any{int64(7)}}
			if _, err := db.Query(ctx, st); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := db.Query(ctx, st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkConnect dials and closes one server connection as the pool does
// (handshake, authentication, session setup): TLS with the backend's session
// cache (a reconnect resumes) and without.
func BenchmarkConnect(b *testing.B) {
	dsns := benchDSNs(b)
	for _, name := range []string{"TCP", "TLS", "TLSNoResume"} {
		dsn, ok := dsns[name]
		if name == "TLSNoResume" {
			dsn, ok = dsns["TLS"]
		}
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			db, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn))
			if err != nil {
				b.Fatal(err)
			}
			if name == "TLSNoResume" {
				mysql.NoResume(db)
			}
			ctx := context.Background()
			if _, _, err := mysql.DialOnce(ctx, db); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, _, err := mysql.DialOnce(ctx, db); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
