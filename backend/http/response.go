package httpup

import (
	"errors"
	"io"
	"net/http"
	"strings"
)

// errBodyTooLarge is readBody's signal that the body is over its limit.
var errBodyTooLarge = errors.New("body over limit")

// initialBodyBuf is the first buffer for a body of unknown length.
const initialBodyBuf = 2048

// readBody reads r to its end into one buffer and returns it, or
// errBodyTooLarge as soon as more than limit bytes came. size is the declared
// length (-1: unknown); when known, the buffer is allocated once, with one
// spare byte so that the read that finds the end needs no growth.
func readBody(r io.Reader, size int64, limit int) ([]byte, error) {
	n := initialBodyBuf
	if size >= 0 && size <= int64(limit) {
		n = int(size) + 1
	}
	buf := make([]byte, 0, min(n, limit+1))
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), limit+1))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if len(buf) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// lowerHeader returns h with lower-case names. The value slices are h's own.
func lowerHeader(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[lowerName(k)] = v
	}
	return out
}

// lowerName returns k in lower case, without allocating for common names.
func lowerName(k string) string {
	if s, ok := commonLower[k]; ok {
		return s
	}
	return strings.ToLower(k)
}

var commonLower = func() map[string]string {
	names := []string{
		"Accept-Ranges", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Age", "Alt-Svc", "Cache-Control", "Connection", "Content-Disposition", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Location", "Content-Range", "Content-Security-Policy",
		"Content-Type", "Date", "Etag", "Expires", "Keep-Alive", "Last-Modified", "Link", "Location",
		"Pragma", "Referrer-Policy", "Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security",
		"Trailer", "Transfer-Encoding", "Vary", "Via", "Www-Authenticate", "X-Content-Type-Options",
		"X-Frame-Options", "X-Powered-By", "X-Request-Id", "X-Xss-Protection",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = strings.ToLower(n)
	}
	return m
}()
