package backendtest

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

	tether "github.com/tether-php/tether"
)

// TLSSuite describes a SQL backend reached over TCP with TLS, for the checks
// every such backend must pass (MariaDB's and PostgreSQL's TLS-only users:
// REQUIRE SSL, hostssl). Each check is a method, called by a test of the
// backend's own package, so that the tests keep their names there.
type TLSSuite struct {
	// Driver is the backend's name in tether.DefaultBackendConfig.
	Driver string
	// New returns an unopened backend for cfg.
	New func(cfg tether.BackendConfig) (SQLBackend, error)
	// DSN is the TLS DSN: the user the server lets in only over TLS,
	// verified against the server's CA.
	DSN string
	// Via returns DSN reaching the server at addr (host:port) instead, its
	// TLS settings unchanged.
	Via func(t *testing.T, addr string) string
	// Addr is the server's host:port, as DSN names it.
	Addr string
	// Placeholder returns the n-th (1-based) parameter placeholder.
	Placeholder func(n int) string
	// SessionTLS returns the TLS version the server reports for the
	// session b's statement runs on ("TLSv1.3"), "" where it runs in clear.
	SessionTLS func(ctx context.Context, b SQLBackend) (string, error)
	// Large returns 8 rows (n, text) for n from 0 to 7, text being
	// rowLen times the character 'A'+n+add, from the parameters add and
	// rowLen.
	Large string
	// SessionID returns the server's id of the session it runs on.
	SessionID string
	// Sleep20 sleeps 20 seconds; Running(id) returns 1 while session id
	// runs it (0 otherwise); Terminate(id) ends session id on the server.
	Sleep20            string
	Running, Terminate func(id string) string
	// OtherCA is a CA that did not sign the server's certificate;
	// WrongName returns DSN reaching the server under a name its
	// certificate lacks, and that name. A certificate that does not verify
	// fails with an error that contains Handshake too ("" for nothing more).
	OtherCA   string
	WrongCA   func(t *testing.T, ca string) string
	WrongName func(t *testing.T) (dsn, name string)
	Handshake string
	// WithoutTLS returns DSN reaching a server (a fake or a proxy) that
	// does not offer TLS; opening it must fail with Refused in the error.
	WithoutTLS func(t *testing.T) string
	Refused    string
	// DialOnce dials one server connection as the pool does and closes it,
	// reporting whether it ran TLS and resumed a TLS session; NoResume, when
	// set, turns b's session cache off.
	DialOnce func(ctx context.Context, b SQLBackend) (withTLS, resumed bool, err error)
	NoResume func(b SQLBackend)
	// Resumes is whether the server resumes a TLS session (MariaDB does;
	// PostgreSQL turns resumption off: no session tickets, no session
	// cache, be-secure-openssl.c).
	Resumes bool
}

// Open opens a backend for cfg, closed when the test ends.
func (s *TLSSuite) Open(t *testing.T, cfg tether.BackendConfig) (SQLBackend, context.Context) {
	t.Helper()
	b, err := s.New(cfg)
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

// OpenErr opens a backend for dsn, closes it, and returns what the open
// returned.
func (s *TLSSuite) OpenErr(t *testing.T, dsn string) error {
	t.Helper()
	b, err := s.New(tether.DefaultBackendConfig(s.Driver, dsn))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Open(ctx)
	b.Close(ctx)
	return err
}

func (s *TLSSuite) config(dsn string, conns int) tether.BackendConfig {
	cfg := tether.DefaultBackendConfig(s.Driver, dsn)
	if conns > 0 {
		cfg.MaxConns, cfg.MinConns = conns, conns
	}
	return cfg
}

// SessionEncrypted checks on the server that tetherd's sessions are
// encrypted, at least TLS 1.2, and that a prepared statement runs over the
// same session.
func (s *TLSSuite) SessionEncrypted(t *testing.T) {
	b, ctx := s.Open(t, s.config(s.DSN, 1))
	v, err := s.SessionTLS(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if v != "TLSv1.2" && v != "TLSv1.3" {
		t.Fatalf("the session's TLS version is %q, not TLS 1.2 or 1.3", v)
	}
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT " + s.Placeholder(1) + " + 1", Params: []any{int64(41)}})
	if err != nil || fmt.Sprint(r.Rows[0][0]) != "42" {
		t.Fatalf("SELECT %s + 1 over TLS: %v %v", s.Placeholder(1), r, err)
	}
}

// LargeResultsPipelined reads results of several MB (many TLS records, more
// than one input buffer) while other requests are in flight on the same
// connection, and checks every byte of every answer.
func (s *TLSSuite) LargeResultsPipelined(t *testing.T) {
	cfg := s.config(s.DSN, 1) // all on one session: pipelined
	cfg.AcquireTimeout = tether.Duration(30 * time.Second)
	b, ctx := s.Open(t, cfg)
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
				r, err := b.Query(ctx, tether.Statement{SQL: s.Large, Params: []any{int64(i % 10), int64(rowLen)}})
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
			r, err := b.Query(ctx, tether.Statement{SQL: "SELECT " + s.Placeholder(1) + " * 2", Params: []any{int64(i)}})
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

// VerifyFails checks that a certificate that does not verify fails the
// dial as unavailable, with the reason: signed by another CA, or issued for
// another name.
func (s *TLSSuite) VerifyFails(t *testing.T) {
	check := func(t *testing.T, dsn, want string) {
		err := s.OpenErr(t, dsn)
		if Code(err) != tether.CodeUnavailable || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), s.Handshake) {
			t.Fatalf("open: %v; want unavailable, an error with %q and %q", err, want, s.Handshake)
		}
	}
	t.Run("WrongCA", func(t *testing.T) {
		check(t, s.WrongCA(t, s.OtherCA), "certificate signed by unknown authority")
	})
	t.Run("WrongServerName", func(t *testing.T) {
		dsn, name := s.WrongName(t)
		check(t, dsn, "not "+name)
	})
}

// ServerWithoutTLS checks that a DSN requiring TLS refuses a server that
// does not offer it, as unavailable and saying so, rather than going on in
// clear.
func (s *TLSSuite) ServerWithoutTLS(t *testing.T) {
	err := s.OpenErr(t, s.WithoutTLS(t))
	if Code(err) != tether.CodeUnavailable || !strings.Contains(err.Error(), s.Refused) {
		t.Fatalf("open against a server without TLS: %v; want unavailable, %q", err, s.Refused)
	}
}

// DroppedMidQuery cuts the TCP connection under a TLS session while a
// statement runs: that request fails as unavailable, and the pool dials a
// new session for the next.
func (s *TLSSuite) DroppedMidQuery(t *testing.T) {
	proxy := NewProxy(t, s.Addr)
	b, ctx := s.Open(t, s.config(s.Via(t, proxy.Addr()), 1))
	r, err := b.Query(ctx, tether.Statement{SQL: s.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprint(r.Rows[0][0])

	watcher, _ := s.Open(t, s.config(s.DSN, 0))
	done := make(chan error, 1)
	go func() {
		_, err := b.Query(ctx, tether.Statement{SQL: s.Sleep20})
		done <- err
	}()
	for { // until the server runs it, then cut
		r, err := watcher.Query(ctx, tether.Statement{SQL: s.Running(first)})
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
		if Code(err) != tether.CodeUnavailable {
			t.Fatalf("the statement on the dropped connection: %v, want unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the statement on the dropped connection did not fail")
	}
	watcher.Exec(ctx, tether.Statement{SQL: s.Terminate(first)}) // the server's side of it

	proxy.Start()
	var last error
	for i := 0; i < 100; i++ {
		r, err := b.Query(ctx, tether.Statement{SQL: s.SessionID})
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

// Resumption dials again and again with the backend's TLS session cache:
// every dial runs TLS, and each after the first resumes the session of an
// earlier one where the server allows it (Resumes), none where it does not
// (the cache must not get in the way). With NoResume set, the same without
// the cache: no dial resumes.
func (s *TLSSuite) Resumption(t *testing.T) {
	caches := []bool{true}
	if s.NoResume != nil {
		caches = append(caches, false)
	}
	for _, cache := range caches {
		b, err := s.New(tether.DefaultBackendConfig(s.Driver, s.DSN))
		if err != nil {
			t.Fatal(err)
		}
		if !cache {
			s.NoResume(b)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 0; i < 3; i++ {
			withTLS, resumed, err := s.DialOnce(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if !withTLS || resumed != (s.Resumes && cache && i > 0) {
				t.Fatalf("session cache %v, server resumes %v, dial %d: tls %v, resumed %v", cache, s.Resumes, i, withTLS, resumed)
			}
		}
	}
}

// Listen serves every connection accepted on listen (host:0) with serve,
// until the test ends, and returns the listener's address. The connection
// is closed when serve returns.
func Listen(t testing.TB, listen string, serve func(c net.Conn)) string {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("listen %s: %v", listen, err)
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
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// Splice copies c to up and up to c until up's side ends.
func Splice(c, up net.Conn) {
	go io.Copy(up, c)
	io.Copy(c, up)
}

// Forward is Listen with a plain TCP forwarder to target.
func Forward(t testing.TB, listen, target string) string {
	return Listen(t, listen, func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		Splice(c, up)
	})
}

// Code is the tether.Code of err, "" for none.
func Code(err error) tether.Code {
	var te *tether.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}
