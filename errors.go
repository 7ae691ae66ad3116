package tether

import (
	"context"
	"errors"
	"fmt"
)

// Code is the stable, machine-readable kind of an error as it crosses the wire.
// The set is part of the protocol (docs/protocol.md): codes are added, never renamed.
type Code string

// The error codes of protocol v1.
const (
	CodeBadFrame       Code = "bad_frame"
	CodeTooLarge       Code = "too_large"
	CodeBadRequest     Code = "bad_request"
	CodeUnknownOp      Code = "unknown_op"
	CodeUnknownBackend Code = "unknown_backend"
	CodeUnknownTx      Code = "unknown_tx"
	CodeUnknownTable   Code = "unknown_table"
	CodeUnauthorized   Code = "unauthorized"
	CodeBackendError   Code = "backend_error"
	CodeUnavailable    Code = "unavailable"
	CodeBusy           Code = "busy"
	CodeTimeout        Code = "timeout"
	CodeTxAborted      Code = "tx_aborted"
	CodeUnsupported    Code = "unsupported"
	CodeInternal       Code = "internal"
)

// Sentinel errors of the domain. Backends wrap them so that the server can map
// any error to a Code with errors.Is.
var (
	ErrBusy        = errors.New("no pooled connection came free in time")
	ErrUnavailable = errors.New("backend unavailable")
	ErrTxAborted   = errors.New("transaction aborted by the server")
	ErrTxDone      = errors.New("transaction already finished")
	ErrClosed      = errors.New("closed")
	// ErrPanic: serving the request panicked; tetherd recovered, logged the
	// stack and answered internal (panics.go).
	ErrPanic = errors.New("panic recovered")
)

// Error is an error that carries its wire form: a stable Code, a message, whether
// retrying the same request is safe, and for backend errors the backend's own code.
type Error struct {
	Code        Code
	Message     string
	Retry       bool
	BackendCode string // MySQL error number, PostgreSQL SQLSTATE, SQLite extended code
	Err         error  // the underlying error, if any; not sent on the wire
}

// Error implements error.
func (e *Error) Error() string {
	if e.BackendCode != "" {
		return fmt.Sprintf("%s [%s]: %s", e.Code, e.BackendCode, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code, not retryable.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError maps any error to an *Error for the wire. An *Error in the chain is
// returned as is; context and sentinel errors get their codes; anything else is
// CodeInternal, because a backend is expected to classify its own errors.
func AsError(err error) *Error {
	var te *Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: "deadline exceeded", Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeTimeout, Message: "request canceled", Err: err}
	case errors.Is(err, ErrBusy):
		return &Error{Code: CodeBusy, Message: err.Error(), Retry: true, Err: err}
	case errors.Is(err, ErrUnavailable):
		return &Error{Code: CodeUnavailable, Message: err.Error(), Retry: true, Err: err}
	case errors.Is(err, ErrTxAborted):
		return &Error{Code: CodeTxAborted, Message: err.Error(), Retry: true, Err: err}
	default:
		return &Error{Code: CodeInternal, Message: err.Error(), Err: err}
	}
}
