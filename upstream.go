package tether

import (
	"context"
)

// Upstream is an HTTP service that tetherd calls on a PHP page's behalf,
// through a warm keep-alive pool (backend/http). Only configured upstreams
// can be reached: a request names the upstream and a path below its base URL,
// never a host, so tetherd is not an open proxy.
type Upstream interface {
	// Call sends r to the upstream and reads the whole response. Any status
	// (3xx, never followed; 4xx; 5xx) is a response, not an error. Errors are
	// *Error values, for requests refused or that got no complete response:
	// bad_request (r could name another host or split the request; nothing
	// was sent), busy (max_conns calls in flight past acquire_timeout; retry),
	// unavailable (refused, no route, DNS, TLS handshake failed: nothing
	// reached the upstream; retry), timeout (ctx ended; the upstream may have
	// acted), too_large (the body is over the upstream's max_response_bytes;
	// the connection is dropped, not drained), backend_error (reset or
	// broken mid-response; not retryable). Call may be called concurrently;
	// the transport may still read r.Body briefly after it returns, so the
	// caller must not modify it.
	Call(ctx context.Context, r HTTPRequest) (*HTTPResponse, error)
}

// HTTPRequest is one request to an upstream.
type HTTPRequest struct {
	Method string            // GET when empty
	Path   string            // path and query below the upstream's base URL; must start with "/"
	Header map[string]string // over the upstream's default headers (same name: this wins); Host, Content-Length and hop-by-hop headers are refused
	Body   []byte
}

// HTTPResponse is an upstream's complete response.
type HTTPResponse struct {
	Status int
	Header map[string][]string // lower-case names, each name's values in the order received
	Body   []byte
}
