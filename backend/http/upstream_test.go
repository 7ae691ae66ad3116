package httpup_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	httpup "github.com/tether-php/tether/backend/http"
)

// counts is what a test server saw: connections opened and requests served.
type counts struct {
	conns    atomic.Int64
	requests atomic.Int64
}

// serve starts a real HTTP server on loopback that counts its connections
// and requests, closed when the test ends.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, *counts) {
	t.Helper()
	srv, c := unstarted(h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, c
}

func unstarted(h http.HandlerFunc) (*httptest.Server, *counts) {
	c := &counts{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected in some tests
	return srv, c
}

// httpOpts returns c's http settings (c.Options), set to an empty *Config
// first if c has none.
func httpOpts(c *tether.BackendConfig) *httpup.Config {
	if c.Options == nil {
		c.Options = &httpup.Config{}
	}
	return c.Options.(*httpup.Config)
}

// open returns an opened upstream for dsn, with cfg's defaults changed by
// tweak, closed when the test ends.
func open(t *testing.T, dsn string, tweak func(*tether.BackendConfig)) *httpup.Upstream {
	t.Helper()
	cfg := tether.DefaultBackendConfig("http", dsn)
	if tweak != nil {
		tweak(&cfg)
	}
	u, err := httpup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(context.Background()) })
	return u
}

func call(t *testing.T, u *httpup.Upstream, r tether.HTTPRequest) (*tether.HTTPResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return u.Call(ctx, r)
}

func mustCall(t *testing.T, u *httpup.Upstream, r tether.HTTPRequest) *tether.HTTPResponse {
	t.Helper()
	resp, err := call(t, u, r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	return resp
}

// wantCode fails unless err is a *tether.Error with code.
func wantCode(t *testing.T, err error, code tether.Code) *tether.Error {
	t.Helper()
	var te *tether.Error
	if !errors.As(err, &te) {
		t.Fatalf("want a %s *tether.Error, got %T %v", code, err, err)
	}
	if te.Code != code {
		t.Fatalf("want code %s, got %v", code, te)
	}
	return te
}

func TestUpstream_Call(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Request-Uri", r.RequestURI)
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("X-Got-Custom", r.Header.Get("X-Custom"))
		w.Header().Set("X-Got-Length", strconv.FormatInt(r.ContentLength, 10))
		w.Header()["X-Multi"] = []string{"one", "two", "three"}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(201)
		w.Write(body)
	})
	host := srv.Listener.Addr().String()
	u := open(t, srv.URL+"/v1/", nil)

	binary := make([]byte, 1024)
	for i := range binary {
		binary[i] = byte(i)
	}

	t.Run("PostBinary", func(t *testing.T) {
		resp := mustCall(t, u, tether.HTTPRequest{Method: "POST", Path: "/echo?a=1&b=%2F&c", Body: binary,
			Header: map[string]string{"x-custom": "v\twith tab"}})
		if resp.Status != 201 || !bytes.Equal(resp.Body, binary) {
			t.Fatalf("status %d, body of %d bytes (equal %v)", resp.Status, len(resp.Body), bytes.Equal(resp.Body, binary))
		}
		h := resp.Header
		for k, want := range map[string]string{"x-method": "POST", "x-request-uri": "/v1/echo?a=1&b=%2F&c",
			"x-host": host, "x-got-custom": "v\twith tab", "x-got-length": "1024", "content-type": "application/octet-stream"} {
			if got := h[k]; len(got) != 1 || got[0] != want {
				t.Errorf("header %s = %q, want [%q]", k, got, want)
			}
		}
		if got := h["x-multi"]; !reflect.DeepEqual(got, []string{"one", "two", "three"}) {
			t.Errorf("x-multi = %q: values lost or out of order", got)
		}
		for k := range h {
			if k != strings.ToLower(k) {
				t.Errorf("header name %q is not lower case", k)
			}
		}
	})
	t.Run("GetByDefault", func(t *testing.T) {
		resp := mustCall(t, u, tether.HTTPRequest{Path: "/a%2Db/c"})
		if m, uri := resp.Header["x-method"], resp.Header["x-request-uri"]; m[0] != "GET" || uri[0] != "/v1/a%2Db/c" {
			t.Fatalf("method %q, request URI %q: want GET /v1/a%%2Db/c (escapes kept)", m, uri)
		}
		if len(resp.Body) != 0 || resp.Header["x-got-length"][0] != "0" {
			t.Fatalf("a request without a body sent %q bytes: %q", resp.Header["x-got-length"], resp.Body)
		}
	})
	t.Run("RootBase", func(t *testing.T) {
		u := open(t, srv.URL, nil)
		resp := mustCall(t, u, tether.HTTPRequest{Method: "DELETE", Path: "/x?"})
		if uri := resp.Header["x-request-uri"][0]; uri != "/x?" {
			t.Fatalf("request URI %q, want /x?", uri)
		}
	})
}

func TestUpstream_DefaultHeaders(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		for _, k := range []string{"X-Api-Key", "X-Both", "X-Req", "User-Agent"} {
			w.Header()["Got-"+k] = r.Header.Values(k)
		}
		w.Header().Set("Got-Host", r.Host)
	})
	u := open(t, srv.URL, func(c *tether.BackendConfig) {
		httpOpts(c).Headers = map[string]string{"X-Api-Key": "secret", "x-both": "default", "Host": "api.internal"}
	})
	resp := mustCall(t, u, tether.HTTPRequest{Path: "/", Header: map[string]string{"X-BOTH": "request", "x-req": "1"}})
	for k, want := range map[string][]string{
		"got-x-api-key":  {"secret"},
		"got-x-both":     {"request"}, // the request wins, and the default is not sent as well
		"got-x-req":      {"1"},
		"got-user-agent": {"tetherd"},
		"got-host":       {"api.internal"},
	} {
		if got := resp.Header[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// The defaults are shared between requests: a request's own header must
	// not leak into the next one.
	resp = mustCall(t, u, tether.HTTPRequest{Path: "/"})
	if got := resp.Header["got-x-both"]; !reflect.DeepEqual(got, []string{"default"}) {
		t.Errorf("next request: x-both = %q, want [default]", got)
	}
	if got := resp.Header["got-x-req"]; got != nil {
		t.Errorf("next request: x-req = %q leaked from the previous request", got)
	}
}

func TestUpstream_KeepAlive(t *testing.T) {
	srv, c := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

	t.Run("Reused", func(t *testing.T) {
		u := open(t, srv.URL, nil)
		before := c.conns.Load()
		for i := 0; i < 50; i++ {
			mustCall(t, u, tether.HTTPRequest{Method: "POST", Path: "/", Body: []byte("x")})
		}
		if n := c.conns.Load() - before; n != 1 {
			t.Fatalf("50 sequential calls opened %d connections, want 1", n)
		}
		if s := u.Stats(); s.Open != 1 || s.InUse != 0 || s.Idle != 1 {
			t.Fatalf("stats %+v, want one idle connection", s)
		}
	})
	t.Run("Disabled", func(t *testing.T) {
		u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).DisableKeepAlive = true })
		before := c.conns.Load()
		for i := 0; i < 5; i++ {
			mustCall(t, u, tether.HTTPRequest{Path: "/"})
		}
		if n := c.conns.Load() - before; n != 5 {
			t.Fatalf("5 calls without keep-alive opened %d connections, want 5", n)
		}
	})
}

func TestUpstream_MaxConns(t *testing.T) {
	t.Run("Bound", func(t *testing.T) {
		var active, most atomic.Int64
		// Each request is held until the test has seen two in at once and
		// lets both go; a third let in beside them would raise most.
		entered, release := make(chan struct{}), make(chan struct{})
		srv, c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			n := active.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			entered <- struct{}{}
			<-release
			active.Add(-1)
		})
		u := open(t, srv.URL, func(c *tether.BackendConfig) {
			c.MaxConns = 2
			c.AcquireTimeout = tether.Duration(10 * time.Second)
		})
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := u.Call(context.Background(), tether.HTTPRequest{Path: "/"})
				if err == nil && resp.Status != 200 {
					err = errors.New("status " + strconv.Itoa(resp.Status))
				}
				errs <- err
			}()
		}
		for i := 0; i < 16; i += 2 {
			for range 2 {
				select {
				case <-entered:
				case <-time.After(10 * time.Second):
					t.Fatalf("after %d requests, no two ran at once", i)
				}
			}
			release <- struct{}{}
			release <- struct{}{}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if m := most.Load(); m != 2 {
			t.Errorf("at most %d requests ran at once, want 2 (max_conns)", m)
		}
		if n := c.conns.Load(); n > 2 {
			t.Errorf("%d connections opened, want at most 2 (max_conns)", n)
		}
		if s := u.Stats(); s.Waiting == 0 || s.Open > 2 {
			t.Errorf("stats %+v: want waits counted and at most 2 open", s)
		}
	})
	t.Run("Busy", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
		})
		u := open(t, srv.URL, func(c *tether.BackendConfig) {
			c.MaxConns = 1
			c.AcquireTimeout = tether.Duration(50 * time.Millisecond)
		})
		first := make(chan error, 1)
		go func() {
			_, err := call(t, u, tether.HTTPRequest{Path: "/"})
			first <- err
		}()
		<-entered
		if s := u.Stats(); s.InUse != 1 || s.Open != 1 {
			t.Errorf("stats during a call %+v, want 1 in use of 1 open", s)
		}
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		if te := wantCode(t, err, tether.CodeBusy); !te.Retry {
			t.Errorf("busy without retry: %v", te)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
}

func TestUpstream_Timeout(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	u := open(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := u.Call(ctx, tether.HTTPRequest{Path: "/slow"})
	if te := wantCode(t, err, tether.CodeTimeout); te.Retry {
		t.Errorf("a timeout after the request was sent must not be retryable: %v", te)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the call took %v, its deadline was 100ms", d)
	}

	t.Run("UpstreamTimeout", func(t *testing.T) {
		// http.timeout bounds a call whose own deadline is later.
		u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).Timeout = tether.Duration(100 * time.Millisecond) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := u.Call(ctx, tether.HTTPRequest{Path: "/slow"})
		wantCode(t, err, tether.CodeTimeout)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the call took %v; http.timeout was 100ms", d)
		}
	})
}

func TestUpstream_Statuses(t *testing.T) {
	srv, c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/error":
			w.WriteHeader(500)
			io.WriteString(w, "boom")
		case "/redirect":
			http.Redirect(w, r, "/target", http.StatusFound)
		case "/target":
			io.WriteString(w, "followed")
		}
	})
	u := open(t, srv.URL, nil)
	resp := mustCall(t, u, tether.HTTPRequest{Path: "/error"})
	if resp.Status != 500 || string(resp.Body) != "boom" {
		t.Fatalf("got %d %q, want the 500 and its body as a response", resp.Status, resp.Body)
	}
	resp = mustCall(t, u, tether.HTTPRequest{Path: "/redirect"})
	if resp.Status != 302 || resp.Header["location"][0] != "/target" {
		t.Fatalf("got %d %v, want the 302 itself", resp.Status, resp.Header)
	}
	if n := c.requests.Load(); n != 2 {
		t.Fatalf("the server got %d requests, want 2: the redirect was followed", n)
	}
}

// resetConn closes c with an RST instead of a FIN.
func resetConn(c net.Conn) {
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func TestUpstream_Reset(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			io.WriteString(w, "ok")
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		if r.URL.Path == "/midbody" {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
			waitSent(conn) // the headers and the start of the body reach the client before the reset
		}
		if r.URL.Path == "/eof" {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
			conn.Close()
			return
		}
		resetConn(conn)
	})
	u := open(t, srv.URL, nil)
	for _, path := range []string{"/reset", "/midbody", "/eof"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			_, err := call(t, u, tether.HTTPRequest{Path: path})
			te := wantCode(t, err, tether.CodeBackendError)
			if te.Retry || !errors.Is(err, httpup.ErrBroken) {
				t.Errorf("want not retryable and ErrBroken: %v", te)
			}
			if resp := mustCall(t, u, tether.HTTPRequest{Path: "/ok"}); string(resp.Body) != "ok" {
				t.Fatalf("the next call got %q", resp.Body)
			}
		})
	}
}

func TestUpstream_TooLarge(t *testing.T) {
	const limit = 1 << 20
	const huge = 256 << 20
	streamed := make(chan int64, 1) // bytes the /chunked handler wrote before the client went away
	srv, c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declared":
			w.Header().Set("Content-Length", strconv.Itoa(2*limit))
			w.Write(make([]byte, 2*limit))
		case "/chunked":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			chunk := make([]byte, 64<<10)
			var written int64
			for written < int64(n) {
				m, err := w.Write(chunk[:min(len(chunk), n-int(written))])
				written += int64(m)
				if err != nil {
					break
				}
			}
			if n == huge {
				streamed <- written
			}
		case "/exact":
			w.Write(bytes.Repeat([]byte{'x'}, limit))
		default:
			io.WriteString(w, "small")
		}
	})
	u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).MaxResponseBytes = limit })

	// next checks that the upstream serves the next call, and, when dropped,
	// that the connection of the too-large body was not kept.
	next := func(t *testing.T, dropped bool) {
		t.Helper()
		before := c.conns.Load()
		if resp := mustCall(t, u, tether.HTTPRequest{Path: "/small"}); string(resp.Body) != "small" {
			t.Fatalf("the next call got %q", resp.Body)
		}
		if dropped && c.conns.Load() == before {
			t.Fatal("the next call reused the connection of the too-large body: it was read to its end or kept")
		}
	}
	t.Run("Declared", func(t *testing.T) {
		_, err := call(t, u, tether.HTTPRequest{Path: "/declared"})
		wantCode(t, err, tether.CodeTooLarge)
		if !errors.Is(err, httpup.ErrTooLarge) {
			t.Errorf("want ErrTooLarge in %v", err)
		}
		next(t, true)
	})
	t.Run("OneOver", func(t *testing.T) {
		_, err := call(t, u, tether.HTTPRequest{Path: "/chunked?n=" + strconv.Itoa(limit+1)})
		wantCode(t, err, tether.CodeTooLarge)
		next(t, false) // the end may have come with the byte over the limit: then the connection is clean
	})
	t.Run("Huge", func(t *testing.T) {
		_, err := call(t, u, tether.HTTPRequest{Path: "/chunked?n=" + strconv.Itoa(huge)})
		wantCode(t, err, tether.CodeTooLarge)
		select {
		case n := <-streamed:
			if n >= huge {
				t.Fatalf("the server wrote all %d bytes: the body was read to its end", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server is still writing: the connection was not dropped")
		}
		next(t, true)
	})
	t.Run("Exact", func(t *testing.T) {
		for _, path := range []string{"/exact", "/chunked?n=" + strconv.Itoa(limit)} {
			resp := mustCall(t, u, tether.HTTPRequest{Path: path})
			if len(resp.Body) != limit {
				t.Fatalf("%s: a body of exactly max_response_bytes came back as %d bytes", path, len(resp.Body))
			}
		}
	})
}

func TestUpstream_Unavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := open(t, "http://"+addr+"/api", nil) // Open does not fail on an upstream that is down
	_, err = call(t, u, tether.HTTPRequest{Method: "POST", Path: "/x", Body: []byte("b")})
	te := wantCode(t, err, tether.CodeUnavailable)
	if !te.Retry || !errors.Is(err, tether.ErrUnavailable) {
		t.Fatalf("refused: want retryable and ErrUnavailable: %v", te)
	}
	if !strings.Contains(te.Message, "refused") {
		t.Errorf("the message does not say why: %q", te.Message)
	}

	t.Run("Closed", func(t *testing.T) {
		srv, c := serve(t, func(w http.ResponseWriter, r *http.Request) {})
		u := open(t, srv.URL, nil)
		if err := u.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		if te := wantCode(t, err, tether.CodeUnavailable); !te.Retry {
			t.Errorf("closed: want retryable: %v", te)
		}
		if c.requests.Load() != 0 {
			t.Fatal("a closed upstream sent a request")
		}
	})
}

func TestUpstream_Close(t *testing.T) {
	// start serves calls that wait for release, and starts one.
	start := func(t *testing.T) (u *httpup.Upstream, result chan error, release chan struct{}) {
		entered := make(chan struct{})
		release = make(chan struct{})
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			io.WriteString(w, "done")
		})
		u = open(t, srv.URL, nil)
		result = make(chan error, 1)
		go func() {
			resp, err := call(t, u, tether.HTTPRequest{Path: "/"})
			if err == nil && string(resp.Body) != "done" {
				err = errors.New("body " + string(resp.Body))
			}
			result <- err
		}()
		<-entered
		return u, result, release
	}

	t.Run("WaitsForCalls", func(t *testing.T) {
		u, result, release := start(t)
		closed := make(chan error, 1)
		go func() { closed <- u.Close(context.Background()) }()
		// Close has begun once Open refuses (nothing else shows it): poll
		// that, with a deadline.
		for deadline := time.Now().Add(5 * time.Second); u.Open(context.Background()) == nil; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("Close did not begin")
			}
		}
		// What is under test is that Close does not return while the call
		// is in flight: a window in which it must not, not a wait.
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a call was in flight", err)
		case <-time.After(50 * time.Millisecond):
		}
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		if te := wantCode(t, err, tether.CodeUnavailable); !te.Retry || !errors.Is(err, tether.ErrClosed) {
			t.Errorf("a call after Close: want retryable ErrClosed: %v", te)
		}
		close(release)
		if err := <-result; err != nil {
			t.Fatalf("the call in flight failed: %v", err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if s := u.Stats(); s.Open != 0 {
			t.Fatalf("after Close %+v, want no connection open", s)
		}
	})
	t.Run("DeadlinePassed", func(t *testing.T) {
		u, result, release := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := u.Close(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 calls") {
			t.Fatalf("Close with a call in flight past its deadline returned %v", err)
		}
		close(release)
		if err := <-result; err != nil {
			t.Fatalf("the call in flight failed: %v", err)
		}
		// The connection is closed once the call has returned it, which the
		// call's caller may see a moment before; nothing signals that
		// close, so this polls the count, with a deadline.
		s := u.Stats()
		for deadline := time.Now().Add(2 * time.Second); s.Open != 0 && time.Now().Before(deadline); s = u.Stats() {
			time.Sleep(5 * time.Millisecond)
		}
		if s.Open != 0 {
			t.Fatalf("a call that outlived Close left %+v, want its connection closed", s)
		}
	})
}

// TestUpstream_NoOpenProxy: a request can reach nothing but its upstream's
// base URL. Every refused request is refused before anything is sent, to
// either server.
func TestUpstream_NoOpenProxy(t *testing.T) {
	good, goodCounts := serve(t, func(w http.ResponseWriter, r *http.Request) {})
	evil, evilCounts := serve(t, func(w http.ResponseWriter, r *http.Request) {})
	evilHost := evil.Listener.Addr().String()
	u := open(t, good.URL+"/api", nil)

	bad := map[string]tether.HTTPRequest{
		"AbsoluteURL":       {Path: "http://" + evilHost + "/"},
		"AbsoluteHTTPS":     {Path: "https://evil.example/"},
		"SchemeRelative":    {Path: "//" + evilHost + "/x"},
		"UserInfo":          {Path: "@" + evilHost},
		"NoSlash":           {Path: "x"},
		"Empty":             {Path: ""},
		"CRLF":              {Path: "/x\r\nHost: " + evilHost},
		"LF":                {Path: "/x\nHost: evil"},
		"NUL":               {Path: "/x\x00"},
		"Space":             {Path: "/x HTTP/1.1\r\n"},
		"Fragment":          {Path: "/x#frag"},
		"Backslash":         {Path: "/\\" + evilHost},
		"NonASCII":          {Path: "/caf\xc3\xa9"},
		"BadEscape":         {Path: "/x%zz"},
		"ShortEscape":       {Path: "/x%2"},
		"DotDot":            {Path: "/../admin"},
		"DotDotEnd":         {Path: "/a/.."},
		"EscapedDotDot":     {Path: "/a/%2e%2E/b"},
		"Dot":               {Path: "/./x?q"},
		"HostHeader":        {Path: "/", Header: map[string]string{"Host": evilHost}},
		"HostHeaderLower":   {Path: "/", Header: map[string]string{"host": evilHost}},
		"Connection":        {Path: "/", Header: map[string]string{"Connection": "close"}},
		"KeepAlive":         {Path: "/", Header: map[string]string{"keep-alive": "timeout=5"}},
		"TransferEncoding":  {Path: "/", Header: map[string]string{"Transfer-Encoding": "chunked"}},
		"ContentLength":     {Path: "/", Header: map[string]string{"Content-Length": "0"}},
		"ProxyAuth":         {Path: "/", Header: map[string]string{"Proxy-Authorization": "Basic eA=="}},
		"TE":                {Path: "/", Header: map[string]string{"TE": "trailers"}},
		"Trailer":           {Path: "/", Header: map[string]string{"Trailer": "X"}},
		"Upgrade":           {Path: "/", Header: map[string]string{"Upgrade": "h2c"}},
		"HeaderCRLF":        {Path: "/", Header: map[string]string{"X-A": "a\r\nHost: " + evilHost}},
		"HeaderNameSpace":   {Path: "/", Header: map[string]string{"X A": "1"}},
		"HeaderNameColon":   {Path: "/", Header: map[string]string{"Host:": "evil"}},
		"HeaderNameEmpty":   {Path: "/", Header: map[string]string{"": "1"}},
		"HeaderTwice":       {Path: "/", Header: map[string]string{"X-A": "1", "x-a": "2"}},
		"MethodWithSpace":   {Method: "GET http://evil/", Path: "/"},
		"MethodWithNewline": {Method: "GET\n", Path: "/"},
		"MethodConnect":     {Method: "CONNECT", Path: "/"},
	}
	for name, r := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := call(t, u, r)
			te := wantCode(t, err, tether.CodeBadRequest)
			if te.Retry {
				t.Errorf("a bad request marked retryable: %v", te)
			}
		})
	}
	if g, e := goodCounts.requests.Load()+goodCounts.conns.Load(), evilCounts.requests.Load()+evilCounts.conns.Load(); g != 0 || e != 0 {
		t.Fatalf("refused requests reached a server: upstream %d, other %d (requests + connections)", g, e)
	}
	// The counters work: a good request is counted.
	mustCall(t, u, tether.HTTPRequest{Path: "/ok/.well-known/x..y?a=../b"})
	if goodCounts.requests.Load() != 1 || evilCounts.requests.Load() != 0 {
		t.Fatalf("a good request: upstream %d, other %d, want 1 and 0", goodCounts.requests.Load(), evilCounts.requests.Load())
	}
}

func TestUpstream_TLS(t *testing.T) {
	handler := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			w.Header().Set("X-Client", r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		io.WriteString(w, "secure")
	}
	srv, _ := unstarted(handler)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := writePEM(t, dir, "ca.pem", "CERTIFICATE", srv.Certificate().Raw)

	t.Run("CAFile", func(t *testing.T) {
		u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).TLSCAFile = ca })
		resp := mustCall(t, u, tether.HTTPRequest{Path: "/"})
		if resp.Status != 200 || string(resp.Body) != "secure" || resp.Header["x-proto"][0] != "HTTP/1.1" {
			t.Fatalf("got %d %q %v", resp.Status, resp.Body, resp.Header)
		}
	})
	t.Run("Untrusted", func(t *testing.T) {
		u := open(t, srv.URL, nil)
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		te := wantCode(t, err, tether.CodeUnavailable)
		if !errors.Is(err, httpup.ErrTLS) || !strings.Contains(te.Message, "certificate") {
			t.Fatalf("want ErrTLS and the reason in the message: %v", te)
		}
	})
	t.Run("WrongServerName", func(t *testing.T) {
		u := open(t, srv.URL, func(c *tether.BackendConfig) {
			httpOpts(c).TLSCAFile = ca
			httpOpts(c).TLSServerName = "not-in-the-certificate.example"
		})
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		wantCode(t, err, tether.CodeUnavailable)
		if !errors.Is(err, httpup.ErrTLS) {
			t.Fatalf("want ErrTLS: %v", err)
		}
	})
	t.Run("SkipVerify", func(t *testing.T) {
		u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).TLSSkipVerify = true })
		mustCall(t, u, tether.HTTPRequest{Path: "/"})
	})
	t.Run("NotTLS", func(t *testing.T) {
		plain, _ := serve(t, handler)
		u := open(t, "https://"+plain.Listener.Addr().String(), nil)
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		wantCode(t, err, tether.CodeUnavailable)
		if !errors.Is(err, httpup.ErrTLS) {
			t.Fatalf("https to a plain HTTP server: want ErrTLS: %v", err)
		}
	})
	t.Run("HTTP2", func(t *testing.T) {
		srv, _ := unstarted(handler)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		ca := writePEM(t, t.TempDir(), "ca.pem", "CERTIFICATE", srv.Certificate().Raw)
		u := open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).TLSCAFile = ca })
		resp := mustCall(t, u, tether.HTTPRequest{Method: "POST", Path: "/h2", Body: []byte("x")})
		if p := resp.Header["x-proto"][0]; p != "HTTP/2.0" {
			t.Fatalf("protocol %s, want HTTP/2.0 over TLS", p)
		}
	})
	t.Run("ClientCert", func(t *testing.T) {
		certPEM, keyPEM, cert := clientCert(t, "php-frontend")
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		srv, _ := unstarted(handler)
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		dir := t.TempDir()
		ca := writePEM(t, dir, "ca.pem", "CERTIFICATE", srv.Certificate().Raw)
		crt, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
		os.WriteFile(crt, certPEM, 0o600)
		os.WriteFile(key, keyPEM, 0o600)

		u := open(t, srv.URL, func(c *tether.BackendConfig) {
			httpOpts(c).TLSCAFile, httpOpts(c).TLSCertFile, httpOpts(c).TLSKeyFile = ca, crt, key
		})
		resp := mustCall(t, u, tether.HTTPRequest{Path: "/"})
		if got := resp.Header["x-client"]; len(got) != 1 || got[0] != "php-frontend" {
			t.Fatalf("the server saw client certificate %q", got)
		}
		u = open(t, srv.URL, func(c *tether.BackendConfig) { httpOpts(c).TLSCAFile = ca })
		_, err := call(t, u, tether.HTTPRequest{Path: "/"})
		wantCode(t, err, tether.CodeUnavailable)
		if !errors.Is(err, httpup.ErrTLS) {
			t.Fatalf("no client certificate: want ErrTLS: %v", err)
		}
	})
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientCert returns a self-signed client certificate for cn, as PEM
// certificate and key, and parsed.
func clientCert(t *testing.T, cn string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), cert
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "empty.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	cases := map[string]struct {
		dsn   string
		tweak func(*httpup.Config)
		want  string
	}{
		"FTP":            {dsn: "ftp://h/", want: "http:// or https://"},
		"Relative":       {dsn: "/v1", want: "http:// or https://"},
		"NoHost":         {dsn: "http:///v1", want: "no host"},
		"UserInfo":       {dsn: "http://u:secret@h/", want: "user info"},
		"Query":          {dsn: "http://h/v1?key=1", want: "query"},
		"Fragment":       {dsn: "http://h/v1#x", want: "fragment"},
		"DoubleSlash":    {dsn: "http://h//v1", want: "//"},
		"TLSOnPlainHTTP": {dsn: "http://h/", tweak: func(c *httpup.Config) { c.TLSCAFile = notPEM }, want: "https"},
		"CertWithoutKey": {dsn: "https://h/", tweak: func(c *httpup.Config) { c.TLSCertFile = notPEM }, want: "go together"},
		"CANotPEM":       {dsn: "https://h/", tweak: func(c *httpup.Config) { c.TLSCAFile = notPEM }, want: "no PEM"},
		"CAMissing":      {dsn: "https://h/", tweak: func(c *httpup.Config) { c.TLSCAFile = filepath.Join(dir, "nope") }, want: "tls_ca_file"},
		"NegativeLimit":  {dsn: "http://h/", tweak: func(c *httpup.Config) { c.MaxResponseBytes = -1 }, want: "max_response_bytes"},
		"HopByHop": {dsn: "http://h/", want: "Connection",
			tweak: func(c *httpup.Config) { c.Headers = map[string]string{"Connection": "close"} }},
		"HeaderCRLF": {dsn: "http://h/", want: "control character",
			tweak: func(c *httpup.Config) { c.Headers = map[string]string{"X-A": "a\r\nb"} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tether.DefaultBackendConfig("http", tc.dsn)
			if tc.tweak != nil {
				tc.tweak(httpOpts(&cfg))
			}
			_, err := httpup.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
	for _, dsn := range []string{"http://127.0.0.1:8080", "https://api.example/v1/", "http://[::1]:80/a%20b"} {
		if _, err := httpup.New(tether.DefaultBackendConfig("http", dsn)); err != nil {
			t.Errorf("%s: %v", dsn, err)
		}
	}
}

// BenchmarkUpstream_Call measures one small POST over a kept-alive
// connection, with its allocations.
func BenchmarkUpstream_Call(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	cfg := tether.DefaultBackendConfig("http", srv.URL+"/v1")
	httpOpts(&cfg).Headers = map[string]string{"Authorization": "Bearer x"}
	u, err := httpup.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer u.Close(context.Background())
	req := tether.HTTPRequest{Method: "POST", Path: "/items?id=42", Header: map[string]string{"Accept": "application/json"}, Body: []byte(`{"a":1}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
