package server

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// A binary upgrade (docs/operations.md, "Upgrading tetherd") starts a new
// tetherd that inherits the listening sockets (cmd/tetherd does it with
// tableflip); once it serves, the old one hands its clients over:
//
//  1. It stops accepting, leaving the sockets (and their paths) to the new
//     process, which accepts every new client from then on.
//  2. Each client connection is closed the moment it is idle: no request read
//     and unanswered, no partial frame, no reply unsent, no open transaction.
//     It is closed with CloseAbort, so that a request the client sent at that
//     very moment, unread, makes its read fail with ECONNRESET rather than
//     EOF: the PHP client then knows that the request never ran and sends it
//     again on a new connection, to the new process (on a Unix socket; a
//     TLS client sees the TLS front's clean close, as EOF). A client's next request
//     after that finds its socket closed and reconnects the same way.
//  3. Connections with an open transaction are served, transaction and all,
//     until it ends; after the grace period what is still open is rolled
//     back, as at shutdown.
//  4. The server then shuts down, leaving the socket files in place.

// ListenFunc returns a listener for network and addr: one inherited from the
// process this one replaces, else one create makes (which it keeps, to pass
// on to the next). cmd/tetherd's is tableflip's ListenWithCallback.
type ListenFunc func(network, addr string, create func(network, addr string) (net.Listener, error)) (net.Listener, error)

// Listen returns a listener for network and addr from f; a nil f has create
// make it (nothing is inherited).
func (f ListenFunc) Listen(network, addr string, create func(network, addr string) (net.Listener, error)) (net.Listener, error) {
	if f == nil {
		return create(network, addr)
	}
	return f(network, addr, create)
}

// handoverSweep is how often, while handing clients over, idle connections
// are looked for.
const handoverSweep = 2 * time.Millisecond

// HandOver hands the server's clients over to the process that inherited its
// listening sockets (see above) and shuts it down once none is left, or when
// ctx ends (rolling back what is still open). The socket files stay.
func (s *Server) HandOver(ctx context.Context) error {
	for _, ln := range s.unixListeners {
		ln.SetUnlinkOnClose(false) // the path is the new process's now
	}
	s.loop.StopAccepting()
	if s.tls != nil {
		s.tls.stopAccepting()
	}
	s.handingOver.Store(true)
	s.log.Info("handing clients over to the new process", "clients", s.clients.Load(), "open_transactions", s.openTxs())
	t := time.NewTicker(handoverSweep)
	defer t.Stop()
	var sweeping atomic.Bool // a sweep posted and not run yet: the next waits for it
	for left := s.clients.Load(); left > 0; left = s.clients.Load() {
		select {
		case <-ctx.Done():
			s.log.Warn("grace period over with clients still connected", "clients", left, "open_transactions", s.openTxs())
			return s.Shutdown(ctx)
		case <-t.C:
			if sweeping.CompareAndSwap(false, true) {
				s.loop.Post(func() {
					s.closeIdleClients()
					sweeping.Store(false)
				})
			}
		}
	}
	s.log.Info("every client handed over")
	return s.Shutdown(ctx)
}

// closeIdleClients closes, at once, every client connection that has nothing
// under way. Loop goroutine.
func (s *Server) closeIdleClients() {
	for ss := range s.sessions {
		if ss.pending.Load() == 0 && ss.beginning.Load() == 0 && ss.partialSince == 0 && ss.conn.Unread() == 0 &&
			!ss.conn.Paused() && ss.openTxs() == 0 && ss.conn.Unsent() == 0 {
			s.loop.CloseAbort(ss.conn)
		}
	}
}
