package httpup

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
)

// baseURL is an upstream's parsed base URL.
type baseURL struct {
	scheme, host string
	prefix       string // the escaped path without its trailing "/"; "" for the root
}

// parseBase checks dsn, the upstream's base URL: http or https, a host, no
// user info, query or fragment.
func parseBase(dsn string) (baseURL, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return baseURL{}, fmt.Errorf("dsn %q: %w", dsn, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return baseURL{}, fmt.Errorf("dsn %q: want an http:// or https:// base URL", dsn)
	case u.Host == "" || u.Opaque != "":
		return baseURL{}, fmt.Errorf("dsn %q: no host", dsn)
	case u.User != nil:
		return baseURL{}, fmt.Errorf("dsn %q: user info is not allowed (set an Authorization header in [http] headers)", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return baseURL{}, fmt.Errorf("dsn %q: a query is not allowed", dsn)
	case u.Fragment != "":
		return baseURL{}, fmt.Errorf("dsn %q: a fragment is not allowed", dsn)
	}
	prefix := strings.TrimRight(u.EscapedPath(), "/")
	if strings.HasPrefix(prefix, "//") {
		return baseURL{}, fmt.Errorf("dsn %q: the path must not start with //", dsn)
	}
	return baseURL{scheme: u.Scheme, host: u.Host, prefix: prefix}, nil
}

// defaultHeaders checks the configured headers and returns them with
// canonical names, plus the Host header's value, if one is set ("" if not).
// User-Agent is "tetherd" unless configured.
func defaultHeaders(in map[string]string) (http.Header, string, error) {
	h := make(http.Header, len(in)+1)
	host := ""
	for name, v := range in {
		if strings.EqualFold(name, "Host") && ctlIndex(v) < 0 {
			// A virtual host behind an address: config may set it, requests may not.
			host = v
			continue
		}
		k, problem := checkHeader(name, v)
		if problem != "" {
			return nil, "", fmt.Errorf("http.headers: %q: %s", name, problem)
		}
		if _, dup := h[k]; dup {
			return nil, "", fmt.Errorf("http.headers: %s given twice", k)
		}
		h[k] = []string{v}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{"tetherd"}
	}
	return h, host, nil
}

// tlsConfig builds the TLS settings of an https upstream, reading the CA and
// client certificate files.
func tlsConfig(c *Config) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.TLSSkipVerify,
	}
	if c.TLSCAFile != "" {
		roots, err := tether.LoadCertPool(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("http.tls_ca_file: %w", err)
		}
		tc.RootCAs = roots
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, fmt.Errorf("http.tls_cert_file and http.tls_key_file go together")
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("http.tls_cert_file %s, http.tls_key_file %s: %w", c.TLSCertFile, c.TLSKeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// hasTLS reports whether any TLS setting is given.
func hasTLS(c *Config) bool {
	return c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSServerName != "" || c.TLSSkipVerify
}

// newTransport returns the upstream's one transport: its keep-alive pool,
// bounded to maxConns connections, dialled directly (never through a proxy
// from the environment) within connectTimeout, with HTTP/2 offered over TLS.
// It asks for no compression, so bodies arrive as the upstream sent them and
// tetherd spends no CPU on gzip. It counts open connections in open.
func newTransport(scheme string, tc *tls.Config, maxConns int, connectTimeout, idleTimeout time.Duration, noKeepAlive bool, open *atomic.Int64) *http.Transport {
	d := &net.Dialer{Timeout: connectTimeout}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			open.Add(1)
			return &countedConn{Conn: c, open: open}, nil
		},
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    connectTimeout,
		ForceAttemptHTTP2:      scheme == "https",
		DisableKeepAlives:      noKeepAlive,
		DisableCompression:     true,
		MaxIdleConns:           maxConns,
		MaxIdleConnsPerHost:    maxConns,
		MaxConnsPerHost:        maxConns,
		IdleConnTimeout:        idleTimeout,
		MaxResponseHeaderBytes: MaxHeaderBytes,
	}
}

// countedConn is a connection that takes itself off the open count when
// closed.
type countedConn struct {
	net.Conn
	open   *atomic.Int64
	closed atomic.Bool
}

// Close implements net.Conn.
func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return c.Conn.Close()
}
