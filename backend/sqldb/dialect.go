// Package sqldb is the part of the SQL backends that they share: a
// database/sql pool with a bounded wait, a cache of prepared statements, and
// transactions pinned to one connection whose session state cannot leak.
// Each SQL backend (backend/sqlite, backend/mysql, backend/postgres) supplies a
// Dialect and wraps a *DB.
package sqldb

import (
	"database/sql"
	"errors"
	"io"
	"net"
	"strings"

	tether "github.com/tether-php/tether"
)

// Dialect is what differs between SQL backends.
type Dialect interface {
	// Name is the backend type, for messages ("mysql").
	Name() string

	// Convert maps one scanned value to the protocol's value mapping
	// (docs/protocol.md), given the column's database type name as the
	// driver reports it (sql.ColumnType.DatabaseTypeName). v is the driver's
	// own value: a []byte may alias the driver's buffer and is valid only
	// during the call, so Convert must copy any bytes it returns.
	Convert(dbType string, v any) any

	// ClassifyError maps a driver error to a typed error, or returns nil when
	// it does not recognise it.
	ClassifyError(err error) *tether.Error

	// ChangesSession reports whether a statement may change state that lives
	// as long as the connection (session variables, temporary tables, locks,
	// prepared statements). The connection it ran on is then closed instead of
	// being returned to the pool, so the state cannot reach another client.
	ChangesSession(sql string) bool

	// KeySQL is the SQL the key API needs from this dialect.
	KeySQL() KeySQL
}

// KeySQL is what the key API needs to build statements for one dialect.
type KeySQL struct {
	// Quote quotes an identifier that is known to name a real column or table.
	Quote func(name string) string
	// Placeholder returns the n-th (1-based) parameter placeholder.
	Placeholder func(n int) string
	// Columns returns the statement that lists a table's columns in order,
	// one row each: the name, the column's 1-based position in the primary
	// key (0 when not in it) and, optionally, the table's name as the
	// catalog has it, quoted for SQL (otherwise the requested name is
	// quoted); no rows when there is no such table.
	Columns func(table string) (sql string, params []any)
	// Upsert returns the clause after INSERT ... VALUES (...) that turns it
	// into an upsert on the key columns, updating the other columns.
	Upsert func(keyCols, otherCols []string) string
}

// QuoteWith returns a Quote function that wraps a name in q, doubling any q
// inside it.
func QuoteWith(q string) func(string) string {
	return func(name string) string {
		return q + strings.ReplaceAll(name, q, q+q) + q
	}
}

// ParamBinder is implemented by a Dialect that rewrites parameters before
// they are bound (PostgreSQL: binary strings to bytes).
type ParamBinder interface {
	BindParams(params []any) []any
}

// Opener opens the *sql.DB of a backend. It must not connect yet.
type Opener func() (*sql.DB, error)

// ClassifyIOError maps a connection that broke under a statement (EOF, reset,
// network error) to unavailable. It is not retryable: the statement may have
// run. It returns nil for any other error.
func ClassifyIOError(backend string, err error) *tether.Error {
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return &tether.Error{Code: tether.CodeUnavailable, Message: backend + ": connection lost: " + err.Error(), Err: tether.ErrUnavailable}
	}
	return nil
}
