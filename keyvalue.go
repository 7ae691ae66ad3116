package tether

import (
	"context"
)

// KeyValue is the key API: the same five operations, with the same request
// shape, on every backend, with no query language to parse for simple access.
//
// A key is the list of a table's primary-key values in key order: one value
// for a single-column key, several for a composite one (on Cassandra the
// partition key columns, then the clustering columns; on Bigtable the row key
// alone). Rows come back as a Result whose Columns name the values of each row.
//
// On SQL backends the statements are built from the table's primary key,
// introspected once and cached, with every identifier checked against the
// table's real columns: nothing from the request is put into SQL text
// unchecked.
type KeyValue interface {
	// Get reads the row with key k.Key; the Result has no rows if there is none.
	Get(ctx context.Context, k KeyRequest) (*Result, error)

	// MultiGet reads the rows of k.Keys in one call; the Result has one row per
	// key, in request order, nil where a key has no row.
	MultiGet(ctx context.Context, k KeyRequest) (*Result, error)

	// Scan reads rows in key order: those whose key starts with k.Prefix, or
	// those from k.Start (inclusive) to k.End (exclusive), at most k.Limit,
	// after k.Cursor. The Result's Cursor is set when more rows may follow.
	Scan(ctx context.Context, k KeyRequest) (*Result, error)

	// Put writes k.Row, inserting it or replacing the columns it names (an
	// upsert). The row must hold every key column. Result.Affected is 1.
	Put(ctx context.Context, k KeyRequest) (*Result, error)

	// Delete deletes the row with key k.Key. Result.Affected is the number of
	// rows deleted where the backend knows it, else 1.
	Delete(ctx context.Context, k KeyRequest) (*Result, error)
}

// KeyRequest is one key-API operation.
type KeyRequest struct {
	Table   string         // table (SQL, Cassandra: "keyspace.table" or the session's keyspace) or Bigtable table
	Key     []any          // get, delete: the whole primary key
	Keys    [][]any        // multi_get
	Columns []string       // columns to return; empty: all
	Prefix  []any          // scan: leading key values (Bigtable: a row-key prefix)
	Start   []any          // scan: first key (inclusive)
	End     []any          // scan: key to stop before (exclusive)
	Limit   int            // scan: most rows to return; 0: the server's default
	Cursor  []byte         // scan: from a previous Result.Cursor
	Row     map[string]any // put: column name to value
	// MaxBytes, when positive, bounds the size of a result (too_large).
	MaxBytes int
}

// WideColumn is Bigtable's data model beyond the key API: rows of column
// families holding timestamped cells, with atomic per-row mutations. The
// server hands over each operation as the client sent it; the backend maps its
// key and cell values to its own bytes (backend/bigtable: strings and bytes as
// they are, integers as decimal row keys and 8-byte big-endian cells) and
// refuses, with bad_request, what it cannot map.
type WideColumn interface {
	// WideColumn runs r: read_rows reads rows by keys or by range/prefix,
	// with a filter; mutate_row applies mutations to one row atomically;
	// increment adds Delta to the 64-bit big-endian counter in one cell
	// (ReadModifyWrite) and returns the new value; check_and_mutate applies
	// IfTrue when the row has a cell matching the predicate (Family,
	// Qualifier, Value), else IfFalse, atomically, with Result.Affected 1 if
	// it matched.
	WideColumn(ctx context.Context, r WideColumnRequest) (*Result, error)
}

// WideColumnOp is the operation of a WideColumnRequest.
type WideColumnOp uint8

// The wide-column operations; String gives their protocol names.
const (
	OpReadRows WideColumnOp = iota + 1
	OpMutateRow
	OpIncrement
	OpCheckAndMutate
)

var wideColumnOpNames = [...]string{"", "read_rows", "mutate_row", "increment", "check_and_mutate"}

// String returns the operation's name in the protocol.
func (op WideColumnOp) String() string {
	if int(op) < len(wideColumnOpNames) {
		return wideColumnOpNames[op]
	}
	return "?"
}

// WideColumnRequest is one wide-column operation, its values as the client
// sent them (the protocol's value mapping, docs/protocol.md).
type WideColumnRequest struct {
	Op    WideColumnOp
	Table string
	// Key is the row of mutate_row, increment and check_and_mutate: one
	// value, [row key].
	Key []any
	// read_rows: rows by Keys (each [row key]), or by Prefix, or from Start
	// (inclusive) to End (exclusive) (each one value or none), at most Limit,
	// after Cursor; only the Families and "family:qualifier" Columns named
	// (empty: all); LatestOnly keeps each column's newest cell.
	Keys               [][]any
	Prefix, Start, End []any
	Limit              int
	Cursor             []byte
	Families, Columns  []string
	LatestOnly         bool
	// increment and check_and_mutate: the cell (check_and_mutate: Family
	// alone matches any column of the family).
	Family, Qualifier string
	Delta             int64 // increment
	// Value is check_and_mutate's predicate: the latest value the cell must
	// hold; nil: any value.
	Value any
	// Mutations (mutate_row), IfTrue and IfFalse (check_and_mutate).
	Mutations, IfTrue, IfFalse []CellMutation
	// MaxBytes, when positive, bounds the size of a result (too_large).
	MaxBytes int
}

// CellMutation is one change to a row, as the client sent it.
type CellMutation struct {
	Op        string // "set", "delete_cells", "delete_family", "delete_row"
	Family    string
	Qualifier string
	Value     any   // set: a string, bytes or an integer
	Timestamp int64 // microseconds; 0: server time for set, all cells for delete_cells
}

// Unsupported returns the error of an operation that a backend does not offer
// (the capability interfaces are found on a Backend by type assertion).
func Unsupported(backend, typ, op string) *Error {
	return Errorf(CodeUnsupported, "backend %q (%s) does not support %s", backend, typ, op)
}
