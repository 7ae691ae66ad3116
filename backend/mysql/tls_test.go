package mysql_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
)

// The TLS tests run against TETHER_TEST_MYSQL_TLS_DSN: a user that the
// server lets in only over TLS (REQUIRE SSL), reached over TCP with
// tls=true and tls-ca (scripts/test.sh).

func tlsDSN(t *testing.T) string {
	return backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_TLS_DSN")
}

// withDSN returns dsn changed by f, which may add tetherd's own parameters
// (tls-ca, tls-server-name) to mc.Params.
func withDSN(t *testing.T, dsn string, f func(*gomysql.Config)) string {
	t.Helper()
	base, own, err := mysql.CutParams(dsn, "tls-ca", "tls-server-name")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := gomysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	for k, v := range own {
		mc.Params[k] = v
	}
	f(mc)
	return mc.FormatDSN()
}

func tlsAddr(t *testing.T) string {
	var addr string
	withDSN(t, tlsDSN(t), func(mc *gomysql.Config) { addr = mc.Addr })
	return addr
}

// TestBackend_TLS runs the shared suite over TLS.
func TestBackend_TLS(t *testing.T) {
	dsn := tlsDSN(t)
	runSuite(t, dsn, tlsAddr(t))
}

// TestTLS_SessionEncrypted checks on the server that tetherd's sessions are
// encrypted, at least TLS 1.2.
func TestTLS_SessionEncrypted(t *testing.T) {
	cfg := tether.DefaultBackendConfig("mysql", tlsDSN(t))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openBackend(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE 'Ssl_version'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 {
		t.Fatalf("Ssl_version: %v", r.Rows)
	}
	v := fmt.Sprint(r.Rows[0][1])
	if v != "TLSv1.2" && v != "TLSv1.3" {
		t.Fatalf("the session's Ssl_version is %q, not TLS 1.2 or 1.3", v)
	}
	// A prepared statement (binary protocol) over the same session.
	r, err = b.Query(ctx, tether.Statement{SQL: "SELECT ? + 1", Params: []any{int64(41)}})
	if err != nil || fmt.Sprint(r.Rows[0][0]) != "42" {
		t.Fatalf("SELECT ? + 1 over TLS: %v %v", r, err)
	}
}

// TestTLS_LargeResultsPipelined reads results of several MB (many TLS
// records, more than one input buffer) while other requests are in flight
// on the same connection, and checks every byte of every answer.
func TestTLS_LargeResultsPipelined(t *testing.T) {
	cfg := tether.DefaultBackendConfig("mysql", tlsDSN(t))
	cfg.MaxConns, cfg.MinConns = 1, 1 // all on one session: pipelined
	cfg.AcquireTimeout = tether.Duration(30 * time.Second)
	b, ctx := openBackend(t, cfg)
	const rowLen = 700 << 10 // one row over many 16 KB records
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	start := time.Now()
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%4 == 0 {
				// 8 rows of 700 KB: 5.6 MB, each row its own character.
				r, err := b.Query(ctx, tether.Statement{
					SQL:    "SELECT n, REPEAT(CHAR(65 + n + ?), ?) FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7) t ORDER BY n",
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
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT ? * 2", Params: []any{int64(i)}})
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

// TestTLS_VerifyFails checks that a certificate that does not verify fails
// the dial, with the reason.
func TestTLS_VerifyFails(t *testing.T) {
	dsn := tlsDSN(t)
	otherCA := backendtest.RequireEnv(t, "PG_TLS_CA") // a CA that did not sign the server's certificate
	for _, tc := range []struct {
		name, dsn, want string
	}{
		{"WrongCA", withDSN(t, dsn, func(mc *gomysql.Config) { mc.Params["tls-ca"] = otherCA }), "certificate signed by unknown authority"},
		{"WrongServerName", withDSN(t, dsn, func(mc *gomysql.Config) { mc.Params["tls-server-name"] = "db.example.com" }), "not db.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := mysql.New(tether.DefaultBackendConfig("mysql", tc.dsn))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = b.Open(ctx)
			b.Close(ctx)
			var te *tether.Error
			if !errors.As(err, &te) || te.Code != tether.CodeUnavailable || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tls handshake") {
				t.Fatalf("open: %v; want unavailable, a tls handshake error with %q", err, tc.want)
			}
		})
	}
}

// TestTLS_DSN checks the DSN's TLS settings that fail before any dial.
func TestTLS_DSN(t *testing.T) {
	for _, dsn := range []string{
		"u:p@tcp(127.0.0.1:3306)/db?tls-ca=/nonexistent/ca.pem",                 // tls-ca without tls=true
		"u:p@tcp(127.0.0.1:3306)/db?tls=true&tls-ca=/nonexistent/ca.pem",        // unreadable CA
		"u:p@tcp(127.0.0.1:3306)/db?tls=skip-verify&tls-ca=/nonexistent/ca.pem", // a CA with nothing verified
		"u:p@tcp(127.0.0.1:3306)/db?tls=bogus",
	} {
		if _, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn)); err == nil {
			t.Errorf("%s: no error", dsn)
		}
	}
	for _, dsn := range []string{
		"u:p@tcp(127.0.0.1:3306)/db?tls=true&tls-server-name=db.example.com",
		"u:p@tcp(127.0.0.1:3306)/db?tls=skip-verify",
		"u:p@tcp(127.0.0.1:3306)/db?tls=preferred",
		"u:p@tcp(127.0.0.1:3306)/db?tls=false",
	} {
		if _, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn)); err != nil {
			t.Errorf("%s: %v", dsn, err)
		}
	}
}

// noTLSProxy forwards to target with the server's CLIENT_SSL capability
// cleared from its handshake: a server without TLS, for the client.
func noTLSProxy(t *testing.T, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				var hdr [4]byte
				if _, err := io.ReadFull(up, hdr[:]); err != nil {
					return
				}
				p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
				if _, err := io.ReadFull(up, p); err != nil {
					return
				}
				// protocol version, version string, NUL, thread id (4),
				// scramble (8), filler (1), then the capabilities' low 16 bits.
				pos := 1 + strings.IndexByte(string(p[1:]), 0) + 1 + 4 + 8 + 1
				p[pos+1] &^= 0x08 // CLIENT_SSL is 0x0800
				c.Write(append(hdr[:], p...))
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTLS_ServerWithoutTLS checks that tls=true refuses a server that does
// not offer TLS, saying so, rather than going on in clear.
func TestTLS_ServerWithoutTLS(t *testing.T) {
	via := noTLSProxy(t, tlsAddr(t))
	dsn := withDSN(t, tlsDSN(t), func(mc *gomysql.Config) { mc.Addr = via })
	b, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Open(ctx)
	b.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not offer TLS") {
		t.Fatalf("open against a server without TLS with tls=true: %v", err)
	}
}

// TestTLS_DroppedMidQuery cuts the TCP connection under a TLS session while
// a statement runs: that request fails as unavailable, and the pool dials
// a new session for the next.
func TestTLS_DroppedMidQuery(t *testing.T) {
	proxy := backendtest.NewProxy(t, tlsAddr(t))
	cfg := tether.DefaultBackendConfig("mysql", withDSN(t, tlsDSN(t), func(mc *gomysql.Config) { mc.Addr = proxy.Addr() }))
	cfg.MaxConns, cfg.MinConns = 1, 1
	b, ctx := openBackend(t, cfg)
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT CONNECTION_ID()"})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprint(r.Rows[0][0])

	watcher, _ := openBackend(t, tether.DefaultBackendConfig("mysql", tlsDSN(t)))
	done := make(chan error, 1)
	go func() {
		_, err := b.Query(ctx, tether.Statement{SQL: "SELECT SLEEP(20)"})
		done <- err
	}()
	// Wait until the server runs it, then cut.
	for {
		r, err := watcher.Query(ctx, tether.Statement{SQL: "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " + first + " AND INFO LIKE 'SELECT SLEEP%'"})
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
	watcher.Exec(ctx, tether.Statement{SQL: "KILL " + first}) // the server's side of it

	proxy.Start()
	var last error
	for i := 0; i < 100; i++ {
		r, err := b.Query(ctx, tether.Statement{SQL: "SELECT CONNECTION_ID()"})
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

// TestTLS_SessionResumed checks that a reconnect resumes the TLS session of
// an earlier connection (the backend's session cache), and that without
// the cache it does not.
func TestTLS_SessionResumed(t *testing.T) {
	for _, cache := range []bool{true, false} {
		b, err := mysql.New(tether.DefaultBackendConfig("mysql", tlsDSN(t)))
		if err != nil {
			t.Fatal(err)
		}
		if !cache {
			mysql.NoResume(b)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 0; i < 3; i++ {
			withTLS, resumed, err := mysql.DialOnce(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if !withTLS || resumed != (cache && i > 0) {
				t.Fatalf("session cache %v, dial %d: tls %v, resumed %v", cache, i, withTLS, resumed)
			}
		}
	}
}

// TestTLS_Modes connects with tls=skip-verify (no CA given: nothing to
// verify against) and tls=preferred as the user the server lets in only
// over TLS, and with tls=preferred to a server that offers no TLS, in clear.
func TestTLS_Modes(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"skip-verify", "preferred"} {
		dsn := withDSN(t, tlsDSN(t), func(mc *gomysql.Config) {
			mc.TLSConfig, mc.TLS = mode, nil
			delete(mc.Params, "tls-ca")
		})
		b, _ := openBackend(t, tether.DefaultBackendConfig("mysql", dsn))
		r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE 'Ssl_version'"})
		if err != nil || len(r.Rows) != 1 || !strings.HasPrefix(fmt.Sprint(r.Rows[0][1]), "TLSv1.") {
			t.Fatalf("tls=%s: Ssl_version %v, %v", mode, r, err)
		}
	}
	// In clear where the server offers no TLS: the user that may use TCP
	// without it (unless the server requires TLS of everyone).
	plain := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_DSN")
	via := noTLSProxy(t, tlsAddr(t))
	dsn := withDSN(t, plain, func(mc *gomysql.Config) { mc.Net, mc.Addr, mc.TLSConfig = "tcp", via, "preferred" })
	b, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	err = b.Open(ctx)
	if err != nil && strings.Contains(err.Error(), "secure transport") {
		t.Skipf("the server requires TLS of every TCP client: %v", err)
	}
	if err != nil {
		t.Fatalf("tls=preferred to a server without TLS: %v", err)
	}
	r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE 'Ssl_version'"})
	if err != nil || len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][1]) != "" {
		t.Fatalf("tls=preferred without TLS offered: Ssl_version %v, %v; want in clear", r, err)
	}
}

// TestTLS_CAReplacesSystemRoots: tls-ca is the only CA trusted, as mysql
// --ssl-ca and libpq's sslrootcert: with the system's roots too, any
// certificate a public CA issued for the host's name would pass.
func TestTLS_CAReplacesSystemRoots(t *testing.T) {
	_, own, err := mysql.CutParams(tlsDSN(t), "tls-ca")
	if err != nil || own["tls-ca"] == "" {
		t.Fatalf("the TLS DSN names no tls-ca: %v", err)
	}
	ca := own["tls-ca"]
	b, err := mysql.New(tether.DefaultBackendConfig("mysql", "u:p@tcp(127.0.0.1:3306)/db?tls=true&tls-ca="+ca))
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	want := x509.NewCertPool()
	want.AppendCertsFromPEM(pem)
	if got := mysql.RootCAs(b); got == nil || !got.Equal(want) {
		t.Error("the pool trusts more (or other) CAs than tls-ca's")
	}
}
