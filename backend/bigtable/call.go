package bigtable

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// call is one request's retry budget. The client library retries an
// idempotent RPC that fails with Unavailable until the request's deadline
// (30 s by default): right for a blip, wrong when Bigtable or the emulator is
// down, where PHP should hear "unavailable" in about connect_timeout. The
// gRPC interceptors below see every attempt; once the attempts of one
// request have failed with Unavailable for longer than the budget, they
// return an error the library does not retry, and the request fails
// unavailable. A success resets the clock.
type call struct {
	budget time.Duration

	mu        sync.Mutex
	downSince time.Time // start of the first of the current run of Unavailable attempts
	gaveUp    error     // the last Unavailable error, once the budget is spent
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// observe records the outcome of an attempt started at start and returns the
// error to hand to the client library.
func (c *call) observe(start time.Time, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if status.Code(err) != codes.Unavailable {
		if err == nil {
			c.downSince = time.Time{}
		}
		return err
	}
	if c.downSince.IsZero() {
		c.downSince = start
	}
	if time.Since(c.downSince) < c.budget {
		return err
	}
	c.gaveUp = err
	return errGaveUp
}

// unavailable returns the last Unavailable error once the budget is spent.
func (c *call) unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gaveUp
}

// errGaveUp carries no gRPC status, which is what stops the library's
// retries; the request's call holds the real error.
var errGaveUp = gaveUpError{}

type gaveUpError struct{}

func (gaveUpError) Error() string { return "bigtable unreachable: retry budget spent" }

func (b *Backend) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c := callFrom(ctx)
	if c == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	start := time.Now()
	return c.observe(start, invoker(ctx, method, req, reply, cc, opts...))
}

func (b *Backend) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c := callFrom(ctx)
	if c == nil {
		return streamer(ctx, desc, cc, method, opts...)
	}
	start := time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, c.observe(start, err)
	}
	return &observedStream{ClientStream: s, c: c, start: start}, nil
}

// observedStream reports a stream's failures (they surface in RecvMsg) to
// its call.
type observedStream struct {
	grpc.ClientStream
	c     *call
	start time.Time
}

func (s *observedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == io.EOF {
		return err
	}
	return s.c.observe(s.start, err)
}
