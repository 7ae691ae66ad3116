package httpup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	tether "github.com/tether-php/tether"
)

// Errors of the package, wrapped by the *tether.Error values Call returns.
var (
	ErrTooLarge = errors.New("response over max_response_bytes")
	ErrBroken   = errors.New("connection broke before a complete response")
	ErrTLS      = errors.New("tls handshake failed")
)

// classify turns a failed round trip (or, with inBody, a failed read of a
// response body) into a *tether.Error. The order matters: a passed deadline
// explains every failure that follows it.
//
//   - ctx done: timeout (the request may have been sent; not retryable).
//   - once the body is being read, anything else is backend_error: the
//     connection broke mid-response.
//   - TLS handshake failed (certificate not trusted, wrong name, the server
//     refused the client certificate, not TLS at all, handshake timeout):
//     unavailable, Retry true, with the TLS reason. The upstream never
//     processed the request, so a retry is safe; it succeeds only once the
//     certificates or the config are fixed.
//   - dial refused, unreachable, DNS, dial timeout: unavailable, Retry true
//     (no connection, so nothing was sent).
//   - response headers over the transport's limit: too_large.
//   - anything else (reset, EOF or garbage instead of a response):
//     backend_error, not retryable, because the upstream may have acted on
//     the request.
func (u *Upstream) classify(ctx context.Context, err error, inBody bool) error {
	if cerr := ctx.Err(); cerr != nil {
		what := "deadline exceeded"
		if errors.Is(cerr, context.Canceled) {
			what = "request canceled"
		}
		return &tether.Error{Code: tether.CodeTimeout, Err: err,
			Message: fmt.Sprintf("%s: %s", u.where, what)}
	}
	if inBody {
		return &tether.Error{Code: tether.CodeBackendError, Err: fmt.Errorf("%w: %w", ErrBroken, err),
			Message: fmt.Sprintf("%s: the response broke off: %v", u.where, err)}
	}
	if isTLSError(err) {
		return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: fmt.Errorf("%w: %w: %w", tether.ErrUnavailable, ErrTLS, err),
			Message: fmt.Sprintf("%s: TLS handshake: %v", u.where, err)}
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) {
		return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: fmt.Errorf("%w: %w", tether.ErrUnavailable, err),
			Message: fmt.Sprintf("%s: connect: %v", u.where, err)}
	}
	if strings.Contains(err.Error(), "server response headers exceeded") {
		return &tether.Error{Code: tether.CodeTooLarge, Err: fmt.Errorf("%w: %w", ErrTooLarge, err),
			Message: fmt.Sprintf("%s: response headers over %d bytes", u.where, MaxHeaderBytes)}
	}
	return &tether.Error{Code: tether.CodeBackendError, Err: fmt.Errorf("%w: %w", ErrBroken, err),
		Message: fmt.Sprintf("%s: no complete response: %v", u.where, err)}
}

// isTLSError reports whether err, from a round trip, comes from the TLS
// handshake. (A TLS 1.3 client finishes its side of the handshake before the
// server checks the client certificate, so the server's refusal arrives as
// an alert where the response should be: the request was never processed.)
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
		ne       net.Error
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &header), errors.As(err, &alert),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return true
	case errors.As(err, &op) && op.Op == "remote error":
		return true
	case errors.As(err, &ne) && ne.Timeout() && strings.Contains(err.Error(), "TLS handshake timeout"):
		return true
	}
	return strings.HasPrefix(err.Error(), "tls: ")
}

func badRequest(format string, args ...any) error {
	return tether.Errorf(tether.CodeBadRequest, format, args...)
}
