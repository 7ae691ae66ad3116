package tether

import "github.com/tether-php/tether/wire"

// RowSink receives a statement's result value by value, as a backend decodes
// it: see wire.RowSink. *wire.ResultEncoder is one (the reply to a client,
// encoded straight from the database's bytes); ResultBuilder is the other (a
// *Result, for Go callers).
type RowSink = wire.RowSink

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
		return wire.ErrResultTooLarge
	}
	return nil
}

var (
	_ RowSink = (*ResultBuilder)(nil)
	_ RowSink = (*wire.ResultEncoder)(nil)
)
