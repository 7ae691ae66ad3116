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
// families holding timestamped cells, with atomic per-row mutations.
type WideColumn interface {
	// ReadRows reads rows by keys or by range/prefix, with a filter.
	ReadRows(ctx context.Context, r RowsRequest) (*Result, error)
	// MutateRow applies mutations to one row atomically.
	MutateRow(ctx context.Context, m RowMutation) (*Result, error)
	// Increment adds Delta to the 64-bit big-endian counter in one cell
	// (ReadModifyWrite) and returns the new value.
	Increment(ctx context.Context, r IncrementRequest) (*Result, error)
	// CheckAndMutate applies m.IfTrue when the row has a cell matching the
	// predicate, else m.IfFalse, atomically; Result.Affected is 1 if it matched.
	CheckAndMutate(ctx context.Context, c CheckAndMutateRequest) (*Result, error)
}

// RowsRequest selects Bigtable rows and the cells to return.
type RowsRequest struct {
	Table      string
	Keys       [][]byte // read these rows; or
	Prefix     []byte   // rows whose key starts with this; or
	Start, End []byte   // rows from Start (inclusive) to End (exclusive)
	Limit      int
	Cursor     []byte
	Families   []string // only these families; empty: all
	Columns    []string // only these "family:qualifier" columns; empty: all
	LatestOnly bool     // only each column's latest cell
	MaxBytes   int
}

// Mutation is one change to a Bigtable row.
type Mutation struct {
	Op        string // "set", "delete_cells", "delete_family", "delete_row"
	Family    string
	Qualifier string
	Value     []byte
	Timestamp int64 // microseconds; 0: server time for set, all cells for delete_cells
}

// RowMutation is a set of mutations applied to one row atomically.
type RowMutation struct {
	Table     string
	Key       []byte
	Mutations []Mutation
}

// IncrementRequest adds to a counter cell.
type IncrementRequest struct {
	Table, Family, Qualifier string
	Key                      []byte
	Delta                    int64
}

// CheckAndMutateRequest is a conditional row mutation. The predicate matches
// when the row has a cell in Family:Qualifier (Family alone: any column of the
// family) whose latest value equals Value, or, with Value nil, any value.
type CheckAndMutateRequest struct {
	Table             string
	Key               []byte
	Family, Qualifier string
	Value             []byte
	IfTrue, IfFalse   []Mutation
}

// Unsupported returns the error of an operation that a backend does not offer
// (the capability interfaces are found on a Backend by type assertion).
func Unsupported(backend, typ, op string) *Error {
	return Errorf(CodeUnsupported, "backend %q (%s) does not support %s", backend, typ, op)
}
