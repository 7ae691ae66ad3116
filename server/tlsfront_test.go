package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/testcert"
	"github.com/tether-php/tether/wire"
)

// TestServer_TLS: the TCP listener with TLS and client certificates. A
// client with a certificate the CA signed, and the token, is served; one
// without a certificate, or speaking plaintext, is not; TLS may listen
// beyond loopback where plaintext may not.
func TestServer_TLS(t *testing.T) {
	dir := t.TempDir()
	files, err := testcert.Generate(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *tether.Config) {
		c.Server.TCPListen = "127.0.0.1:0"
		c.Server.TCPToken = "s3cret"
		c.Server.TLSCert, c.Server.TLSKey, c.Server.TLSClientCA = files.ServerCert, files.ServerKey, files.CA
	})
	caPEM, _ := os.ReadFile(files.CA)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientCert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	dialTLS := func(certs []tls.Certificate) (*client, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ts.TCPAddr(),
			&tls.Config{RootCAs: roots, Certificates: certs, ServerName: "127.0.0.1"})
		if err != nil {
			return nil, err
		}
		if err := c.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		return &client{t: t, conn: c}, nil
	}

	c, err := dialTLS([]tls.Certificate{clientCert})
	if err != nil {
		t.Fatalf("TLS with a client certificate: %v", err)
	}
	c.ok(wire.Request{ID: 1, Op: wire.OpHello, Token: "s3cret"})
	c.ok(wire.Request{ID: 2, Op: wire.OpExec, SQL: "CREATE TABLE over_tls (v TEXT)"})
	c.ok(wire.Request{ID: 3, Op: wire.OpExec, SQL: "INSERT INTO over_tls VALUES (?)", Params: []any{strings.Repeat("x", 100000)}})
	rep := c.ok(wire.Request{ID: 4, Op: wire.OpQuery, SQL: "SELECT length(v) FROM over_tls"})
	if got := toUint(rep.Fields["rows"].([]any)[0].([]any)[0]); got != 100000 {
		t.Fatalf("a 100 kB value over TLS came back as %d bytes", got)
	}
	clients, err := ts.Clients(t.Context())
	if err != nil || len(clients) != 1 || !clients[0].TCP || !strings.HasPrefix(clients[0].Addr, "127.0.0.1:") {
		t.Fatalf("tether clients sees %+v (%v), want one TCP client from 127.0.0.1", clients, err)
	}

	// Without the token: unauthorized, as on plaintext TCP.
	noToken, err := dialTLS([]tls.Certificate{clientCert})
	if err != nil {
		t.Fatal(err)
	}
	errCode(t, noToken.do(wire.Request{ID: 1, Op: wire.OpPing}), tether.CodeUnauthorized)

	// Without a client certificate: the handshake (or the first read) fails.
	if bare, err := dialTLS(nil); err == nil {
		bare.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		bare.send(wire.Request{ID: 1, Op: wire.OpHello, Token: "s3cret"})
		if _, err := bare.conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client without a certificate was served")
		}
	}
	// Plaintext to the TLS port: no reply, the connection closes.
	plain, err := net.Dial("tcp", ts.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pc := &client{t: t, conn: plain}
	pc.send(wire.Request{ID: 1, Op: wire.OpHello, Token: "s3cret"})
	plain.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	if n, _ := plain.Read(buf); n > 0 && buf[0] != 0x15 { // 0x15: a TLS alert record
		t.Fatalf("a plaintext client got % x, want nothing or a TLS alert", buf[:n])
	}

	// Beyond loopback: only with TLS.
	for _, tc := range []struct {
		tls  bool
		want string
	}{{false, "plaintext TCP is only allowed on a loopback address"}, {true, ""}} {
		cfg := tether.DefaultConfig()
		cfg.Server.TCPListen, cfg.Server.TCPToken = "0.0.0.0:9999", "s3cret"
		if tc.tls {
			cfg.Server.TLSCert, cfg.Server.TLSKey = files.ServerCert, files.ServerKey
		}
		err := cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("0.0.0.0 with tls=%v: %v", tc.tls, err)
		}
	}
	cfg := tether.DefaultConfig()
	cfg.Server.TCPListen, cfg.Server.TCPToken = "127.0.0.1:9999", "s3cret"
	cfg.Server.TLSCert, cfg.Server.TLSKey = files.ServerCert, files.CA // a certificate is not a key
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "server.tls_cert") {
		t.Errorf("a bad key: %v", err)
	}
}
