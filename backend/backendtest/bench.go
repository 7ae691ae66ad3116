package backendtest

import (
	"context"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// TransportBench describes a SQL backend for the benchmarks of its
// transports: the same server over its Unix socket, over TCP in clear and
// over TCP with TLS.
type TransportBench struct {
	// Driver is the backend's name in tether.DefaultBackendConfig.
	Driver string
	// New returns an unopened backend for cfg.
	New func(cfg tether.BackendConfig) (SQLBackend, error)
	// DSNs are the server's DSNs by transport: "Unix", "TCP", "TLS", those
	// set.
	DSNs map[string]string
	// PointRead is a prepared point read of one row.
	PointRead tether.Statement
	// DialOnce dials one server connection as the pool does and closes it;
	// NoResume, when set, turns b's TLS session cache off (Connect then
	// runs TLSNoResume too).
	DialOnce func(ctx context.Context, b SQLBackend) (withTLS, resumed bool, err error)
	NoResume func(b SQLBackend)
}

// CPUTime is the process's CPU time so far (user and system): the loop's
// goroutine works outside the benchmark's, so ns/op does not show it.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchPointRead runs PointRead one at a time on a pool of one connection, per
// transport: cpu-ns/op is the process's CPU per read (pool, loop, protocol,
// TLS).
func (s *TransportBench) BenchPointRead(b *testing.B) {
	for _, name := range []string{"Unix", "TCP", "TLS"} {
		dsn, ok := s.DSNs[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			cfg := tether.DefaultBackendConfig(s.Driver, dsn)
			cfg.MaxConns, cfg.MinConns = 1, 1
			db, err := s.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := db.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer db.Close(ctx)
			if _, err := db.Query(ctx, s.PointRead); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := CPUTime()
			for i := 0; i < b.N; i++ {
				if _, err := db.Query(ctx, s.PointRead); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchConnect dials and closes one server connection as the pool does
// (handshake, authentication, session setup), over TCP in clear and with
// TLS (with the backend's session cache: a reconnect resumes where the
// server allows it), and, with NoResume set, with TLS without the cache.
// One dial before the timer fills the session cache.
func (s *TransportBench) BenchConnect(b *testing.B) {
	for _, name := range []string{"TCP", "TLS", "TLSNoResume"} {
		dsn, ok := s.DSNs[name]
		if name == "TLSNoResume" {
			dsn, ok = s.DSNs["TLS"]
			ok = ok && s.NoResume != nil
		}
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			db, err := s.New(tether.DefaultBackendConfig(s.Driver, dsn))
			if err != nil {
				b.Fatal(err)
			}
			if name == "TLSNoResume" {
				s.NoResume(db)
			}
			ctx := context.Background()
			if _, _, err := s.DialOnce(ctx, db); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := CPUTime()
			for i := 0; i < b.N; i++ {
				if _, _, err := s.DialOnce(ctx, db); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
