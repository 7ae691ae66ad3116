package server

import tether "github.com/tether-php/tether"

// safeCall runs fn, a call into a backend off any request's path (a change
// stream, a catalog read), turning a panic in it into its error (logged with
// the stack, counted under backend and op): the caller's retry takes it from
// there.
func (s *Server) safeCall(backend, op string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = tether.RecoverPanic(s.log, backend, op, v)
		}
	}()
	return fn()
}

// Panics returns the panics recovered in this process (see the function
// Panics), for the admin API's tether_panics_total.
func (s *Server) Panics() []tether.PanicStats { return tether.Panics() }
