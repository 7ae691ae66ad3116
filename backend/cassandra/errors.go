package cassandra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	tether "github.com/tether-php/tether"
)

// Errors of this package, beside the driver's.
var (
	// ErrCursor is a cursor that is not from the statement it is used with.
	ErrCursor = errors.New("cursor does not belong to this statement")
	// ErrNotOpen is a request to a backend that is not open, or closed.
	ErrNotOpen = errors.New("cassandra backend is not open")
)

// classify maps an error of the driver or of Cassandra to a typed error. ctx
// is the request's. read is true for statements that change nothing, which
// are safe to retry after a timeout or a lost connection; a write may have
// been applied.
//
// BackendCode is Cassandra's error code in decimal (8704 is 0x2200, invalid
// request; 8192 is 0x2000, syntax error).
func classify(ctx context.Context, err error, read bool) error {
	if err == nil {
		return nil
	}
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	e := &tether.Error{Code: tether.CodeBackendError, Message: "cassandra: " + err.Error(), Err: err}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			return err // the request's own deadline or cancellation
		}
		// The driver runs some requests (PREPARE) under the connection's own
		// context, which ends when the connection closes.
		e.Code, e.Retry, e.Err = tether.CodeUnavailable, read, fmt.Errorf("%w: connection closed: %w", tether.ErrUnavailable, err)
		e.Message = "cassandra: connection closed under the request"
		return e
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		e.BackendCode = strconv.Itoa(re.Code())
		e.Message = re.Message()
		switch re.Code() {
		case gocql.ErrCodeUnavailable:
			// The coordinator refused before doing anything: always safe to retry.
			e.Code, e.Retry, e.Err = tether.CodeUnavailable, true, fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
		case gocql.ErrCodeBootstrapping:
			e.Code, e.Retry, e.Err = tether.CodeUnavailable, true, fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
		case gocql.ErrCodeOverloaded:
			e.Code, e.Retry, e.Err = tether.CodeBusy, true, fmt.Errorf("%w: %w", tether.ErrBusy, err)
		case gocql.ErrCodeReadTimeout:
			e.Code, e.Retry = tether.CodeTimeout, true
		case gocql.ErrCodeWriteTimeout, gocql.ErrCodeCASWriteUnknown:
			e.Code, e.Retry = tether.CodeTimeout, false
		case gocql.ErrCodeReadFailure:
			e.Retry = true
		case gocql.ErrCodeCredentials:
			e.Code, e.Err = tether.CodeUnavailable, fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
			e.Message = "cassandra: authentication failed: " + re.Message()
		case gocql.ErrCodeInvalid:
			if tooLarge(re.Message()) {
				e.Code = tether.CodeTooLarge
			}
		}
		return e
	}
	var me gocql.MarshalError
	var ue gocql.UnmarshalError
	switch {
	case badCredentials(err):
		// At connect, the driver reports Cassandra's refusal as text only.
		e.Code, e.BackendCode, e.Err = tether.CodeUnavailable, strconv.Itoa(gocql.ErrCodeCredentials), fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
	case errors.As(err, &me):
		e.Code = tether.CodeBadRequest
	case errors.As(err, &ue):
		e.Code = tether.CodeInternal
	case errors.Is(err, gocql.ErrUseStmt):
		e.Code, e.Message = tether.CodeBadRequest, "cassandra: USE is not allowed: name the keyspace in the table (ks.table) or in the DSN"
	case errors.Is(err, gocql.ErrQueryArgLength), isArgCount(err):
		e.Code = tether.CodeBadRequest
	case errors.Is(err, gocql.ErrFrameTooBig):
		e.Code = tether.CodeTooLarge
	case errors.Is(err, gocql.ErrNoStreams):
		e.Code, e.Retry, e.Err = tether.CodeBusy, true, fmt.Errorf("%w: %w", tether.ErrBusy, err)
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		e.Code, e.Retry = tether.CodeTimeout, read
	case errors.Is(err, gocql.ErrNoConnections), errors.Is(err, gocql.ErrNoConnectionsStarted),
		errors.Is(err, gocql.ErrNoHosts), errors.Is(err, gocql.ErrHostQueryFailed):
		// Nothing was sent.
		e.Code, e.Retry, e.Err = tether.CodeUnavailable, true, fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
	case errors.Is(err, gocql.ErrSessionClosed):
		e.Code, e.Err = tether.CodeUnavailable, fmt.Errorf("%w: %w", tether.ErrClosed, err)
	case errors.Is(err, gocql.ErrConnectionClosed), errors.Is(err, gocql.ErrTooManyTimeouts), isNetError(err):
		e.Code, e.Retry, e.Err = tether.CodeUnavailable, read, fmt.Errorf("%w: %w", tether.ErrUnavailable, err)
	}
	return e
}

// tooLarge recognises Cassandra's refusal of a request over its size limits:
// native_transport_max_message_size ("CQL Message of size N bytes exceeds
// allowed maximum of M bytes") and max_mutation_size ("Rejected an oversized
// mutation", "... is too large").
func tooLarge(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "exceeds allowed maximum") || strings.Contains(m, "too large") || strings.Contains(m, "oversized")
}

// badCredentials recognises PasswordAuthenticator's refusal ("Provided
// username u and/or password are incorrect").
func badCredentials(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Provided username") && strings.Contains(s, "password are incorrect")
}

// isArgCount recognises the driver's unexported "expected N values" error.
func isArgCount(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "gocql: expected ") && strings.Contains(s, " values send got ")
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// badRequest returns a bad_request error.
func badRequest(format string, args ...any) *tether.Error {
	return tether.Errorf(tether.CodeBadRequest, "cassandra: "+format, args...)
}
