package tether

import "errors"

// ErrResultTooLarge is what ResultBuilder's EndRow returns when the result
// passed its byte limit (Statement.MaxBytes).
var ErrResultTooLarge = errors.New("result too large")

// RowSink receives a statement's result value by value, as a backend decodes
// it from the database's bytes. wire's ResultEncoder is one (the reply to a
// client, encoded straight from the database's bytes; it satisfies RowSink
// without naming it); ResultBuilder is the other (a *Result, for Go callers).
// Text and Bytes may be handed a buffer that is reused once they return.
//
// Order: Columns(n), n calls to Column, then per row BeginRow, one value
// call per column and EndRow. EndRow returns an error only when the result
// passed the sink's byte limit (ErrResultTooLarge, or the encoder's own
// wire.ErrResultTooLarge): the backend then stops and answers too_large.
type RowSink interface {
	Columns(n int)
	Column(name []byte)
	BeginRow()
	Nil()
	Bool(v bool)
	Int(v int64)
	Uint(v uint64)
	Float(v float64)
	Text(b []byte)
	Bytes(b []byte)
	// DateTime takes a DATETIME or TIMESTAMP value in the protocol's ISO form,
	// "2006-01-02T15:04:05[.ffffff]", with a trailing "Z" for a timestamp
	// with time zone (always in UTC). The sink may rewrite b in place.
	DateTime(b []byte)
	EndRow() error
}

// ResultBuilder is a RowSink that builds a *Result with the protocol's value
// mapping: strings for text, []byte for binary data.
type ResultBuilder struct {
	res      Result
	row      []any
	maxBytes int
	size     int
}

// NewResultBuilder returns a builder; maxBytes, when positive, bounds the
// result's size (as ValueSize counts it).
func NewResultBuilder(maxBytes int) *ResultBuilder {
	return &ResultBuilder{res: Result{Rows: [][]any{}}, maxBytes: maxBytes}
}

// Rewind forgets the columns and rows given so far (a request that runs
// again elsewhere).
func (b *ResultBuilder) Rewind() { b.res, b.row, b.size = Result{Rows: [][]any{}}, nil, 0 }

// Result returns what was built.
func (b *ResultBuilder) Result() *Result { return &b.res }

// Columns implements RowSink.
func (b *ResultBuilder) Columns(n int) { b.res.Columns = make([]string, 0, n) }

// Column implements RowSink.
func (b *ResultBuilder) Column(name []byte) { b.res.Columns = append(b.res.Columns, string(name)) }

// BeginRow implements RowSink.
func (b *ResultBuilder) BeginRow() { b.row = make([]any, 0, len(b.res.Columns)) }

func (b *ResultBuilder) add(v any) {
	b.row = append(b.row, v)
	b.size += ValueSize(v)
}

// Nil implements RowSink.
func (b *ResultBuilder) Nil() { b.add(nil) }

// Bool implements RowSink.
func (b *ResultBuilder) Bool(v bool) { b.add(v) }

// Int implements RowSink.
func (b *ResultBuilder) Int(v int64) { b.add(v) }

// Uint implements RowSink.
func (b *ResultBuilder) Uint(v uint64) { b.add(v) }

// Float implements RowSink.
func (b *ResultBuilder) Float(v float64) { b.add(v) }

// Text implements RowSink.
func (b *ResultBuilder) Text(v []byte) { b.add(string(v)) }

// DateTime implements RowSink: the value as it comes, ISO 8601.
func (b *ResultBuilder) DateTime(v []byte) { b.add(string(v)) }

// Bytes implements RowSink.
func (b *ResultBuilder) Bytes(v []byte) { b.add(append([]byte{}, v...)) }

// EndRow implements RowSink.
func (b *ResultBuilder) EndRow() error {
	b.res.Rows = append(b.res.Rows, b.row)
	b.row = nil
	if b.maxBytes > 0 && b.size > b.maxBytes {
		return ErrResultTooLarge
	}
	return nil
}

var _ RowSink = (*ResultBuilder)(nil)

// ValueSize approximates the encoded size of a row value, for the backends
// that enforce Statement.MaxBytes and KeyRequest.MaxBytes while reading rows.
func ValueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 5
	case []byte:
		return len(x) + 5
	}
	return 9
}
