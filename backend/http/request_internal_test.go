package httpup

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	tether "github.com/tether-php/tether"
)

func TestCheckPath(t *testing.T) {
	good := map[string]int{ // path -> index of the query's "?"
		"/":                      -1,
		"/users/42":              -1,
		"/a%2Db/%41":             -1,
		"/q?path=%2Fetc%5C":      2,
		"/x?":                    2,
		"/?a=1":                  1,
		"/search?q=a/../b&c=%20": 7,
		"/.well-known/x":         -1,
		"/a..b/...":              -1,
		"/@user/~me:1;p=2,3":     -1,
		"/x?a=b?c":               2,
		"/q?{\"json\":[1]}":      2,
	}
	for p, want := range good {
		q, err := checkPath(p)
		if err != nil || q != want {
			t.Errorf("checkPath(%q) = %d, %v; want %d, nil", p, q, err, want)
		}
	}
	bad := []string{
		"", "x", "*", "http://evil/", "//evil", "@evil", "/a b", "/a\tb", "/a\r\n", "/\x7f", "/\x80", "/a#b",
		"/a\\b", "/%", "/%4", "/%4g", "/.", "/..", "/a/./b", "/a/../b", "/%2e", "/%2E%2e/x", "/.%2e?x", "/a/..?x",
		// What a fault campaign sent past the base path to a real nginx (tests/faults): encoded slashes and
		// backslashes, which nginx decodes before it resolves "..", ";parameters" after a dot segment, NUL.
		"/..%2fadmin", "/%2e%2e%2fadmin", "/..%2Fadmin", "/.%2e%2fadmin", "/x/..%2f..%2fadmin", "/ok/..;/admin",
		"/ok/..%3b/admin", "/ok/.;x/admin", "/a%2Fb", "/a%5cb", "/a%00b", "/q?x=%00", "/a%0ab",
	}
	for _, p := range bad {
		if _, err := checkPath(p); err == nil {
			t.Errorf("checkPath(%q) accepted", p)
		}
	}
}

func TestCheckHeader(t *testing.T) {
	if k, problem := checkHeader("x-request-id", "a\tb ü"); problem != "" || k != "X-Request-Id" {
		t.Fatalf("got %q, %q", k, problem)
	}
	for _, name := range []string{"host", "HOST", "content-length", "connection", "keep-alive", "te", "trailer",
		"transfer-encoding", "upgrade", "proxy-authorization", "Proxy-Connection"} {
		if _, problem := checkHeader(name, "x"); problem == "" {
			t.Errorf("header %s accepted", name)
		}
	}
	for _, v := range []string{"a\rb", "a\nb", "a\x00", "a\x7f"} {
		if _, problem := checkHeader("X-A", v); problem == "" {
			t.Errorf("value %q accepted", v)
		}
	}
}

func TestReadBody(t *testing.T) {
	const limit = 10000
	for _, n := range []int{0, 1, initialBodyBuf - 1, initialBodyBuf, initialBodyBuf + 1, limit} {
		body := bytes.Repeat([]byte{'b'}, n)
		for name, size := range map[string]int64{"Declared": int64(n), "Unknown": -1} {
			got, err := readBody(iotest.OneByteReader(bytes.NewReader(body)), size, limit)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%s %d bytes: got %d bytes, %v", name, n, len(got), err)
			}
			if size >= 0 && cap(got) != n+1 {
				t.Errorf("%s %d bytes: a buffer of %d, want one allocation of %d", name, n, cap(got), n+1)
			}
		}
	}
	if _, err := readBody(strings.NewReader(strings.Repeat("x", limit+1)), -1, limit); err != errBodyTooLarge {
		t.Fatalf("one byte over: %v", err)
	}
	// A body longer than declared is still bounded.
	if _, err := readBody(strings.NewReader(strings.Repeat("x", limit+1)), 5, limit); err != errBodyTooLarge {
		t.Fatalf("longer than declared: %v", err)
	}
	broken := errors.New("reset")
	r := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(broken))
	if _, err := readBody(r, -1, limit); err != broken {
		t.Fatalf("a broken body: %v", err)
	}
}

func TestLowerName(t *testing.T) {
	for in, want := range map[string]string{"Content-Type": "content-type", "X-Custom-Thing": "x-custom-thing", "already": "already"} {
		if got := lowerName(in); got != want {
			t.Errorf("lowerName(%q) = %q", in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { lowerName("Content-Type"); lowerName("lower") }); n != 0 {
		t.Errorf("lowerName allocates %v times for common or lower-case names", n)
	}
}

// TestNew_Transport: loopback upstreams are never proxied even by
// ProxyFromEnvironment, so only the transport itself can show that no proxy
// from the environment is used.
func TestNew_Transport(t *testing.T) {
	u, err := New(tether.BackendConfig{DSN: "https://api.example/v1/", MaxConns: 3, IdleTimeout: tether.Duration(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	tr := u.transport
	if tr.Proxy != nil {
		t.Error("the transport takes a proxy")
	}
	if tr.MaxConnsPerHost != 3 || tr.MaxIdleConnsPerHost != 3 || tr.IdleConnTimeout != time.Minute || !tr.ForceAttemptHTTP2 || !tr.DisableCompression {
		t.Errorf("transport %+v", tr)
	}
	if u.prefix != "/v1" || u.host != "api.example" || u.hostHeader != "api.example" {
		t.Errorf("base %q %q %q", u.prefix, u.host, u.hostHeader)
	}
}
