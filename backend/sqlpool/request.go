package sqlpool

// The contract between tetherd's server and the SQL backends whose server
// connections its event loop drives (backend/mysql and backend/postgres,
// through this package's Pool): the Request a client's frame becomes, its
// outcome, and the server's own report on the session after it. The server
// imports this package for it; the protocols fill it in.

import (
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
)

// Kind is what a Request asks of a server connection.
type Kind uint8

// The kinds of request. The first five come from clients; the rest are the
// pool's own housekeeping, sent on a connection before or after a client's.
const (
	KindQuery    Kind = iota + 1 // a statement that returns rows, into Sink
	KindExec                     // a statement for its effect: Affected, InsertID
	KindBegin                    // start a transaction; the connection is pinned to it
	KindCommit                   // commit the request's Tx and unpin
	KindRollback                 // roll back the request's Tx and unpin
	KindApply                    // bring the session's settings to Profile (from the connection's)
	KindReset                    // clear every session state and restore the pool's baseline
	KindProbe                    // a no-op that absorbs a cancel that came late
)

var kindNames = [...]string{"", "query", "exec", "begin", "commit", "rollback", "apply settings", "reset", "probe"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// Request is one unit of work for a pool: a client's statement, a transaction
// boundary, or the pool's own housekeeping. The pool and the protocol fill in
// its outcome and call Done once, on the loop goroutine.
type Request struct {
	Kind   Kind
	SQL    string
	Params []any          // nil, bool, int64, uint64, float64, string, []byte
	Sink   tether.RowSink // KindQuery: where the rows go
	// Client is the pooled session of the client that sent it (nil: a
	// client with the baseline settings and nothing else, as Go callers are).
	Client *Client
	// Tx is the transaction a statement, commit or rollback runs in.
	Tx *Tx
	// Deadline, when not zero, bounds the request: waiting for a
	// connection and running. A statement still running then is cancelled
	// on the server.
	Deadline time.Time
	// Primary asks a router over replicas (backend/sqlroute) to run the
	// request on the primary; a pool ignores it.
	Primary bool
	// Rerouted counts the times a router took the request back after a
	// server refused it without running it (it retries once).
	Rerouted uint8
	// Tracked: a router holds the client's later reads to servers that
	// have what this request did (it may write).
	Tracked bool
	// Group ties the requests of one batch together: they may be
	// pipelined on one connection, one after the other.
	Group any
	// Done is called once, on the loop goroutine, with the outcome set.
	Done func(*Request)
	// Owner is the submitter's own state, for Done (the pool does not
	// touch it): a Done that is a plain function, not a closure, and a
	// Request reused, keep allocations off the path every statement takes.
	Owner any

	// Outcome.
	Err      error
	Affected int64
	InsertID int64
	// NewTx is the transaction a successful KindBegin started.
	NewTx *Tx

	// Set by the protocol when it completes a request: what the server said
	// about the session after it (nil when it said nothing).
	Report *Report
	// Profile is the settings KindApply brings the session to.
	Profile *Profile

	// State is the pool's bookkeeping of the request: only the pool
	// touches it.
	State State
}

// State is a pool's bookkeeping of one request.
type State struct {
	// Pool is the pool the request was submitted to: where a router over
	// several pools (backend/sqlroute) abandons it.
	Pool *Pool
	// Intercept, when set (by a router, as it submits), is called once with
	// the outcome set, before Done: returning true takes the request back
	// (Done is not called; the router resubmits it or answers it later). A
	// router sets a function value bound once, not a closure per request.
	Intercept func(*Request) bool
	Queued    time.Time // when it entered the wait queue
	Sent      time.Time // when it was sent, if others were waiting then (to learn what statements cost)
	Conn      any       // the pool's connection it was sent on
	Abandoned bool      // answered already (deadline, client gone); its answer is dropped
	Finished  bool      // Done has been called
}

// Report is the server's own word on a session after a request: what it
// reported (MySQL's OK packet status and session tracker, PostgreSQL's
// ReadyForQuery and ParameterStatus) and, where the server does not report a
// kind of state on its own, what the protocol asked it (see the drivers).
type Report struct {
	// InTx: a transaction is open on the session.
	InTx bool
	// Settings are the pooled session variables the request changed, with
	// the values the server now has; with Snapshot, every pooled variable
	// the session has set (a variable not listed is at its default).
	Settings []Setting
	Snapshot bool
	// Unpooled, when not empty, names session state the request created that
	// cannot follow the client to another connection (a temporary table, a
	// user variable, a variable not on the pooled list, a lock...): the
	// connection must be reset before anyone else uses it.
	Unpooled string
	// Locked: the session holds table locks (MySQL LOCK TABLES).
	Locked bool
	// AutocommitOff: the session's autocommit is off (MySQL SET autocommit =
	// 0), so every later statement would open a transaction.
	AutocommitOff bool
	// Position is where the server's log stood after the transaction the
	// request committed, when the server reported it (MariaDB's last_gtid):
	// a replica that has applied it has the request's writes.
	Position string
}

// SetUnpooled records why the session must be reset; the first reason wins.
func (r *Report) SetUnpooled(why string) {
	if r.Unpooled == "" {
		r.Unpooled = why
	}
}

// AddUnpooled records session state that cannot be pooled on the request's
// report, creating the report if needed. For the protocols.
func (r *Request) AddUnpooled(why string) {
	if r.Report == nil {
		r.Report = &Report{}
	}
	r.Report.SetUnpooled(why)
}

// Client is one client's pooled session on a backend: the session settings
// it set, which follow it to whichever connection runs its next statement.
// The server keeps one per client connection and backend. Its fields are
// touched only on the loop goroutine.
type Client struct {
	Profile *Profile
	// Route is a router's own state of the client (backend/sqlroute: where
	// its last write went, for read-your-writes); pools never touch it.
	Route any
}

// Tx is a transaction pinned to one server connection: the server keeps it
// and names it in the requests that run in it; the pool fills it in.
type Tx struct {
	Conn   any // the pool's connection, nil once the transaction is over
	Client *Client
	// Pool is the pool whose connection the transaction is pinned to.
	Pool *Pool
	// Ended says why the transaction is over, once it is.
	Ended error
	// EndedBy, when not empty, is the statement that the server reports
	// ended the transaction on its session while tetherd held it open (COMMIT
	// or ROLLBACK sent as SQL, a statement that commits implicitly): later
	// statements ran each in its own transaction, and the transaction's commit
	// or rollback is answered with an error that says so.
	EndedBy string
}

// Over reports whether the transaction has ended, and why.
func (t *Tx) Over() (bool, error) { return t.Conn == nil, t.Ended }

// Backend is what the server needs of a SQL backend whose connections its
// event loop drives (backend/sqlpool's Pool, in backend/mysql and
// backend/postgres). UseLoop is called before Open; every other method only on
// the loop goroutine.
type Backend interface {
	// UseLoop makes the backend run on the server's loop.
	UseLoop(l *evloop.Loop)
	// Submit runs r; r.Done is called once, on the loop goroutine.
	Submit(r *Request)
	// Abandon answers r with err now, if it has not been answered, and
	// cancels on the server what it still runs there.
	Abandon(r *Request, err error)
	// CancelClient gives up every request of a client that went away.
	CancelClient(c *Client, err error)
	// AbortTx rolls tx back on tetherd's initiative (client gone, idle too
	// long, shutdown), cancelling a statement of it that still runs.
	AbortTx(tx *Tx, why string)
}

// Causal is a loop backend that keeps read-your-writes for its clients
// across connections (backend/sqlroute, over replicas): a position a client
// carries from one connection (or web host) to another. Loop goroutine only.
type Causal interface {
	// Position calls done, on the loop goroutine, with a position that
	// covers every write of cl answered so far: "" when cl wrote nothing
	// that a replica could lack.
	Position(cl *Client, done func(pos string, err error))
	// After makes cl's reads see at least pos (a position Position gave,
	// maybe on another connection or tetherd): until a replica has applied
	// it, they run on the primary. A pos not of the protocol's form is a
	// bad_request error.
	After(cl *Client, pos string) error
}

// Rewinder is a RowSink that can forget the columns and rows it was given,
// so that a request a server refused before it ran (a router over replicas)
// can run again elsewhere into it.
type Rewinder interface {
	Rewind()
}
