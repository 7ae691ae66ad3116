package sqlconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The TLS tests run echo (conn_internal_test.go) over TLS: a crypto/tls
// server on the far end of the socket pair, the client's tls.Conn over a
// Socket, adopted for the loop once the handshake is done, as mysql and
// postgres do.

var (
	certOnce sync.Once
	cert     tls.Certificate
	roots    *x509.CertPool
)

// testCert is a self-signed certificate for the name "echo".
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "echo"}, DNSNames: []string{"echo"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		c, _ := x509.ParseCertificate(der)
		roots = x509.NewCertPool()
		roots.AddCert(c)
	})
	return cert, roots
}

// tlsPair runs a TLS handshake over the socket pair fds, c's end a client
// over a Socket, adopted for the loop (AdoptTLS), the other a crypto/tls
// server, returned with the function that writes the server's records held
// (burst: once the handshake is done, they are held until it is called).
func tlsPair(ctx context.Context, c *echoConn, fds [2]int, burst bool) (io.ReadWriter, func(), error) {
	crt, pool := testCert(nil)
	// A net.Conn on a duplicate of fd: fd itself stays open (the test's peer
	// writes to fds[1]; closing it let the client's fd, taken later, reuse
	// its number, and the test's garbage went to the client's own socket).
	conn := func(fd int) (net.Conn, error) {
		dup, err := syscall.Dup(fd)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(dup), "socket")
		nc, err := net.FileConn(f) // a duplicate of dup
		f.Close()
		return nc, err
	}
	cnc, err := conn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	snc, err := conn(fds[1])
	if err != nil {
		cnc.Close()
		return nil, nil, err
	}
	bc := &burstConn{Conn: snc}
	srv := tls.Server(bc, &tls.Config{Certificates: []tls.Certificate{crt}})
	hs := make(chan error, 1)
	go func() { hs <- srv.HandshakeContext(ctx) }()
	tc := tls.Client(NewSocket(cnc), &tls.Config{RootCAs: pool, ServerName: "echo", MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("client handshake: %w", err)
	}
	if err := <-hs; err != nil {
		return nil, nil, fmt.Errorf("server handshake: %w", err)
	}
	bc.hold = burst
	if err := c.AdoptTLS(tc); err != nil {
		return nil, nil, err
	}
	return srv, bc.flush, nil
}

// burstConn holds what is written to it (when hold) until flush, which
// writes it in one.
type burstConn struct {
	net.Conn
	hold bool
	buf  []byte
}

func (b *burstConn) Write(p []byte) (int, error) {
	if !b.hold {
		return b.Conn.Write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *burstConn) flush() {
	if len(b.buf) > 0 {
		b.Conn.Write(b.buf)
		b.buf = b.buf[:0]
	}
}

// TestConn_TLSRecordsBufferedInTLS: an answer that arrives as many records
// in one read of the socket is read whole, though the socket has nothing
// left after the first record (the rest wait inside the tls.Conn).
func TestConn_TLSRecordsBufferedInTLS(t *testing.T) {
	p, _, _ := openEcho(t, &echoDriver{tls: true, burst: true})
	for _, n := range []int{10, 100, 3000} {
		want := "split:" + strings.Repeat("x", n) // a record of 3 bytes each
		b, err := query(p, want)
		if err != nil || string(b) != want {
			t.Fatalf("%d records in one write: %d bytes, %v", n/3, len(b), err)
		}
	}
}

// TestConn_TLSCloseNotify: the server's close_notify with a request in
// flight fails the connection and the request, as the end of the stream.
func TestConn_TLSCloseNotify(t *testing.T) {
	d := &echoDriver{tls: true, got: make(chan string, 1)}
	var srv *tls.Conn
	d.onServe = func(rw io.ReadWriter) { srv = rw.(*tls.Conn) }
	p, c, _ := openEcho(t, d)
	errc := make(chan error, 1)
	go func() {
		_, err := query(p, "hang")
		errc <- err
	}()
	if got := <-d.got; got != "hang" {
		t.Fatalf("server read %q", got)
	}
	if err := srv.CloseWrite(); err != nil { // close_notify, the socket left open
		t.Fatal(err)
	}
	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "connection lost: EOF") {
		t.Fatalf("query on a connection the server closed: %v, want connection lost: EOF", err)
	}
	var closed bool
	onLoop(t, p, func() { closed = c.Closed() })
	if !closed {
		t.Error("the connection the server closed is still open")
	}
}

// TestConn_TLSGarbage: bytes that are no TLS record fail the connection
// with crypto/tls's reason, not a hang.
func TestConn_TLSGarbage(t *testing.T) {
	d := &echoDriver{tls: true, got: make(chan string, 1)}
	p, _, peer := openEcho(t, d)
	errc := make(chan error, 1)
	go func() {
		_, err := query(p, "hang")
		errc <- err
	}()
	<-d.got
	fdReader(peer).Write([]byte("\x17\x03\x03\x00\x20" + strings.Repeat("?", 32)))
	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "read tls:") {
		t.Fatalf("query answered with garbage: %v, want a read tls error", err)
	}
}
