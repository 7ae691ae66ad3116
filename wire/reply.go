package wire

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// Head starts a reply map. A top-level reply carries the request id; an element
// of a batch's results has no id (Nested).
type Head struct {
	ID     uint32
	Nested bool
	// Took, when positive, is the server's time for the request, sent as
	// "us" (microseconds, rounded up) in a top-level reply, so that a client
	// can tell its page's data time spent in tetherd and the backend from
	// the time on the way.
	Took time.Duration
}

func (h Head) open(b []byte, fields uint32) []byte {
	if h.Nested {
		if fields == 0 {
			// A batch element always has a field: ext-msgpack turns an empty
			// map into a PHP object, not an array.
			b = msgp.AppendMapHeader(b, 1)
			b = msgp.AppendString(b, "ok")
			return msgp.AppendBool(b, true)
		}
		return msgp.AppendMapHeader(b, fields)
	}
	if h.Took > 0 {
		b = msgp.AppendMapHeader(b, fields+2)
		b = msgp.AppendString(b, "id")
		b = msgp.AppendUint32(b, h.ID)
		b = msgp.AppendString(b, "us")
		return msgp.AppendUint64(b, uint64((h.Took+time.Microsecond-1)/time.Microsecond))
	}
	b = msgp.AppendMapHeader(b, fields+1)
	b = msgp.AppendString(b, "id")
	return msgp.AppendUint32(b, h.ID)
}

// AppendOK appends a reply with no result fields (ping, commit, rollback).
func AppendOK(b []byte, h Head) []byte { return h.open(b, 0) }

// AppendHello appends the reply to hello.
func AppendHello(b []byte, h Head) []byte {
	b = h.open(b, 2)
	b = msgp.AppendString(b, "server")
	b = msgp.AppendString(b, "tetherd")
	b = msgp.AppendString(b, "protocol")
	return msgp.AppendInt(b, Version)
}

// AppendTx appends the reply to begin.
func AppendTx(b []byte, h Head, tx uint64) []byte {
	b = h.open(b, 1)
	b = msgp.AppendString(b, "tx")
	return msgp.AppendUint64(b, tx)
}

// AppendPosition appends the reply to causal_token.
func AppendPosition(b []byte, h Head, pos string) []byte {
	b = h.open(b, 1)
	b = msgp.AppendString(b, "position")
	return msgp.AppendString(b, pos)
}

// AppendExec appends the reply to exec.
func AppendExec(b []byte, h Head, affected, insertID int64) []byte {
	b = h.open(b, 2)
	b = msgp.AppendString(b, "affected")
	b = appendInt(b, affected)
	b = msgp.AppendString(b, "insert_id")
	return appendInt(b, insertID)
}

// AppendRows appends the reply to query. Values must be of the kinds that
// AppendValue knows; it returns an error naming the first that is not.
func AppendRows(b []byte, h Head, columns []string, rows [][]any) ([]byte, error) {
	return AppendResult(b, h, columns, rows, nil)
}

// AppendResult appends a reply with rows and, when cursor is not nil, the
// cursor that resumes after them (scan, paged query). A nil row (a key that
// multi_get did not find) is written as nil.
func AppendResult(b []byte, h Head, columns []string, rows [][]any, cursor []byte) ([]byte, error) {
	fields := uint32(2)
	if cursor != nil {
		fields++
	}
	b = appendColumnNames(h.open(b, fields), columns)
	b = msgp.AppendString(b, "rows")
	b = msgp.AppendArrayHeader(b, uint32(len(rows)))
	for _, row := range rows {
		if row == nil {
			b = msgp.AppendNil(b)
			continue
		}
		b = msgp.AppendArrayHeader(b, uint32(len(row)))
		for _, v := range row {
			var ok bool
			if b, ok = appendValue(b, v); !ok {
				return b, fmt.Errorf("encode row: unsupported value type %T", v)
			}
		}
	}
	if cursor != nil {
		b = msgp.AppendString(b, "cursor")
		b = msgp.AppendBytes(b, cursor)
	}
	return b, nil
}

// AppendColumns appends a reply with rows in column-oriented form: `data`
// holds one array per column, each with `count` values, and `cursor` follows
// when not nil. It is the form of every join reply and of query, scan and
// read_rows when the request sets columnar: fewer, longer arrays, which a PHP
// client decodes with far fewer allocations. A nil row is written as nil in
// every column.
func AppendColumns(b []byte, h Head, columns []string, rows [][]any, cursor []byte) ([]byte, error) {
	fields := uint32(3)
	if cursor != nil {
		fields++
	}
	b = appendColumnNames(h.open(b, fields), columns)
	b = msgp.AppendString(b, "count")
	b = msgp.AppendUint32(b, uint32(len(rows)))
	b = msgp.AppendString(b, "data")
	b = msgp.AppendArrayHeader(b, uint32(len(columns)))
	for c := range columns {
		b = msgp.AppendArrayHeader(b, uint32(len(rows)))
		for i, row := range rows {
			if row == nil {
				b = msgp.AppendNil(b)
				continue
			}
			if c >= len(row) {
				return b, fmt.Errorf("encode columns: row %d has %d values for %d columns", i, len(row), len(columns))
			}
			var ok bool
			if b, ok = appendValue(b, row[c]); !ok {
				return b, fmt.Errorf("encode columns: unsupported value type %T", row[c])
			}
		}
	}
	if cursor != nil {
		b = msgp.AppendString(b, "cursor")
		b = msgp.AppendBytes(b, cursor)
	}
	return b, nil
}

// appendColumnNames appends the columns field that row and column-oriented
// replies share.
func appendColumnNames(b []byte, columns []string) []byte {
	b = msgp.AppendString(b, "columns")
	b = msgp.AppendArrayHeader(b, uint32(len(columns)))
	for _, c := range columns {
		b = msgp.AppendString(b, c)
	}
	return b
}

// AppendHTTP appends the reply to http: the upstream's status, its headers
// (lower-case names, sorted, each with its values in order) and its body as
// bin.
func AppendHTTP(b []byte, h Head, status int, header map[string][]string, body []byte) []byte {
	b = h.open(b, 3)
	b = msgp.AppendString(b, "status")
	b = appendInt(b, int64(status))
	b = msgp.AppendString(b, "headers")
	names := make([]string, 0, len(header))
	for k := range header {
		names = append(names, k)
	}
	sort.Strings(names)
	b = msgp.AppendMapHeader(b, uint32(len(names)))
	for _, k := range names {
		b = msgp.AppendString(b, k)
		b = msgp.AppendArrayHeader(b, uint32(len(header[k])))
		for _, v := range header[k] {
			b = msgp.AppendString(b, v)
		}
	}
	b = msgp.AppendString(b, "body")
	return msgp.AppendBytes(b, body)
}

// AppendError appends an error reply.
func AppendError(b []byte, h Head, code, message string, retry bool, backendCode string) []byte {
	b = h.open(b, 1)
	b = msgp.AppendString(b, "error")
	fields := uint32(3)
	if backendCode != "" {
		fields++
	}
	b = msgp.AppendMapHeader(b, fields)
	b = msgp.AppendString(b, "code")
	b = msgp.AppendString(b, code)
	b = msgp.AppendString(b, "message")
	b = msgp.AppendString(b, message)
	b = msgp.AppendString(b, "retry")
	b = msgp.AppendBool(b, retry)
	if backendCode != "" {
		b = msgp.AppendString(b, "backend_code")
		b = msgp.AppendString(b, backendCode)
	}
	return b
}

// AppendBatchHead appends the start of a batch reply; the n results follow,
// each appended with a Nested head.
func AppendBatchHead(b []byte, h Head, n int) []byte {
	b = h.open(b, 1)
	b = msgp.AppendString(b, "results")
	return msgp.AppendArrayHeader(b, uint32(n))
}

// AppendValue appends one scalar value: nil, bool, signed and unsigned integers
// (non-negative ones in their shortest unsigned form, as PHP writes them),
// floats (as float64), string (str), []byte (bin) and time.Time (RFC 3339 str).
// Other types are appended as nil.
func AppendValue(b []byte, v any) []byte {
	b, _ = appendValue(b, v)
	return b
}

// appendValue is AppendValue that also reports whether it knew v's type: one
// type switch per value on the path that encodes every row.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return msgp.AppendNil(b), true
	case bool:
		return msgp.AppendBool(b, x), true
	case int64:
		return appendInt(b, x), true
	case int:
		return appendInt(b, int64(x)), true
	case int32:
		return appendInt(b, int64(x)), true
	case uint64:
		return msgp.AppendUint64(b, x), true
	case float64:
		return msgp.AppendFloat64(b, x), true
	case float32:
		return msgp.AppendFloat64(b, float64(x)), true
	case string:
		return msgp.AppendString(b, x), true
	case []byte:
		return msgp.AppendBytes(b, x), true
	case time.Time:
		return msgp.AppendString(b, x.Format(time.RFC3339Nano)), true
	}
	return msgp.AppendNil(b), false
}

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return msgp.AppendUint64(b, uint64(v))
	}
	return msgp.AppendInt64(b, v)
}

// Reply is a decoded reply, for clients and tests.
type Reply struct {
	ID     uint32
	Fields map[string]any // every field but id, as msgp decodes them
}

// Error returns the reply's error map, or nil on success.
func (r *Reply) Error() map[string]any {
	e, _ := r.Fields["error"].(map[string]any)
	return e
}

// DecodeReply decodes a reply payload.
func DecodeReply(payload []byte) (*Reply, error) {
	v, rest, err := msgp.ReadIntfBytes(payload)
	if err != nil {
		return nil, fmt.Errorf("decode reply: %w", err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode reply: %d trailing bytes", len(rest))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode reply: payload is %T, not a map", v)
	}
	r := &Reply{Fields: m}
	if id, ok := m["id"]; ok {
		switch x := id.(type) {
		case uint64:
			if x <= math.MaxUint32 {
				r.ID = uint32(x)
			}
		case int64:
			if x >= 0 && x <= math.MaxUint32 {
				r.ID = uint32(x)
			}
		}
		delete(m, "id")
	}
	return r, nil
}

// AppendKey appends a key (a list of scalar values) as a MessagePack array,
// the form backends use for opaque scan cursors.
func AppendKey(b []byte, key []any) []byte { return appendValues(b, key) }

// ReadKey reads a key written by AppendKey.
func ReadKey(b []byte) ([]any, error) {
	key, rest, err := readParams(b, nil)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the key", len(rest))
	}
	return key, nil
}
