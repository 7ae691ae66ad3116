package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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
// sslmode=verify-full and sslrootcert (scripts/test.sh).

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

// via returns the TLS DSN reaching the server at addr (host:port).
func via(t *testing.T, addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("%s host=%s port=%s", tlsDSN(t), host, port)
}

func openTLS(t *testing.T, cfg tether.BackendConfig) (*postgres.Backend, context.Context) {
	t.Helper()
	b, err := postgres.New(cfg)
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

// TestBackend_TLS runs the shared suite over TLS.
func TestBackend_TLS(t *testing.T) {
	runSuite(t, tlsDSN(t), tlsAddr(t))
}

// TestTLS_SessionEncrypted checks on the server that tetherd's sessions are
// encrypted, at least TLS 1.2.
func TestTLS_SessionEncrypted(t *testing.T) {
	cfg := tether.DefaultBackendConfig("postgres", tlsDSN(t))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openTLS(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != "true" {
		t.Fatalf("pg_stat_ssl of the session: %v", r.Rows)
	}
	if v := fmt.Sprint(r.Rows[0][1]); v != "TLSv1.2" && v != "TLSv1.3" {
		t.Fatalf("the session's TLS version is %q, not 1.2 or 1.3", v)
	}
}

// TestTLS_LargeResultsPipelined reads results of several MB (many TLS
// records, more than one input buffer) while other requests are in flight
// on the same connection, and checks every byte of every answer.
func TestTLS_LargeResultsPipelined(t *testing.T) {
	cfg := tether.DefaultBackendConfig("postgres", tlsDSN(t))
	cfg.MaxConns, cfg.MinConns = 1, 1 // all on one session: pipelined
	cfg.AcquireTimeout = tether.Duration(30 * time.Second)
	b, ctx := openTLS(t, cfg)
	const rowLen = 700 << 10
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	start := time.Now()
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%4 == 0 {
				r, err := b.Query(ctx, tether.Statement{
					SQL:    "SELECT n, repeat(chr(65 + n + $1::int), $2::int) FROM generate_series(0, 7) n ORDER BY n",
					Params: []any{int64(i % 10), int64(rowLen)}})
				if err != nil {
					errs <- fmt.Errorf("large %d: %w", i, err)
					return
				}
				if len(r.Rows) != 8 {
					errs <- fmt.Errorf("large %d: %d rows", i, len(r.Rows))
					return
				}
				for n, row := range r.Rows {
					want := strings.Repeat(string(rune('A'+n+i%10)), rowLen)
					got, _ := row[1].(string)
					if b, ok := row[1].([]byte); ok {
						got = string(b)
					}
					if got != want {
						errs <- fmt.Errorf("large %d row %d: %d bytes, not %d of %q", i, n, len(got), rowLen, want[:1])
						return
					}
				}
				return
			}
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT $1::int * 2", Params: []any{int64(i)}})
			if err != nil {
				errs <- fmt.Errorf("small %d: %w", i, err)
				return
			}
			if got := fmt.Sprint(r.Rows[0][0]); got != fmt.Sprint(2*i) {
				errs <- fmt.Errorf("small %d: got %s", i, got)
			}
		}()
	}
	wg.Wait()
	t.Logf("40 requests, 10 of 5.6 MB, in %s", time.Since(start))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// forward starts a TCP forwarder on listen (host:0) to target; first, when
// set, answers the client's first bytes itself instead (a fake server's
// opening), after which nothing is forwarded.
func forward(t *testing.T, listen, target string, first func(c net.Conn)) string {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("listen %s: %v", listen, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if first != nil {
					first(c)
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

func openErr(t *testing.T, dsn string) error {
	b, err := postgres.New(tether.DefaultBackendConfig("postgres", dsn))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Open(ctx)
	b.Close(ctx)
	return err
}

// TestTLS_VerifyFails checks that a certificate that does not verify fails
// the dial, with the reason.
func TestTLS_VerifyFails(t *testing.T) {
	otherCA := backendtest.RequireEnv(t, "MARIADB_TLS_CA") // a CA that did not sign the server's certificate
	t.Run("WrongCA", func(t *testing.T) {
		err := openErr(t, tlsDSN(t)+" sslrootcert="+otherCA)
		if code(err) != tether.CodeUnavailable || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("open: %v; want unavailable, unknown authority", err)
		}
	})
	t.Run("WrongServerName", func(t *testing.T) {
		// 127.0.0.2 reaches the same server, under a name its certificate
		// does not have.
		err := openErr(t, via(t, forward(t, "127.0.0.2:0", tlsAddr(t), nil)))
		if code(err) != tether.CodeUnavailable || !strings.Contains(err.Error(), "not 127.0.0.2") {
			t.Fatalf("open: %v; want unavailable, a name mismatch", err)
		}
	})
}

// TestTLS_ServerWithoutTLS checks that sslmode=verify-full refuses a server
// that answers the SSLRequest with N (no TLS), rather than going on in
// clear.
func TestTLS_ServerWithoutTLS(t *testing.T) {
	addr := forward(t, "127.0.0.1:0", "", func(c net.Conn) {
		var req [8]byte
		if _, err := io.ReadFull(c, req[:]); err == nil {
			c.Write([]byte{'N'})
			io.Copy(io.Discard, c)
		}
	})
	err := openErr(t, via(t, addr))
	if code(err) != tether.CodeUnavailable || !strings.Contains(err.Error(), "refused TLS") {
		t.Fatalf("open against a server without TLS with sslmode=verify-full: %v", err)
	}
}

// TestTLS_DroppedMidQuery cuts the TCP connection under a TLS session while
// a statement runs: that request fails as unavailable, and the pool dials
// a new session for the next.
func TestTLS_DroppedMidQuery(t *testing.T) {
	proxy := backendtest.NewProxy(t, tlsAddr(t))
	cfg := tether.DefaultBackendConfig("postgres", via(t, proxy.Addr()))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openTLS(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprint(r.Rows[0][0])

	watcher, _ := openTLS(t, tether.DefaultBackendConfig("postgres", tlsDSN(t)))
	done := make(chan error, 1)
	go func() {
		_, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_sleep(20)"})
		done <- err
	}()
	for { // until the server runs it
		r, err := watcher.Query(ctx, tether.Statement{SQL: "SELECT count(*) FROM pg_stat_activity WHERE pid = " + first + " AND state = 'active' AND query LIKE 'SELECT pg_sleep%'"})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r.Rows[0][0]) == "1" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	proxy.Stop()
	select {
	case err := <-done:
		var te *tether.Error
		if !errors.As(err, &te) || te.Code != tether.CodeUnavailable {
			t.Fatalf("the statement on the dropped connection: %v, want unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the statement on the dropped connection did not fail")
	}
	watcher.Exec(ctx, tether.Statement{SQL: "SELECT pg_terminate_backend(" + first + ")"}) // the server's side of it

	proxy.Start()
	var last error
	for i := 0; i < 100; i++ {
		r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
		if err == nil {
			if fmt.Sprint(r.Rows[0][0]) == first {
				t.Fatal("answered on the dropped session")
			}
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the pool did not recover: %v", last)
}

// TestTLS_ServerClosesSession ends the session from the server's side
// (pg_terminate_backend: an error, then TLS close_notify and the end of the
// stream) while a statement runs: that request fails as unavailable, and
// the next gets a new session.
func TestTLS_ServerClosesSession(t *testing.T) {
	cfg := tether.DefaultBackendConfig("postgres", tlsDSN(t))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openTLS(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprint(r.Rows[0][0])
	watcher, _ := openTLS(t, tether.DefaultBackendConfig("postgres", tlsDSN(t)))
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
		if code(err) != tether.CodeUnavailable {
			t.Fatalf("a statement on the terminated session: %v, want unavailable", err)
		}
		last = err
	}
	t.Fatalf("the pool did not recover: %v", last)
}

func code(err error) tether.Code {
	var te *tether.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// TestTLS_Reconnects dials again and again with the backend's TLS session
// cache. PostgreSQL's server turns resumption off (no session tickets, no
// session cache: be-secure-openssl.c), so each dial is a full handshake:
// the cache must not get in the way, and resumes when a server allows it.
func TestTLS_Reconnects(t *testing.T) {
	b, err := postgres.New(tether.DefaultBackendConfig("postgres", tlsDSN(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		withTLS, resumed, err := postgres.DialOnce(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if !withTLS {
			t.Fatalf("dial %d: no TLS", i)
		}
		t.Logf("dial %d: resumed %v", i, resumed)
	}
}

// TestTLS_CancelOverTLS checks that a statement given up on is cancelled
// over TLS, as its session runs: the proxy in front of the server refuses a
// CancelRequest sent in clear (its secret key would be readable on the
// network), and the statement must still stop.
func TestTLS_CancelOverTLS(t *testing.T) {
	target := tlsAddr(t)
	var mu sync.Mutex
	var clear, total int
	addr := forward(t, "127.0.0.1:0", "", func(c net.Conn) {
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
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		up.Write(first[:])
		go io.Copy(up, c)
		io.Copy(c, up)
	})
	cfg := tether.DefaultBackendConfig("postgres", via(t, addr))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openTLS(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT pg_backend_pid()"})
	if err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprint(r.Rows[0][0])
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Query(qctx, tether.Statement{SQL: "SELECT pg_sleep(30)"}); code(err) != tether.CodeTimeout {
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
