package mysql

import (
	"context"
	"crypto/x509"
)

// SetStaleHook makes the execute of every statement for which fn returns true
// answer ER_NEED_REPREPARE (the statement does not run), until restore is
// called.
func SetStaleHook(fn func(sql string) bool) (restore func()) {
	testHookStale.Store(&fn)
	return func() { testHookStale.Store(nil) }
}

// CutParams is cutParams: the DSN without tetherd's own parameters, and
// those.
var CutParams = cutParams

// DialOnce dials one server connection as the pool does and closes it,
// reporting whether it ran TLS and resumed a TLS session.
func DialOnce(ctx context.Context, b *Backend) (withTLS, resumed bool, err error) {
	c, err := b.d.dial(ctx)
	if err != nil {
		return false, false, err
	}
	defer c.Close()
	st, ok := c.TLSState()
	return ok, st.DidResume, nil
}

// NoResume turns TLS session resumption off for b's connections.
func NoResume(b *Backend) { b.d.tls.ClientSessionCache = nil }

// RootCAs returns the CAs b's connections verify the server's certificate
// against (nil: the system's).
func RootCAs(b *Backend) *x509.CertPool { return b.d.tls.RootCAs }
