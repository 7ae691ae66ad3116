package wire

import (
	"errors"
	"math"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// ErrResultTooLarge is returned by ResultEncoder.EndRow when the encoded
// result passes the encoder's byte limit (the only error EndRow returns, as
// the domain's row-sink contract, tether.RowSink, asks).
var ErrResultTooLarge = errors.New("result too large")

// ResultEncoder encodes a query's result into a reply as a backend decodes it,
// value by value, straight from the database's bytes: no [][]any, and no
// boxed value per cell, between the two. It writes the same bytes as
// AppendResult (row-oriented) or AppendColumns (columnar) would for the same
// values.
//
// Use: Reset, Columns with the column count, one Column per name, then per
// row BeginRow, one value method per column and EndRow; finally AppendReply.
// An encoder may be reused after AppendReply (Reset again); it keeps its
// buffers.
type ResultEncoder struct {
	head     Head
	columnar bool
	sqlTimes bool // DateTime values in TimeFormatSQL
	maxBytes int

	names  []byte // the encoded column names
	ncols  int
	nnames int
	nrows  int
	rows   []byte   // row-oriented: every row, encoded
	cols   [][]byte // columnar: each column's values, encoded
	cur    int      // columnar: the column the next value belongs to
	size   int      // bytes of values so far, against maxBytes
}

// Reset starts a new result for the reply head h. maxBytes, when positive,
// bounds the encoded values.
func (e *ResultEncoder) Reset(h Head, columnar bool, maxBytes int) {
	e.head, e.columnar, e.maxBytes = h, columnar, maxBytes
	e.sqlTimes = false
	e.names = e.names[:0]
	e.rows = e.rows[:0]
	e.ncols, e.nnames, e.nrows, e.cur, e.size = 0, 0, 0, 0, 0
}

// Rewind forgets the columns and rows given since Reset, keeping the head and
// the settings: a request refused by one server before it ran (a router
// over replicas) runs again elsewhere into the same encoder.
func (e *ResultEncoder) Rewind() {
	e.names = e.names[:0]
	e.rows = e.rows[:0]
	e.ncols, e.nnames, e.nrows, e.cur, e.size = 0, 0, 0, 0, 0
}

// SetTook sets the server time the reply's head carries (Head.Took).
func (e *ResultEncoder) SetTook(d time.Duration) { e.head.Took = d }

// Columns announces the number of columns; Column follows n times.
func (e *ResultEncoder) Columns(n int) {
	e.ncols = n
	if e.columnar {
		for len(e.cols) < n {
			e.cols = append(e.cols, nil)
		}
		for i := 0; i < n; i++ {
			e.cols[i] = e.cols[i][:0]
		}
	}
}

// Column appends the next column's name.
func (e *ResultEncoder) Column(name []byte) {
	e.names = msgp.AppendStringFromBytes(e.names, name)
	e.nnames++
}

// BeginRow starts a row.
func (e *ResultEncoder) BeginRow() {
	if e.columnar {
		e.cur = 0
		return
	}
	e.rows = msgp.AppendArrayHeader(e.rows, uint32(e.ncols))
}

// dst returns the buffer the next value goes to, and advances to the next.
func (e *ResultEncoder) dst() *[]byte {
	if !e.columnar {
		return &e.rows
	}
	d := &e.cols[e.cur]
	e.cur++
	return d
}

// Nil appends a NULL.
func (e *ResultEncoder) Nil() {
	d := e.dst()
	*d = msgp.AppendNil(*d)
	e.size++
}

// Bool appends a boolean.
func (e *ResultEncoder) Bool(v bool) {
	d := e.dst()
	*d = msgp.AppendBool(*d, v)
	e.size++
}

// Int appends a signed integer, in its shortest form (non-negative ones
// unsigned, as appendInt does).
func (e *ResultEncoder) Int(v int64) {
	d := e.dst()
	*d = appendInt(*d, v)
	e.size += 9
}

// Uint appends an unsigned integer.
func (e *ResultEncoder) Uint(v uint64) {
	if v <= math.MaxInt64 {
		e.Int(int64(v))
		return
	}
	d := e.dst()
	*d = msgp.AppendUint64(*d, v)
	e.size += 9
}

// Float appends a float as float64.
func (e *ResultEncoder) Float(v float64) {
	d := e.dst()
	*d = msgp.AppendFloat64(*d, v)
	e.size += 9
}

// Text appends text (a str); b may be reused when it returns.
func (e *ResultEncoder) Text(b []byte) {
	d := e.dst()
	*d = msgp.AppendStringFromBytes(*d, b)
	e.size += len(b) + 5
}

// SetTimeFormat chooses how DateTime values are written: TimeFormatISO (the
// default after Reset) as they come, TimeFormatSQL as the databases' own text
// form, which PHP's mysqli, PDO and pgsql return.
func (e *ResultEncoder) SetTimeFormat(f string) { e.sqlTimes = f == TimeFormatSQL }

// DateTime appends a DATETIME or TIMESTAMP value (see tether.RowSink.DateTime),
// rewritten in place to "2006-01-02 15:04:05[.ffffff][+00]" under
// TimeFormatSQL.
func (e *ResultEncoder) DateTime(b []byte) {
	if e.sqlTimes {
		b = SQLDateTime(b)
	}
	e.Text(b)
}

// SQLDateTime rewrites an ISO DATETIME or TIMESTAMP value (see
// tether.RowSink.DateTime) in place to the databases' own text form: a space between
// date and time, and "+00" for the "Z" of a UTC timestamp with time zone
// (PostgreSQL's form). Anything else (infinity) is returned as it is.
func SQLDateTime(b []byte) []byte {
	if len(b) > 10 && b[10] == 'T' {
		b[10] = ' '
		if b[len(b)-1] == 'Z' {
			b = append(b[:len(b)-1], "+00"...)
		}
	}
	return b
}

// Bytes appends binary data (a bin); b may be reused when it returns.
func (e *ResultEncoder) Bytes(b []byte) {
	d := e.dst()
	*d = msgp.AppendBytes(*d, b)
	e.size += len(b) + 5
}

// EndRow ends a row. It returns ErrResultTooLarge once the values passed the
// byte limit; the caller stops there.
func (e *ResultEncoder) EndRow() error {
	e.nrows++
	if e.maxBytes > 0 && e.size > e.maxBytes {
		return ErrResultTooLarge
	}
	return nil
}

// Rows returns the number of rows encoded so far.
func (e *ResultEncoder) Rows() int { return e.nrows }

// AppendReply appends the whole reply: the head, the columns and the rows (or
// count and data, columnar).
func (e *ResultEncoder) AppendReply(b []byte) []byte {
	return e.AppendBody(e.head.open(b, resultFields(e.columnar)))
}

// AppendBody appends the reply AppendReply appends without its head (the
// map header and id): "columns" and its array, then "rows" and its array, or
// "count", "data" and its arrays (columnar). AppendCachedResult writes it
// again under another head: what a result cache stores.
func (e *ResultEncoder) AppendBody(b []byte) []byte {
	if e.columnar {
		b = e.appendNames(b)
		b = msgp.AppendString(b, "count")
		b = msgp.AppendUint32(b, uint32(e.nrows))
		b = msgp.AppendString(b, "data")
		b = msgp.AppendArrayHeader(b, uint32(e.ncols))
		for i := 0; i < e.ncols; i++ {
			b = msgp.AppendArrayHeader(b, uint32(e.nrows))
			b = append(b, e.cols[i]...)
		}
		return b
	}
	b = e.appendNames(b)
	b = msgp.AppendString(b, "rows")
	b = msgp.AppendArrayHeader(b, uint32(e.nrows))
	return append(b, e.rows...)
}

// AppendCachedResult appends, under head h, a result whose body
// (*ResultEncoder).AppendBody wrote for the same form (columnar or not): the
// bytes AppendReply writes for that result and head.
func AppendCachedResult(b []byte, h Head, columnar bool, body []byte) []byte {
	return append(h.open(b, resultFields(columnar)), body...)
}

// Versions is what a client's local cache needs to keep a cached read's
// result (docs/protocol.md, "Table versions"): the session's settings
// profile, and, when the result may be kept, the segment's generation and
// reset counter and the versions of the slots the result depends on, all
// read before the query ran.
type Versions struct {
	Profile    string
	Keep       bool // false: Profile only (the result may not be kept)
	Generation uint64
	Reset      uint64
	Slots      []uint32
	Values     []uint64
}

// AppendCachedResultVersions is AppendCachedResult with a "versions" field
// (v) after the head.
func AppendCachedResultVersions(b []byte, h Head, columnar bool, body []byte, v *Versions) []byte {
	b = h.open(b, resultFields(columnar)+1)
	b = msgp.AppendString(b, "versions")
	if !v.Keep {
		b = msgp.AppendMapHeader(b, 1)
		b = msgp.AppendString(msgp.AppendString(b, "profile"), v.Profile)
		return append(b, body...)
	}
	b = msgp.AppendMapHeader(b, 5)
	b = msgp.AppendString(msgp.AppendString(b, "profile"), v.Profile)
	b = msgp.AppendUint64(msgp.AppendString(b, "generation"), v.Generation)
	b = msgp.AppendUint64(msgp.AppendString(b, "reset"), v.Reset)
	b = msgp.AppendArrayHeader(msgp.AppendString(b, "slots"), uint32(len(v.Slots)))
	for _, s := range v.Slots {
		b = msgp.AppendUint32(b, s)
	}
	b = msgp.AppendArrayHeader(msgp.AppendString(b, "values"), uint32(len(v.Values)))
	for _, x := range v.Values {
		b = msgp.AppendUint64(b, x)
	}
	return append(b, body...)
}

// AppendResultBody appends the body of a result without cursor, as
// AppendResult (columnar: AppendColumns) writes it after the head: what a
// result cache stores and AppendCachedResult writes again under a head.
func AppendResultBody(b []byte, columnar bool, columns []string, rows [][]any) ([]byte, error) {
	start := len(b)
	var err error
	if columnar {
		b, err = AppendColumns(b, Head{Nested: true}, columns, rows, nil)
	} else {
		b, err = AppendResult(b, Head{Nested: true}, columns, rows, nil)
	}
	// A nested head is one byte: the fixmap header of resultFields fields.
	return append(b[:start], b[start+1:]...), err
}

// resultFields is the number of a result reply's fields, its head aside.
func resultFields(columnar bool) uint32 {
	if columnar {
		return 3
	}
	return 2
}

func (e *ResultEncoder) appendNames(b []byte) []byte {
	b = msgp.AppendString(b, "columns")
	b = msgp.AppendArrayHeader(b, uint32(e.nnames))
	return append(b, e.names...)
}

// Release drops buffers grown past limit, so that one large result does not
// pin its memory in a reused encoder.
func (e *ResultEncoder) Release(limit int) {
	if cap(e.rows) > limit {
		e.rows = nil
	}
	if cap(e.names) > limit {
		e.names = nil
	}
	for i := range e.cols {
		if cap(e.cols[i]) > limit {
			e.cols[i] = nil
		}
	}
}
