package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
)

// The TLS tests run against TETHER_TEST_POSTGRES_TLS_DSN: a user that the
// server lets in only over TLS (hostssl), reached over TCP with
// sslmode=verify-full and sslrootcert (scripts/test.sh). The checks every
// TLS backend passes are backendtest.TLSSuite's; what is PostgreSQL's own
// stays here.

func tlsDSN(t *testing.T) string {
	return backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_TLS_DSN")
}

func tlsAddr(t *testing.T) string {
	pc, err := pgconn.ParseConfig(tlsDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(pc.Host, fmt.Sprint(pc.Port))
}

func newTLSBackend(cfg tether.BackendConfig) (backendtest.SQLBackend, error) {
	return postgres.New(cfg)
}

func dialOnce(ctx context.Context, b backendtest.SQLBackend) (withTLS, resumed bool, err error) {
	return postgres.DialOnce(ctx, b.(*postgres.Backend))
}

// tlsSuite describes PostgreSQL over TLS for the shared TLS checks.
func tlsSuite(t *testing.T) *backendtest.TLSSuite {
	dsn := tlsDSN(t)
	// via returns the TLS DSN reaching the server at addr (host:port): the
	// last host and port win.
	via := func(t *testing.T, addr string) string {
		host, port, _ := net.SplitHostPort(addr)
		return fmt.Sprintf("%s host=%s port=%s", dsn, host, port)
	}
	addr := tlsAddr(t)
	return &backendtest.TLSSuite{
		Driver:      "postgres",
		New:         newTLSBackend,
		DSN:         dsn,
		Via:         via,
		Addr:        addr,
		Placeholder: func(n int) string { return fmt.Sprintf("$%d::int", n) },
		SessionTLS: func(ctx context.Context, b backendtest.SQLBackend) (string, error) {
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()"})
			if err != nil {
				return "", err
			}
			if len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != "true" {
				return "", fmt.Errorf("pg_stat_ssl of the session: %v", r.Rows)
			}
			return fmt.Sprint(r.Rows[0][1]), nil
		},
		Large:     "SELECT n, repeat(chr(65 + n + $1::int), $2::int) FROM generate_series(0, 7) n ORDER BY n",
		SessionID: "SELECT pg_backend_pid()",
		Sleep20:   "SELECT pg_sleep(20)",
		Running: func(id string) string {
			return "SELECT count(*) FROM pg_stat_activity WHERE pid = " + id + " AND state = 'active' AND query LIKE 'SELECT pg_sleep%'"
		},
		Terminate: func(id string) string { return "SELECT pg_terminate_backend(" + id + ")" },
		OtherCA:   backendtest.RequireEnv(t, "MARIADB_TLS_CA"),
		WrongCA:   func(t *testing.T, ca string) string { return dsn + " sslrootcert=" + ca },
		WrongName: func(t *testing.T) (string, string) {
			// 127.0.0.2 reaches the same server, under a name its
			// certificate does not have.
			if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
				t.Skipf("listen 127.0.0.2: %v", err)
			} else {
				ln.Close()
			}
			return via(t, backendtest.Forward(t, "127.0.0.2:0", addr)), "127.0.0.2"
		},
		// A server that answers the SSLRequest with N (no TLS).
		WithoutTLS: func(t *testing.T) string {
			return via(t, backendtest.Listen(t, "127.0.0.1:0", func(c net.Conn) {
				var req [8]byte
				if _, err := io.ReadFull(c, req[:]); err == nil {
					c.Write([]byte{'N'})
					io.Copy(io.Discard, c)
				}
			}))
		},
		Refused:  "refused TLS",
		DialOnce: dialOnce,
		Resumes:  false,
	}
}

// TestBackend_TLS runs the shared suite over TLS.
func TestBackend_TLS(t *testing.T) {
	runSuite(t, tlsDSN(t), tlsAddr(t))
}

// TestTLS_SessionEncrypted checks on the server that tetherd's sessions are
// encrypted (pg_stat_ssl), at least TLS 1.2.
func TestTLS_SessionEncrypted(t *testing.T) { tlsSuite(t).SessionEncrypted(t) }

// TestTLS_LargeResultsPipelined reads results of several MB while other
// requests are in flight on the same connection.
func TestTLS_LargeResultsPipelined(t *testing.T) { tlsSuite(t).LargeResultsPipelined(t) }

// TestTLS_VerifyFails checks that a certificate that does not verify fails
// the dial, with the reason: a wrong CA (sslrootcert), a wrong name (the
// server reached as 127.0.0.2).
func TestTLS_VerifyFails(t *testing.T) { tlsSuite(t).VerifyFails(t) }

// TestTLS_ServerWithoutTLS checks that sslmode=verify-full refuses a server
// that answers the SSLRequest with N (no TLS), rather than going on in
// clear.
func TestTLS_ServerWithoutTLS(t *testing.T) { tlsSuite(t).ServerWithoutTLS(t) }

// TestTLS_DroppedMidQuery cuts the TCP connection under a TLS session while
// a statement runs.
func TestTLS_DroppedMidQuery(t *testing.T) { tlsSuite(t).DroppedMidQuery(t) }

// TestTLS_ServerClosesSession ends the session from the server's side
// (pg_terminate_backend: an error, then TLS close_notify and the end of the
// stream) while a statement runs: that request fails as unavailable, and
// the next gets a new session.
func TestTLS_ServerClosesSession(t *testing.T) {
	s := tlsSuite(t)
	cfg := tether.DefaultBackendConfig("postgres", s.DSN)
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := s.Open(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprint(r.Rows[0][0])
	watcher, _ := s.Open(t, tether.DefaultBackendConfig("postgres", s.DSN))
	if _, err := watcher.Exec(ctx, tether.Statement{SQL: "SELECT pg_terminate_backend(" + first + ", 5000)"}); err != nil {
		t.Fatal(err)
	}
	var last error
	for i := 0; i < 100; i++ {
		r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
		if err == nil {
			if fmt.Sprint(r.Rows[0][0]) == first {
				t.Fatal("answered on the terminated session")
			}
			return
		}
		if backendtest.Code(err) != tether.CodeUnavailable {
			t.Fatalf("a statement on the terminated session: %v, want unavailable", err)
		}
		last = err
	}
	t.Fatalf("the pool did not recover: %v", last)
}

// TestTLS_Reconnects dials again and again with the backend's TLS session
// cache. PostgreSQL's server turns resumption off (no session tickets, no
// session cache: be-secure-openssl.c), so each dial is a full handshake,
// TLS every time, never resumed: the cache must not get in the way.
func TestTLS_Reconnects(t *testing.T) { tlsSuite(t).Resumption(t) }

// TestTLS_CancelOverTLS checks that a statement given up on is cancelled
// over TLS, as its session runs: the proxy in front of the server refuses a
// CancelRequest sent in clear (its secret key would be readable on the
// network), and the statement must still stop.
func TestTLS_CancelOverTLS(t *testing.T) {
	s := tlsSuite(t)
	var mu sync.Mutex
	var clear, total int
	addr := backendtest.Listen(t, "127.0.0.1:0", func(c net.Conn) {
		var first [8]byte
		if _, err := io.ReadFull(c, first[:]); err != nil {
			return
		}
		mu.Lock()
		total++
		if string(first[4:]) == "\x04\xd2\x16\x2e" { // 80877102: CancelRequest, in clear
			clear++
			mu.Unlock()
			return
		}
		mu.Unlock()
		up, err := net.Dial("tcp", s.Addr)
		if err != nil {
			return
		}
		defer up.Close()
		up.Write(first[:])
		backendtest.Splice(c, up)
	})
	cfg := tether.DefaultBackendConfig("postgres", s.Via(t, addr))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := s.Open(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprint(r.Rows[0][0])
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Query(qctx, tether.Statement{SQL: "SELECT pg_sleep(30)"}); backendtest.Code(err) != tether.CodeTimeout {
		t.Fatalf("pg_sleep(30) with a deadline of 300 ms: %v, want timeout", err)
	}
	// The session runs the next statement once the cancel stopped the
	// sleep (or the pool gave up on it after 5 s and ended it).
	start := time.Now()
	r, err = b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if clear > 0 {
		t.Fatalf("%d CancelRequests sent in clear to a TLS session", clear)
	}
	if fmt.Sprint(r.Rows[0][0]) != pid || time.Since(start) > 4*time.Second {
		t.Fatalf("after the cancel: session %v (was %s) in %s; want the same session, its sleep cancelled", r.Rows[0][0], pid, time.Since(start))
	}
}
