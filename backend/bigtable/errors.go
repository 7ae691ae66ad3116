package bigtable

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tether "github.com/tether-php/tether"
)

// classify turns the failure of operation op on table into a *tether.Error.
// retrySafe says whether running op again cannot apply it twice; it sets
// Retry on the transient codes. The backend code is the gRPC code's name
// ("NotFound", "InvalidArgument", ...).
func classify(ctx context.Context, c *call, op, table string, retrySafe bool, err error) error {
	if err == nil {
		return nil
	}
	if last := c.unavailable(); last != nil {
		return &tether.Error{Code: tether.CodeUnavailable, Retry: retrySafe, BackendCode: codes.Unavailable.String(), Err: tether.ErrUnavailable,
			Message: fmt.Sprintf("bigtable %s: unreachable for %v: %s", op, c.budget, status.Convert(last).Message())}
	}
	if ctx.Err() != nil {
		// The server reports its own deadline as a timeout; keep the cause.
		return &tether.Error{Code: tether.CodeTimeout, Message: fmt.Sprintf("bigtable %s: %v", op, ctx.Err()), Err: ctx.Err()}
	}
	s, ok := status.FromError(err)
	if !ok {
		return &tether.Error{Code: tether.CodeBackendError, Message: fmt.Sprintf("bigtable %s: %v", op, err), Err: err}
	}
	code, msg := s.Code(), s.Message()
	e := &tether.Error{Code: tether.CodeBackendError, BackendCode: code.String(), Err: err,
		Message: fmt.Sprintf("bigtable %s: %s", op, msg)}
	switch code {
	case codes.Unavailable:
		e.Code, e.Retry, e.Err = tether.CodeUnavailable, retrySafe, tether.ErrUnavailable
	case codes.DeadlineExceeded:
		e.Code, e.Retry = tether.CodeTimeout, retrySafe
	case codes.Aborted:
		e.Retry = retrySafe
	case codes.ResourceExhausted:
		if strings.Contains(msg, "larger than max") {
			e.Code = tether.CodeTooLarge
		} else {
			e.Retry = retrySafe // quota: back off and retry
		}
	case codes.NotFound:
		if strings.Contains(strings.ToLower(msg), "table") {
			e.Code = tether.CodeUnknownTable
			e.Message = fmt.Sprintf("bigtable %s: no table %q (%s)", op, table, msg)
		}
	}
	return e
}

// badRequest returns a bad_request error.
func badRequest(format string, args ...any) error {
	return tether.Errorf(tether.CodeBadRequest, format, args...)
}

// tooLarge returns a too_large error.
func tooLarge(format string, args ...any) error {
	return tether.Errorf(tether.CodeTooLarge, format, args...)
}
