package tether

import (
	"context"
	"time"
)

// Backend is one configured data store or service behind tetherd, with its
// own pool of warm connections or its own long-lived client. Every backend
// package (backend/sqlite, backend/mysql, backend/postgres,
// backend/cassandra, backend/bigtable, backend/http) exports a type that
// implements it and the capability interfaces that fit: Querier (SQL or CQL
// text), Transactor, KeyValue (the key API every data store offers),
// WideColumn (Bigtable's row operations) and Upstream (an HTTP service). A
// request for a capability a backend lacks gets an unsupported error. Every
// data store must pass the shared suites in backend/backendtest.
//
// Lifecycle:
//  1. The constructor (New) checks its configuration and has no side effects.
//  2. Open connects (or verifies the backend can be reached) and warms the pool;
//     tetherd reports ready only after every backend's Open returned nil.
//  3. The capability methods may then be called concurrently from any goroutine.
//  4. Close stops handing out connections, waits for borrowed ones until ctx is
//     done, and closes the pool. Open transactions must be finished first: the
//     server rolls them back before it closes backends.
//
// Errors returned by the capability methods are *Error values (or wrap the
// sentinel errors of this package), so that the server can send a typed code.
type Backend interface {
	// Open connects the pool. It returns an error wrapping ErrUnavailable when the
	// backend cannot be reached.
	Open(ctx context.Context) error

	// Stats reports the pool's state, for logs and operators.
	Stats() PoolStats

	// Close drains and closes the pool; see the lifecycle above.
	Close(ctx context.Context) error
}

// Retirer is a backend that can give back its idle resources early when a
// reload has replaced or removed it: it goes on serving what it was given
// (requests admitted before the reload, open transactions) until Close, but
// keeps no idle connection and opens none it does not need.
type Retirer interface {
	Retire()
}

// ChangeFollower is a backend that can follow its database's change stream
// (the MySQL binary log, PostgreSQL logical replication), so that the result
// cache drops what writes from anywhere else made stale.
type ChangeFollower interface {
	// FollowChanges reads the stream from its current end. It calls ready
	// once every later commit will be reported, then changed with the tables
	// each commit wrote (unqualified, lower case: as Catalog names them), or
	// nil when it cannot tell which (DDL, a statement of unknown reach), on
	// its own goroutine.
	// It returns nil when ctx ends, or the error that broke the stream (the
	// caller starts it again).
	FollowChanges(ctx context.Context, ready func(), changed func(tables []string)) error
}

// CacheCatalog is a SQL backend that can tell the result cache which of its
// tables per-table invalidation cannot follow, from the database's catalog.
type CacheCatalog interface {
	// CacheCatalog reads the catalog. It returns an error when it cannot see
	// all it needs (then the cache drops a backend's whole cache on every
	// write).
	CacheCatalog(ctx context.Context) (*Catalog, error)
}

// Catalog lists the tables whose reads or writes reach further than their
// names say. Names are unqualified and lower-cased, as internal/sqltables
// gives them, so a name stands for the tables of that name in every schema.
type Catalog struct {
	// ReadAll: a read naming one may depend on other tables (a view, a
	// table with inheritance children): it is dropped by a write to any
	// table.
	ReadAll map[string]bool
	// NoCache: its rows change without a write (a sequence, a foreign or
	// federated table): a read naming one is not cached.
	NoCache map[string]bool
	// WriteAll: a write to one may write other tables (triggers, rules,
	// foreign keys with ON DELETE/UPDATE CASCADE, SET NULL or SET DEFAULT,
	// inheritance): it drops the backend's whole cache.
	WriteAll map[string]bool
}

// Querier runs statements in the backend's own language (SQL, CQL).
type Querier interface {
	// Query runs a statement that returns rows, on any pooled connection.
	Query(ctx context.Context, s Statement) (*Result, error)

	// Exec runs a statement for its effect, on any pooled connection.
	Exec(ctx context.Context, s Statement) (*Result, error)
}

// Transactor begins transactions pinned to one connection.
type Transactor interface {
	// Begin pins one pooled connection to a new transaction. The connection is
	// unavailable to anyone else until the Tx is committed or rolled back.
	Begin(ctx context.Context) (Tx, error)
}

// Tx is a transaction pinned to one backend connection. Its methods must not be
// called concurrently; the server serialises them per transaction.
type Tx interface {
	Query(ctx context.Context, s Statement) (*Result, error)
	Exec(ctx context.Context, s Statement) (*Result, error)
	// Commit commits and returns the connection to the pool. After a failed
	// Commit the transaction is over either way.
	Commit(ctx context.Context) error
	// Rollback rolls back and returns the connection to the pool clean. It is
	// safe to call on a finished Tx (it returns ErrTxDone).
	Rollback(ctx context.Context) error
}

// Statement is SQL text with positional parameters. Parameters are always bound
// by the driver, never interpolated into the text.
type Statement struct {
	SQL    string
	Params []any // nil, bool, int64, uint64, float64, string, []byte
	// MaxBytes, when positive, bounds the size of a result; a larger one is a
	// too_large error, found while reading rows rather than after.
	MaxBytes int
	// PageSize and Cursor page through a large result on backends that page
	// (Cassandra): at most PageSize rows, resuming after Cursor, and
	// Result.Cursor set when more follow. Backends that do not page refuse them.
	PageSize int
	Cursor   []byte
}

// RefusePaging is the error of a backend of type typ that does not page
// when asked for a page (pageSize or cursor set), else nil: the one message
// every such backend gives, so that a client learns how to page there.
func RefusePaging(typ string, pageSize int, cursor []byte) *Error {
	if pageSize != 0 || cursor != nil {
		return Errorf(CodeUnsupported, "%s pages with LIMIT in SQL, or with the key API's scan; limit and cursor are for backends that page (cassandra)", typ)
	}
	return nil
}

// Result is the outcome of Query (Columns and Rows) or Exec (Affected, InsertID).
//
// Row values are normalised by the backend to the protocol's value mapping
// (docs/protocol.md): nil, bool, int64, uint64, float64, string (text, decimals,
// dates and times as ISO 8601) or []byte (binary).
type Result struct {
	Columns  []string
	Rows     [][]any // a nil row is a key that multi_get did not find
	Affected int64
	InsertID int64
	// Cursor, when not nil, resumes a scan or a paged query after the last
	// row returned. It is opaque to clients.
	Cursor []byte
	// HTTP is the response of an http operation (and the only field it sets).
	HTTP *HTTPResponse
}

// Namer is a backend that wants to know its name in the config, for what it
// reports on its own (a pool's recovered panics, counted by backend).
type Namer interface {
	SetName(name string)
}

// Discarder is a Tx that can be given up when a panic left its connection in
// an unknown state: it closes the connection instead of reusing it (the
// server rolls back as the session ends, if the backend could not roll back
// first) and frees its pool slot.
type Discarder interface {
	Discard()
}

// PoolStats is a snapshot of a backend's connection pool.
type PoolStats struct {
	Open    int   `json:"open"` // connections open, idle or in use
	InUse   int   `json:"in_use"`
	Idle    int   `json:"idle"`
	Waiting int64 `json:"waits"` // total number of waits for a free connection so far
	// Resets is how many times a connection was reset (MySQL
	// COM_RESET_CONNECTION, PostgreSQL DISCARD ALL) because a statement left
	// session state that cannot follow its client; each drops the
	// connection's prepared statements.
	Resets int64 `json:"resets"`
	// Dials and DialErrors count the connections opened and the attempts
	// that failed; Cancels the statements cancelled on the server (their
	// deadline passed, their client went away). Backends that cannot tell
	// leave them 0.
	Dials      int64 `json:"dials"`
	DialErrors int64 `json:"dial_errors"`
	Cancels    int64 `json:"cancels"`
	// IllegalMoves counts the moves a pool's state table refused: each is a
	// bug in tetherd, logged with its stack; 0 in a healthy daemon.
	IllegalMoves int64 `json:"illegal_moves,omitempty"`
}

// TopologyReporter is a backend over several servers of one database (a
// primary and its replicas: backend/sqlroute) that reports each, for
// operators (/metrics, /status.json, tether pools, the status page).
type TopologyReporter interface {
	Topology() TopologyStats
}

// TopologyStats is a replicated backend's hosts and what routing did.
type TopologyStats struct {
	Hosts []HostStats `json:"hosts"`
	// Failovers are the last moves of writes from one host to another (or
	// to none), oldest first; FailoversTotal counts them all.
	Failovers      []Failover `json:"failovers"`
	FailoversTotal uint64     `json:"failovers_total"`
	// CausalPrimary counts the reads that could have gone to a replica but
	// went to the primary because no replica had the client's last write
	// yet; CausalReplica the reads of such clients a replica served once it
	// had it.
	CausalPrimary uint64 `json:"causal_primary"`
	CausalReplica uint64 `json:"causal_replica"`
	// PrimaryWaits counts the requests that waited for a host to take
	// writes; PrimaryWaitTimeouts those answered unavailable when none did in
	// time.
	PrimaryWaits        uint64 `json:"primary_waits"`
	PrimaryWaitTimeouts uint64 `json:"primary_wait_timeouts"`
}

// HostStats is one server of a replicated backend: what it says it is, what
// routing makes of it, and its pool.
type HostStats struct {
	Addr string `json:"addr"`
	// Role is what the host last said it is: primary, replica or unknown.
	Role string `json:"role"`
	// State is what routing does with it: "writes" (the primary), "reads"
	// (a replica that serves reads), "shunned" (a replica kept out of
	// reads: Why says why), "unreachable", "unprobed" or "standby" (says it
	// takes writes but another host has them).
	State string `json:"state"`
	Why   string `json:"why,omitempty"`
	// LagSeconds is the replica's delay as it reports it, when LagKnown.
	LagSeconds float64 `json:"lag_seconds"`
	LagKnown   bool    `json:"lag_known"`
	// Position is what it has applied (a replica) or written (a primary).
	Position  string    `json:"position"`
	CheckedAt time.Time `json:"checked_at"`
	// Reads counts replica-safe reads routed to it as a replica; Writes the
	// requests routed to it as the primary.
	Reads  uint64 `json:"reads"`
	Writes uint64 `json:"writes"`
	// Shunned counts the times it was taken out of reads.
	Shunned uint64    `json:"shunned"`
	Pool    PoolStats `json:"pool"`
}

// Failover is one move of writes.
type Failover struct {
	At   time.Time `json:"at"`
	From string    `json:"from"` // "" when no host took writes before
	To   string    `json:"to"`   // "" when no host takes writes now
	// Why says what the hosts reported then.
	Why string `json:"why"`
}
