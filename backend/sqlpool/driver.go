package sqlpool

import (
	"context"

	"github.com/tether-php/tether/internal/evloop"
)

// Driver is one SQL protocol as the pool uses it: backend/mysql and
// backend/postgres implement it. Its blocking methods run on goroutines of
// the pool's; everything a ServerConn does runs on the loop goroutine.
type Driver interface {
	// Name is the backend type, for messages ("mysql").
	Name() string

	// Dial opens one server connection, authenticates (with the field's
	// libraries), and prepares the session for pooling (session tracking,
	// the baseline). It blocks.
	Dial(ctx context.Context) (ServerConn, error)

	// Cancel asks the server to stop the statement c is running now: MySQL
	// KILL QUERY on a side connection, a PostgreSQL CancelRequest. It blocks
	// until the server took the request. The pool sends nothing else on c
	// until both this and c's answer are back, and then a probe.
	Cancel(ctx context.Context, c ServerConn) error

	// Terminate ends c's server session for good, for a connection the pool
	// gave up on (a cancel that did not take); it returns once the server
	// confirms the session is gone, so that the pool can count the
	// connection as closed only then. It blocks.
	Terminate(ctx context.Context, c ServerConn) error

	// Close closes the driver's side connections.
	Close() error
}

// ServerConn is one server connection driven by the loop: the protocol's
// state machine. The pool calls Attach once, then Send for each request, in
// order; the ServerConn answers each request, in the order sent, with
// Conn.Done, or the whole connection with Conn.Fail. All on the loop
// goroutine.
type ServerConn interface {
	evloop.Watcher

	// Fd is the socket the loop polls for it.
	Fd() int

	// Attach hands the connection to the pool's side of it, c.
	Attach(c *Conn)

	// Send writes r's commands to the server, after those of the requests
	// sent before it (pipelined: it does not wait for their answers).
	// KindApply, KindReset and KindProbe are the protocol's to carry out;
	// see Request.
	Send(r *Request)

	// Close closes the socket at once (telling the server first when it can
	// without blocking). The pool has stopped polling it.
	Close()

	// String names the connection for logs ("mysql thread 42").
	String() string
}
