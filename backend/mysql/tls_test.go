package mysql_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
)

// The TLS tests run against TETHER_TEST_MYSQL_TLS_DSN: a user that the
// server lets in only over TLS (REQUIRE SSL), reached over TCP with
// tls=true and tls-ca (scripts/test.sh). The checks every TLS backend
// passes are backendtest.TLSSuite's; what is MariaDB's own stays here.

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

func newTLSBackend(cfg tether.BackendConfig) (backendtest.SQLBackend, error) { return mysql.New(cfg) }

func dialOnce(ctx context.Context, b backendtest.SQLBackend) (withTLS, resumed bool, err error) {
	return mysql.DialOnce(ctx, b.(*mysql.Backend))
}

func noResume(b backendtest.SQLBackend) { mysql.NoResume(b.(*mysql.Backend)) }

// sessionTLS is the session's Ssl_version, "" in clear.
func sessionTLS(ctx context.Context, b backendtest.SQLBackend) (string, error) {
	r, err := b.Query(ctx, tether.Statement{SQL: "SHOW SESSION STATUS LIKE 'Ssl_version'"})
	if err != nil {
		return "", err
	}
	if len(r.Rows) != 1 {
		return "", fmt.Errorf("Ssl_version: %v", r.Rows)
	}
	return fmt.Sprint(r.Rows[0][1]), nil
}

// tlsSuite describes MariaDB over TLS for the shared TLS checks.
func tlsSuite(t *testing.T) *backendtest.TLSSuite {
	dsn := tlsDSN(t)
	return &backendtest.TLSSuite{
		Driver: "mysql",
		New:    newTLSBackend,
		DSN:    dsn,
		Via: func(t *testing.T, addr string) string {
			return withDSN(t, dsn, func(mc *gomysql.Config) { mc.Addr = addr })
		},
		Addr:        tlsAddr(t),
		Placeholder: func(int) string { return "?" },
		SessionTLS:  sessionTLS,
		Large:       "SELECT n, REPEAT(CHAR(65 + n + ?), ?) FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7) t ORDER BY n",
		SessionID:   "SELECT CONNECTION_ID()",
		Sleep20:     "SELECT SLEEP(20)",
		Running: func(id string) string {
			return "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " + id + " AND INFO LIKE 'SELECT SLEEP%'"
		},
		Terminate: func(id string) string { return "KILL " + id },
		OtherCA:   backendtest.RequireEnv(t, "PG_TLS_CA"),
		WrongCA: func(t *testing.T, ca string) string {
			return withDSN(t, dsn, func(mc *gomysql.Config) { mc.Params["tls-ca"] = ca })
		},
		WrongName: func(t *testing.T) (string, string) {
			return withDSN(t, dsn, func(mc *gomysql.Config) { mc.Params["tls-server-name"] = "db.example.com" }), "db.example.com"
		},
		Handshake: "tls handshake",
		WithoutTLS: func(t *testing.T) string {
			via := noTLSProxy(t, tlsAddr(t))
			return withDSN(t, dsn, func(mc *gomysql.Config) { mc.Addr = via })
		},
		Refused:  "does not offer TLS",
		DialOnce: dialOnce,
		NoResume: noResume,
		Resumes:  true,
	}
}

// TestBackend_TLS runs the shared suite over TLS.
func TestBackend_TLS(t *testing.T) {
	dsn := tlsDSN(t)
	runSuite(t, dsn, tlsAddr(t))
}

// TestTLS_SessionEncrypted checks on the server that tetherd's sessions are
// encrypted (Ssl_version), at least TLS 1.2, and that a prepared statement
// (binary protocol) runs over the same session.
func TestTLS_SessionEncrypted(t *testing.T) { tlsSuite(t).SessionEncrypted(t) }

// TestTLS_LargeResultsPipelined reads results of several MB while other
// requests are in flight on the same connection.
func TestTLS_LargeResultsPipelined(t *testing.T) { tlsSuite(t).LargeResultsPipelined(t) }

// TestTLS_VerifyFails checks that a certificate that does not verify fails
// the dial, with the reason: a wrong CA (tls-ca), a wrong name
// (tls-server-name).
func TestTLS_VerifyFails(t *testing.T) { tlsSuite(t).VerifyFails(t) }

// TestTLS_ServerWithoutTLS checks that tls=true refuses a server that does
// not offer TLS (CLIENT_SSL cleared by noTLSProxy), saying so, rather than
// going on in clear.
func TestTLS_ServerWithoutTLS(t *testing.T) { tlsSuite(t).ServerWithoutTLS(t) }

// TestTLS_DroppedMidQuery cuts the TCP connection under a TLS session while
// a statement runs.
func TestTLS_DroppedMidQuery(t *testing.T) { tlsSuite(t).DroppedMidQuery(t) }

// TestTLS_SessionResumed checks that a reconnect resumes the TLS session of
// an earlier connection (the backend's session cache), and that without
// the cache it does not.
func TestTLS_SessionResumed(t *testing.T) { tlsSuite(t).Resumption(t) }

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
	return backendtest.Listen(t, "127.0.0.1:0", func(c net.Conn) {
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
		backendtest.Splice(c, up)
	})
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
		if v, err := sessionTLS(ctx, b); err != nil || !strings.HasPrefix(v, "TLSv1.") {
			t.Fatalf("tls=%s: Ssl_version %q, %v", mode, v, err)
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
	if v, err := sessionTLS(ctx, b); err != nil || v != "" {
		t.Fatalf("tls=preferred without TLS offered: Ssl_version %q, %v; want in clear", v, err)
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
