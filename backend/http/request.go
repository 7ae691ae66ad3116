package httpup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	tether "github.com/tether-php/tether"
)

// newRequest checks r and builds the request to send: the upstream's scheme
// and host, its base path followed by r.Path, r.Header over the default
// headers. It returns a bad_request error for anything that could take the
// request elsewhere or split it: see checkPath, checkMethod and
// checkHeader.
//
// The host never comes from the request: the URL is assembled from the
// parsed base URL and r.Path is only ever a path-and-query (URL.Opaque, sent
// as is on the request line), so no path can name another host or scheme.
func (u *Upstream) newRequest(ctx context.Context, r tether.HTTPRequest) (*http.Request, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	q, err := checkPath(r.Path)
	if err != nil {
		return nil, err
	}
	h, err := u.header(r.Header)
	if err != nil {
		return nil, err
	}

	// An empty URL parses to an empty *url.URL without work; filling it in
	// costs less than formatting a URL string for NewRequest to parse.
	req, err := http.NewRequestWithContext(ctx, method, "", nil)
	if err != nil {
		return nil, badRequest("http: %v", err)
	}
	p := r.Path
	if q >= 0 {
		p = r.Path[:q]
		req.URL.RawQuery = r.Path[q+1:]
		req.URL.ForceQuery = q == len(r.Path)-1
	}
	req.URL.Scheme, req.URL.Host = u.scheme, u.host
	if u.prefix == "" {
		req.URL.Opaque = p
	} else {
		req.URL.Opaque = u.prefix + p
	}
	req.Host = u.hostHeader
	req.Header = h
	if n := len(r.Body); n > 0 {
		body := r.Body
		req.ContentLength = int64(n)
		req.Body = newBody(body)
		// Lets the transport send the request again when a kept-alive
		// connection turns out closed before any byte of it was written.
		req.GetBody = func() (io.ReadCloser, error) { return newBody(body), nil }
	} else {
		req.Body = http.NoBody
	}
	return req, nil
}

// body is a request body: a bytes.Reader that is also an io.ReadCloser, in
// one allocation.
type body struct{ bytes.Reader }

func newBody(b []byte) *body {
	r := new(body)
	r.Reset(b)
	return r
}

// Close implements io.Closer.
func (*body) Close() error { return nil }

// header returns the request's header: the request's own headers, then the
// default headers whose names the request does not set. Default values are
// shared between requests, read-only.
func (u *Upstream) header(in map[string]string) (http.Header, error) {
	h := make(http.Header, len(in)+len(u.defaults))
	if len(in) > 0 {
		vals := make([]string, len(in)) // one allocation for every value slice
		i := 0
		for name, v := range in {
			k, problem := checkHeader(name, v)
			if problem != "" {
				return nil, badRequest("http: header %q: %s", name, problem)
			}
			if _, dup := h[k]; dup {
				return nil, badRequest("http: header %s given twice (names are case-insensitive)", k)
			}
			vals[i] = v
			h[k] = vals[i : i+1 : i+1]
			i++
		}
	}
	for k, v := range u.defaults {
		if _, set := h[k]; !set {
			h[k] = v
		}
	}
	return h, nil
}

// checkMethod refuses a method that is not an HTTP token, and CONNECT, which
// would turn the upstream connection into a tunnel.
func checkMethod(m string) error {
	if !validToken(m) || len(m) > 32 {
		return badRequest("http: method %q is not a valid HTTP method", m)
	}
	if m == http.MethodConnect {
		return badRequest("http: method CONNECT is not allowed")
	}
	return nil
}

// checkPath checks a request's path and query and returns the index of the
// "?" that starts the query, or -1. A valid path starts with "/" but not
// "//", holds only visible ASCII (0x21-0x7e) other than '#' and '\', has
// well-formed %XX escapes, none of which, before the query, decodes to '/',
// '\' or a control character (%00 is refused in the query too), and no "." or
// ".." segment once decoded, with or without ";parameters" after it: so it can
// neither name a host nor climb above the base path, however the upstream
// decodes and normalises it (nginx decodes %2f before it resolves "..", and
// some servers drop ";..." from a segment).
func checkPath(p string) (int, error) {
	if p == "" || p[0] != '/' {
		return -1, badRequest("http: path %q must start with /", p)
	}
	if len(p) > 1 && p[1] == '/' {
		return -1, badRequest("http: path %q must not start with //", p)
	}
	q := -1
	seg := 1 // start of the current path segment
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c <= 0x20 || c >= 0x7f:
			return -1, badRequest("http: path %q: byte 0x%02x at %d is not allowed (control, space or non-ASCII: percent-encode it)", p, c, i)
		case c == '#' || c == '\\':
			return -1, badRequest("http: path %q: %q at %d is not allowed", p, c, i)
		case c == '%':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return -1, badRequest("http: path %q: bad %%-escape at %d", p, i)
			}
			d := unhex(p[i+1])<<4 | unhex(p[i+2])
			if d == 0 || q < 0 && (d == '/' || d == '\\' || d < 0x20 || d == 0x7f) {
				return -1, badRequest("http: path %q: %s at %d decodes to %q, which is not allowed", p, p[i:i+3], i, d)
			}
		case q < 0 && (c == '/' || c == '?'):
			if i > 0 && isDotSegment(p[seg:i]) {
				return -1, badRequest("http: path %q: dot segment %q is not allowed", p, p[seg:i])
			}
			seg = i + 1
			if c == '?' {
				q = i
			}
		}
	}
	if q < 0 && isDotSegment(p[seg:]) {
		return -1, badRequest("http: path %q: dot segment %q is not allowed", p, p[seg:])
	}
	return q, nil
}

// isDotSegment reports whether s is "." or "..", each dot possibly written
// %2e, with or without ";parameters" after it.
func isDotSegment(s string) bool {
	dots := 0
	for len(s) > 0 && s[0] != ';' {
		switch {
		case s[0] == '.':
			s = s[1:]
		case len(s) >= 3 && s[0] == '%' && s[1] == '2' && (s[2] == 'e' || s[2] == 'E'):
			s = s[3:]
		case len(s) >= 3 && s[0] == '%' && s[1] == '3' && (s[2] == 'b' || s[2] == 'B'):
			s = ";" // an escaped ';' starts the parameters as well
		default:
			return false
		}
		if s != ";" {
			dots++
		}
	}
	return dots == 1 || dots == 2
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// checkHeader checks one request header and returns its canonical name, or
// why the header is refused: the name must be a token, the value free of
// control characters other than tab, and the name not one tetherd sets itself
// (Host, Content-Length) or a hop-by-hop header, which belongs to tetherd's
// connection, not the caller's.
func checkHeader(name, value string) (canonical, problem string) {
	if !validToken(name) {
		return "", "the name is not a valid token"
	}
	if i := ctlIndex(value); i >= 0 {
		return "", fmt.Sprintf("control character 0x%02x in the value", value[i])
	}
	k := textproto.CanonicalMIMEHeaderKey(name)
	if reserved(k) {
		return "", "not allowed (tetherd sets it, or it is hop-by-hop)"
	}
	return k, ""
}

// ctlIndex returns the index of the first control character other than tab
// in s, or -1.
func ctlIndex(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
}

// reserved reports whether a request may not set the header with canonical
// name k.
func reserved(k string) bool {
	switch k {
	case "Host", "Content-Length", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return strings.HasPrefix(k, "Proxy-")
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
