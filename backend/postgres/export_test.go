package postgres

import "context"

// DialOnce dials one server connection as the pool does and closes it,
// reporting whether it ran TLS and resumed a TLS session.
func DialOnce(ctx context.Context, b *Backend) (withTLS, resumed bool, err error) {
	sc, err := b.d.Dial(ctx)
	if err != nil {
		return false, false, err
	}
	c := sc.(*conn)
	defer c.Close()
	st, ok := c.TLSState()
	return ok, st.DidResume, nil
}
