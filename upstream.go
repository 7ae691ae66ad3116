package tether

import (
	"context"
)

// Upstream is an HTTP service that tetherd calls on a PHP page's behalf,
// through a warm keep-alive pool (backend/http). Only configured upstreams
// can be reached: a request names the upstream and a path below its base URL,
// never a host, so tetherd is not an open proxy.
type Upstream interface {
	// Call sends r to the upstream and reads the whole response. Any status is
	// a response, not an error; errors are for requests that got no complete
	// response: unavailable (refused, no route: nothing was sent), timeout (the
	// deadline passed), too_large (the body is over the upstream's
	// max_response_bytes), backend_error (reset or broken mid-response).
	Call(ctx context.Context, r HTTPRequest) (*HTTPResponse, error)
}

// HTTPRequest is one request to an upstream.
type HTTPRequest struct {
	Method string            // GET when empty
	Path   string            // path and query below the upstream's base URL; must start with "/"
	Header map[string]string // added to the upstream's default headers; hop-by-hop headers and Host are refused
	Body   []byte
}

// HTTPResponse is an upstream's complete response.
type HTTPResponse struct {
	Status int
	Header map[string][]string // lower-case names
	Body   []byte
}
