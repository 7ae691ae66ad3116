// Package httpup is the HTTP upstream backend (type "http"): an HTTP service
// that tetherd calls on a PHP page's behalf over a warm keep-alive pool, so
// the page pays neither TCP nor TLS setup, only one local round trip.
//
// One Upstream is one configured base URL behind one net/http Transport:
// at most max_conns connections, idle ones kept idle_timeout, HTTP/2 offered
// over TLS, no proxy from the environment and no redirects followed (a 3xx
// is a response like any other). Only the configured upstream can be
// reached: a request gives a method, a path below the base URL, headers and
// a body, never a host (see Upstream.Call for what is refused). It
// implements tether.Backend and tether.Upstream; docs/operations.md has the
// config and the error mapping.
package httpup

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
)

// Limits and defaults.
const (
	DefaultMaxResponseBytes = 8 << 20   // a body limit for max_response_bytes = 0
	MaxHeaderBytes          = 256 << 10 // response headers, all together; more is too_large
)

// Upstream is one configured HTTP upstream and its keep-alive pool. It
// implements tether.Backend and tether.Upstream.
type Upstream struct {
	scheme, host string
	prefix       string      // the base URL's escaped path, no trailing "/"
	hostHeader   string      // the Host header sent: configured, or the base URL's host
	defaults     http.Header // default headers; shared by every request, read-only
	where        string      // "http upstream URL", for messages
	maxBody      int
	maxConns     int
	acquireWait  time.Duration
	timeout      time.Duration // http.timeout: bounds every call; 0: only the request's deadline

	transport *http.Transport
	slots     chan struct{} // one per request in flight, max_conns of them
	open      atomic.Int64  // connections open
	waits     atomic.Int64  // requests that found every slot taken

	mu     sync.RWMutex // orders Close's closed.Store before calls.Wait against begin's calls.Add
	closed atomic.Bool
	calls  sync.WaitGroup
}

// New returns an upstream for cfg: cfg.DSN is the base URL (http or https,
// no user info, query or fragment), max_conns bounds both the connections
// and the requests in flight, acquire_timeout how long a request waits for
// one of those, connect_timeout the dial and the TLS handshake, idle_timeout
// how long an idle connection is kept (0: until the upstream closes it);
// cfg.Options (a *Config, see ConfigOf) has the rest. New checks them all and reads the TLS files, but
// connects nothing.
func New(cfg tether.BackendConfig) (*Upstream, error) {
	base, err := parseBase(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("http upstream: %w", err)
	}
	h, err := ConfigOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("http upstream %s: %w", cfg.DSN, err)
	}
	if h.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("http upstream %s: http.max_response_bytes = %d: must not be negative", cfg.DSN, h.MaxResponseBytes)
	}
	maxBody := h.MaxResponseBytes
	if maxBody == 0 {
		maxBody = DefaultMaxResponseBytes
	}
	defaults, hostHeader, err := defaultHeaders(h.Headers)
	if err != nil {
		return nil, fmt.Errorf("http upstream %s: %w", cfg.DSN, err)
	}
	if hostHeader == "" {
		hostHeader = base.host
	}
	var tc *tls.Config
	if base.scheme == "https" {
		if tc, err = tlsConfig(h); err != nil {
			return nil, fmt.Errorf("http upstream %s: %w", cfg.DSN, err)
		}
	} else if hasTLS(h) {
		return nil, fmt.Errorf("http upstream %s: tls_* settings need an https dsn", cfg.DSN)
	}
	maxConns := max(cfg.MaxConns, 1)
	connect := time.Duration(cfg.ConnectTimeout)
	if connect <= 0 {
		connect = 2 * time.Second
	}
	acquire := time.Duration(cfg.AcquireTimeout)
	if acquire <= 0 {
		acquire = time.Second
	}
	u := &Upstream{
		scheme: base.scheme, host: base.host, prefix: base.prefix,
		hostHeader: hostHeader, defaults: defaults,
		where:   "http upstream " + base.scheme + "://" + base.host + base.prefix,
		maxBody: maxBody, maxConns: maxConns, acquireWait: acquire, timeout: time.Duration(h.Timeout),
		slots: make(chan struct{}, maxConns),
	}
	u.transport = newTransport(base.scheme, tc, maxConns, connect, time.Duration(cfg.IdleTimeout), h.DisableKeepAlive, &u.open)
	return u, nil
}

// Open implements tether.Backend. It connects nothing and does not fail when
// the upstream is down: an HTTP upstream may start after tetherd, and a call
// to one that is down answers unavailable. Connections are opened by the
// first calls and then kept alive (min_conns is not dialled ahead: net/http's
// pool is filled only by requests, and tetherd sends none of its own). It
// returns an error only after Close.
func (u *Upstream) Open(ctx context.Context) error {
	if u.closed.Load() {
		return fmt.Errorf("open %s: %w", u.where, tether.ErrClosed)
	}
	return nil
}

// Stats implements tether.Backend: Open is the connections open (idle or
// busy), InUse the calls in flight, Idle the open connections beyond those
// (with HTTP/2 one connection may carry several calls), Waiting how many
// calls had to wait because max_conns were in flight.
func (u *Upstream) Stats() tether.PoolStats {
	open, inUse := int(u.open.Load()), len(u.slots)
	return tether.PoolStats{Open: open, InUse: inUse, Idle: max(open-inUse, 0), Waiting: u.waits.Load()}
}

// Close implements tether.Backend: new calls get unavailable, the calls in
// flight may finish until ctx is done, then the idle connections are closed.
// Calls still running when ctx ends keep their connections until they end,
// and close them then; Close returns an error saying how many there were.
// Safe to call twice.
func (u *Upstream) Close(ctx context.Context) error {
	u.mu.Lock()
	u.closed.Store(true)
	u.mu.Unlock()
	done := make(chan struct{})
	go func() { u.calls.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("close %s: %d calls still running: %w", u.where, len(u.slots), ctx.Err())
	}
	u.transport.CloseIdleConnections()
	return err
}

// Call implements tether.Upstream: it sends r to the upstream and reads the
// whole response. Any status, 3xx (never followed), 4xx and 5xx included, is
// a response. Errors are *tether.Error values:
//
//   - bad_request, before anything is sent: a method that is not a token (or
//     CONNECT); a path that does not start with "/", starts with "//", holds
//     a control character, space, non-ASCII byte, '#' or '\', a bad %-escape
//     or a "." or ".." segment; a header name that is not a token, a value
//     with a control character, a Host, Content-Length or hop-by-hop header
//     (Connection, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
//     Upgrade), or one name given twice.
//   - busy (Retry): max_conns calls were in flight for all of acquire_timeout.
//   - unavailable (Retry: nothing reached the upstream): the connection was
//     refused, the host unreachable or unknown, the dial or the TLS handshake
//     failed or timed out (the message gives the TLS reason), or the upstream
//     is closed.
//   - timeout: ctx ended first; the upstream may have acted on the request.
//   - too_large: the body (or the headers) is over max_response_bytes
//     (MaxHeaderBytes); the connection is dropped, not read to its end.
//   - backend_error: the connection was reset or closed, or the upstream
//     sent something other than HTTP, before a complete response.
//
// r.Body may still be read by the transport for a moment after Call returns
// (when the upstream answered before reading it all): do not modify it.
func (u *Upstream) Call(ctx context.Context, r tether.HTTPRequest) (*tether.HTTPResponse, error) {
	if u.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.timeout)
		defer cancel()
	}
	req, err := u.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := u.begin(); err != nil {
		return nil, err
	}
	defer u.end()
	if err := u.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-u.slots }()

	resp, err := u.transport.RoundTrip(req)
	if err != nil {
		return nil, u.classify(ctx, err, false)
	}
	if resp.Body != http.NoBody && resp.ContentLength > int64(u.maxBody) {
		resp.Body.Close() // drops the connection: the body is not read
		return nil, u.tooLarge(fmt.Sprintf("a body of %d bytes", resp.ContentLength))
	}
	body, err := readBody(resp.Body, resp.ContentLength, u.maxBody)
	resp.Body.Close()
	if err == errBodyTooLarge {
		return nil, u.tooLarge("the body")
	}
	if err != nil {
		return nil, u.classify(ctx, err, true)
	}
	return &tether.HTTPResponse{Status: resp.StatusCode, Header: lowerHeader(resp.Header), Body: body}, nil
}

func (u *Upstream) tooLarge(what string) error {
	return &tether.Error{Code: tether.CodeTooLarge, Err: ErrTooLarge,
		Message: fmt.Sprintf("%s: %s is over max_response_bytes (%d)", u.where, what, u.maxBody)}
}

// begin counts a call in, unless the upstream is closed.
func (u *Upstream) begin() error {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if u.closed.Load() {
		return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: fmt.Errorf("%w: %w", tether.ErrUnavailable, tether.ErrClosed),
			Message: u.where + " is closed"}
	}
	u.calls.Add(1)
	return nil
}

// end counts a call out. A call that outlived Close's deadline closes the
// connection it returned to the pool, which nobody will use again.
func (u *Upstream) end() {
	u.calls.Done()
	if u.closed.Load() {
		u.transport.CloseIdleConnections()
	}
}

// acquire takes one of max_conns slots, waiting at most acquire_timeout and
// never past ctx: busy, or timeout when ctx ended first.
func (u *Upstream) acquire(ctx context.Context) error {
	select {
	case u.slots <- struct{}{}:
		return nil
	default:
	}
	u.waits.Add(1)
	t := time.NewTimer(u.acquireWait)
	defer t.Stop()
	select {
	case u.slots <- struct{}{}:
		return nil
	case <-t.C:
		return &tether.Error{Code: tether.CodeBusy, Retry: true, Err: tether.ErrBusy,
			Message: fmt.Sprintf("%s: %d calls in flight for %v (max_conns, acquire_timeout)", u.where, u.maxConns, u.acquireWait)}
	case <-ctx.Done():
		return u.classify(ctx, ctx.Err(), false)
	}
}

var (
	_ tether.Backend  = (*Upstream)(nil)
	_ tether.Upstream = (*Upstream)(nil)
)
