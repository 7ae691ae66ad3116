package wire

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/tinylib/msgp/msgp"
)

// Op is a request's operation.
type Op uint8

// The operations of protocol v1.
const (
	OpUnknown Op = iota
	OpPing
	OpHello
	OpQuery
	OpExec
	OpBegin
	OpCommit
	OpRollback
	OpBatch
	OpGet
	OpMultiGet
	OpScan
	OpPut
	OpDelete
	OpReadRows
	OpMutateRow
	OpIncrement
	OpCheckAndMutate
	OpHTTP
	OpJoin
	OpCausalToken
	OpCausalAfter
)

var opNames = [...]string{
	OpUnknown:  "",
	OpPing:     "ping",
	OpHello:    "hello",
	OpQuery:    "query",
	OpExec:     "exec",
	OpBegin:    "begin",
	OpCommit:   "commit",
	OpRollback: "rollback",
	OpBatch:    "batch",

	OpGet:            "get",
	OpMultiGet:       "multi_get",
	OpScan:           "scan",
	OpPut:            "put",
	OpDelete:         "delete",
	OpReadRows:       "read_rows",
	OpMutateRow:      "mutate_row",
	OpIncrement:      "increment",
	OpCheckAndMutate: "check_and_mutate",
	OpHTTP:           "http",
	OpJoin:           "join",
	OpCausalToken:    "causal_token",
	OpCausalAfter:    "causal_after",
}

// String returns the op's wire name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return ""
}

func parseOp(b []byte) Op {
	// A switch on string(b) does not allocate.
	switch string(b) {
	case "ping":
		return OpPing
	case "hello":
		return OpHello
	case "query":
		return OpQuery
	case "exec":
		return OpExec
	case "begin":
		return OpBegin
	case "commit":
		return OpCommit
	case "rollback":
		return OpRollback
	case "batch":
		return OpBatch
	case "get":
		return OpGet
	case "multi_get":
		return OpMultiGet
	case "scan":
		return OpScan
	case "put":
		return OpPut
	case "delete":
		return OpDelete
	case "read_rows":
		return OpReadRows
	case "mutate_row":
		return OpMutateRow
	case "increment":
		return OpIncrement
	case "check_and_mutate":
		return OpCheckAndMutate
	case "http":
		return OpHTTP
	case "join":
		return OpJoin
	case "causal_token":
		return OpCausalToken
	case "causal_after":
		return OpCausalAfter
	}
	return OpUnknown
}

// Request is one decoded request (or, inside a batch, one operation).
type Request struct {
	ID        uint32
	Op        Op
	OpName    string // the op as sent, kept only when unknown (for its error); see Name
	Backend   string
	SQL       string
	Params    []any // nil, bool, int64, uint64, float64, string, []byte
	Tx        uint64
	TimeoutMS uint32
	Ops       []Request
	Token     string

	// The key API (get, multi_get, scan, put, delete) and Bigtable's row
	// operations (read_rows, mutate_row, increment, check_and_mutate).
	Table     string
	Key       []any
	Keys      [][]any
	Columns   []string
	Prefix    []any
	Start     []any
	End       []any
	Limit     uint32
	Cursor    []byte
	Row       map[string]any
	Families  []string
	Latest    bool
	Mutations []Mutation
	IfTrue    []Mutation
	IfFalse   []Mutation
	Family    string
	Qualifier string
	Value     any // a scalar: check_and_mutate's expected value
	Delta     int64

	// Columnar asks for a query, scan or read_rows result in column-oriented
	// form (one array per column); join results always are.
	Columnar bool

	// CacheTTLMS, when positive, lets a query's result be answered from
	// tetherd's result cache and stored there for at most this many
	// milliseconds (docs/operations.md, "Result cache").
	CacheTTLMS int64

	// Versions asks, with CacheTTLMS, for the table versions a client's
	// local cache needs to keep the result ("versions" in the reply; see
	// docs/protocol.md, "Table versions").
	Versions bool

	// Primary asks a query or exec on a backend with replicas to run on its
	// primary, whatever it is (a framework's "use the write connection").
	Primary bool

	// Position is causal_after's: a position causal_token gave (on this
	// connection, another, or another tetherd), which the client's reads of
	// the backend must see.
	Position string

	// TimeFormat is how a query's DATETIME and TIMESTAMP values are written:
	// TimeFormatISO ("", the default) or TimeFormatSQL. Other values are
	// bad_request.
	TimeFormat string

	// http: a request to a configured upstream. Path is the path and query,
	// relative to the upstream's base URL.
	Method  string
	Path    string
	Headers map[string]string
	Body    []byte

	// join: Left produces rows; for each, the values of the On columns form
	// the key looked up (multi_get) in Right's table; Kind is "left" (the
	// default) or "inner"; OrderBy names output columns, "-" first for
	// descending.
	Left    *Request
	Right   *Request
	On      []string
	Kind    string
	OrderBy []string

	HasID bool // whether the map had an id key
}

// Mutation is one change to a Bigtable row, in mutate_row and check_and_mutate.
type Mutation struct {
	Op        string // set, delete_cells, delete_family, delete_row
	Family    string
	Qualifier string
	Value     any // str or bin
	Timestamp int64
}

// Name returns the op as sent: its name, or the unknown name given.
func (r *Request) Name() string {
	if r.Op != OpUnknown {
		return r.Op.String()
	}
	return r.OpName
}

// The time formats of a query's DATETIME and TIMESTAMP values (time_format).
const (
	// TimeFormatISO is ISO 8601, "2006-01-02T15:04:05[.ffffff]" ("Z" added
	// for a timestamp with time zone): the default.
	TimeFormatISO = "iso"
	// TimeFormatSQL is the databases' own text form, as PHP's mysqli, PDO and
	// pgsql return it: "2006-01-02 15:04:05[.ffffff]" ("+00" added for a
	// PostgreSQL timestamp with time zone, which tetherd reads in UTC).
	TimeFormatSQL = "sql"
)

// MaxCacheTTLMS bounds cache_ttl_ms: a day.
const MaxCacheTTLMS = 24 * 60 * 60 * 1000

// MaxPositionBytes bounds causal_after's position (a MariaDB GTID list of
// many replication domains stays far below it).
const MaxPositionBytes = 4096

// MaxBatchOps bounds the operations of one batch.
const MaxBatchOps = 1024

// RequestError is a request that could not be decoded.
//
// Fatal means the frame itself is broken (not a map, truncated, trailing
// bytes): the stream cannot be trusted and the connection should be closed.
// Otherwise the map was read whole and only its content is wrong; ID is the
// request id when it could be read.
type RequestError struct {
	Fatal bool
	ID    uint32
	Msg   string
}

func (e *RequestError) Error() string {
	if e.Fatal {
		return "malformed frame: " + e.Msg
	}
	return "bad request: " + e.Msg
}

// DecodeRequest decodes a frame payload into r. r is reset first, so one
// Request may be reused across calls. On error it returns a *RequestError.
func DecodeRequest(payload []byte, r *Request) error {
	*r = Request{}
	rest, err := decodeRequestMap(payload, r, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &RequestError{Fatal: true, Msg: fmt.Sprintf("%d bytes after the request map", len(rest))}
	}
	return nil
}

func decodeRequestMap(b []byte, r *Request, depth int) ([]byte, error) {
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return b, &RequestError{Fatal: true, Msg: "payload is not a map: " + describe(err)}
	}
	var bad string // first content error; decoding goes on to find the id
	fail := func(field string, err error) {
		if bad == "" {
			bad = field + ": " + describe(err)
		}
	}
	var seen keySet
	for i := uint32(0); i < n; i++ {
		var key []byte
		key, b, err = msgp.ReadMapKeyZC(b)
		if err != nil {
			return b, &RequestError{Fatal: true, Msg: "map key: " + describe(err)}
		}
		var v []byte // the value's bytes, to skip it after a type error
		v = b
		if seen.add(key) {
			// The last one winning would let a request say two things, and
			// an earlier value half-applied (an unknown op's name) linger.
			err = errors.New("given twice")
			fail(fmt.Sprintf("%q", key), err)
		} else {
			err = r.decodeField(key, &b, depth, fail)
			if re := (*RequestError)(nil); err != nil && errors.As(err, &re) && re.Fatal {
				return b, err // the frame is broken: nothing to skip to
			}
		}
		if err != nil {
			// Skip whatever the value was; if even that fails the frame is broken.
			if b, err = msgp.Skip(v); err != nil {
				return b, &RequestError{Fatal: true, Msg: "value of " + string(key) + ": " + describe(err)}
			}
		}
	}
	if bad != "" {
		return b, &RequestError{ID: r.ID, Msg: bad}
	}
	return b, nil
}

// keySet is the keys of one map seen so far; a request has a few, so a
// scan of a small array beats a map.
type keySet struct {
	few  [16][]byte
	n    int
	many map[string]struct{}
}

// add records key and reports whether it was there already.
func (s *keySet) add(key []byte) bool {
	for _, k := range s.few[:s.n] {
		if string(k) == string(key) {
			return true
		}
	}
	if s.many != nil {
		if _, ok := s.many[string(key)]; ok {
			return true
		}
		s.many[string(key)] = struct{}{}
		return false
	}
	if s.n < len(s.few) {
		s.few[s.n] = key
		s.n++
		return false
	}
	s.many = make(map[string]struct{})
	s.many[string(key)] = struct{}{}
	return false
}

// decodeField decodes the value of one field of a request map from *bp
// into r. A value of the wrong type is reported to fail and returned, for
// the caller to skip; a broken frame is returned as a fatal *RequestError.
func (r *Request) decodeField(key []byte, bp *[]byte, depth int, fail func(string, error)) (err error) {
	b := *bp
	defer func() { *bp = b }()
	switch string(key) {
	case "id":
		var id uint64
		id, b, err = readUint(b)
		if err == nil && (id == 0 || id > math.MaxUint32) {
			err = errors.New("must be between 1 and 4294967295")
		}
		if err == nil {
			r.ID, r.HasID = uint32(id), true
		} else {
			fail("id", err)
		}
	case "op":
		var s []byte
		s, b, err = msgp.ReadStringZC(b)
		if err == nil {
			// The name is kept only for the error of an op not known.
			if r.Op = parseOp(s); r.Op == OpUnknown {
				r.OpName = string(s)
			}
		} else {
			fail("op", err)
		}
	case "backend":
		r.Backend, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("backend", err)
		}
	case "sql":
		r.SQL, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("sql", err)
		}
	case "params":
		r.Params, b, err = readParams(b, r.Params)
		if err != nil {
			fail("params", err)
		}
	case "tx":
		r.Tx, b, err = readUint(b)
		if err != nil {
			fail("tx", err)
		}
	case "timeout_ms":
		var t uint64
		t, b, err = readUint(b)
		if err == nil && t > math.MaxUint32 {
			err = errors.New("too large")
		}
		if err == nil {
			r.TimeoutMS = uint32(t)
		} else {
			fail("timeout_ms", err)
		}
	case "ops":
		if depth > 0 {
			err = errors.New("a batch operation cannot hold a batch")
			fail("ops", err)
			break
		}
		r.Ops, b, err = readOps(b, depth)
		if err != nil {
			var re *RequestError
			if errors.As(err, &re) && re.Fatal {
				return err
			}
			fail("ops", err)
		}
	case "token":
		r.Token, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("token", err)
		}
	case "table":
		r.Table, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("table", err)
		}
	case "key":
		r.Key, b, err = readParams(b, nil)
		if err != nil {
			fail("key", err)
		}
	case "keys":
		r.Keys, b, err = readKeys(b)
		if err != nil {
			fail("keys", err)
		}
	case "columns":
		r.Columns, b, err = readStrings(b)
		if err != nil {
			fail("columns", err)
		}
	case "families":
		r.Families, b, err = readStrings(b)
		if err != nil {
			fail("families", err)
		}
	case "prefix":
		r.Prefix, b, err = readParams(b, nil)
		if err != nil {
			fail("prefix", err)
		}
	case "start":
		r.Start, b, err = readParams(b, nil)
		if err != nil {
			fail("start", err)
		}
	case "end":
		r.End, b, err = readParams(b, nil)
		if err != nil {
			fail("end", err)
		}
	case "limit":
		var l uint64
		l, b, err = readUint(b)
		if err == nil && l > math.MaxUint32 {
			err = errors.New("too large")
		}
		if err == nil {
			r.Limit = uint32(l)
		} else {
			fail("limit", err)
		}
	case "cursor":
		r.Cursor, b, err = readBytes(b)
		if err != nil {
			fail("cursor", err)
		}
	case "row":
		r.Row, b, err = readRow(b)
		if err != nil {
			fail("row", err)
		}
	case "latest":
		r.Latest, b, err = msgp.ReadBoolBytes(b)
		if err != nil {
			fail("latest", err)
		}
	case "mutations":
		r.Mutations, b, err = readMutations(b)
		if err != nil {
			fail("mutations", err)
		}
	case "if_true":
		r.IfTrue, b, err = readMutations(b)
		if err != nil {
			fail("if_true", err)
		}
	case "if_false":
		r.IfFalse, b, err = readMutations(b)
		if err != nil {
			fail("if_false", err)
		}
	case "family":
		r.Family, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("family", err)
		}
	case "qualifier":
		r.Qualifier, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("qualifier", err)
		}
	case "value":
		var vs []any
		vs, b, err = readScalar(b, nil)
		if err == nil {
			r.Value = vs[0]
		} else {
			fail("value", err)
		}
	case "delta":
		r.Delta, b, err = msgp.ReadInt64Bytes(b)
		if err != nil {
			fail("delta", err)
		}
	case "columnar":
		r.Columnar, b, err = msgp.ReadBoolBytes(b)
		if err != nil {
			fail("columnar", err)
		}
	case "cache_ttl_ms":
		r.CacheTTLMS, b, err = msgp.ReadInt64Bytes(b)
		if err != nil {
			fail("cache_ttl_ms", err)
		} else if r.CacheTTLMS < 0 || r.CacheTTLMS > MaxCacheTTLMS {
			fail("cache_ttl_ms", fmt.Errorf("must be between 0 and %d (a day), got %d", MaxCacheTTLMS, r.CacheTTLMS))
		}
	case "versions":
		r.Versions, b, err = msgp.ReadBoolBytes(b)
		if err != nil {
			fail("versions", err)
		}
	case "primary":
		r.Primary, b, err = msgp.ReadBoolBytes(b)
		if err != nil {
			fail("primary", err)
		}
	case "position":
		r.Position, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("position", err)
		} else if len(r.Position) > MaxPositionBytes {
			fail("position", fmt.Errorf("%d bytes, more than %d", len(r.Position), MaxPositionBytes))
		}
	case "time_format":
		r.TimeFormat, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("time_format", err)
		} else if r.TimeFormat != "" && r.TimeFormat != TimeFormatISO && r.TimeFormat != TimeFormatSQL {
			fail("time_format", fmt.Errorf("%q is not %q or %q", r.TimeFormat, TimeFormatISO, TimeFormatSQL))
		}
	case "method":
		r.Method, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("method", err)
		}
	case "path":
		r.Path, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("path", err)
		}
	case "headers":
		r.Headers, b, err = readHeaders(b)
		if err != nil {
			fail("headers", err)
		}
	case "body":
		r.Body, b, err = readBytes(b)
		if err != nil {
			fail("body", err)
		}
	case "left", "right":
		if depth > 1 {
			err = errors.New("a join side cannot hold a join")
			fail(string(key), err)
			break
		}
		if t := msgp.NextType(b); t != msgp.MapType {
			// Content, not framing: answered bad_request, the connection kept.
			err = fmt.Errorf("want a map, got %s", t)
			fail(string(key), err)
			break
		}
		side := &Request{}
		b, err = decodeRequestMap(b, side, depth+2)
		if err != nil {
			var re *RequestError
			if errors.As(err, &re) && re.Fatal {
				return err
			}
			if errors.As(err, &re) {
				err = errors.New(re.Msg)
			}
			fail(string(key), err)
			break
		}
		if key[0] == 'l' {
			r.Left = side
		} else {
			r.Right = side
		}
	case "on":
		r.On, b, err = readStrings(b)
		if err != nil {
			fail("on", err)
		}
	case "kind":
		r.Kind, b, err = msgp.ReadStringBytes(b)
		if err != nil {
			fail("kind", err)
		}
	case "order_by":
		r.OrderBy, b, err = readStrings(b)
		if err != nil {
			fail("order_by", err)
		}
	default:
		err = errors.New("unknown field")
		fail(fmt.Sprintf("%q", key), err)
	}
	return err
}

func readOps(b []byte, depth int) ([]Request, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > MaxBatchOps {
		return nil, b, fmt.Errorf("%d operations, at most %d", n, MaxBatchOps)
	}
	ops := make([]Request, n)
	for i := range ops {
		if t := msgp.NextType(b); t != msgp.MapType {
			// Content, not framing: answered bad_request, the connection kept
			// (the caller skips the whole array).
			return nil, b, fmt.Errorf("op %d: want a map, got %s", i, t)
		}
		b, err = decodeRequestMap(b, &ops[i], depth+1)
		if err != nil {
			var re *RequestError
			if errors.As(err, &re) && !re.Fatal {
				return nil, b, fmt.Errorf("op %d: %s", i, re.Msg)
			}
			return nil, b, err
		}
	}
	return ops, b, nil
}

func readUint(b []byte) (uint64, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.UintType:
		return msgp.ReadUint64Bytes(b)
	case msgp.IntType:
		v, rest, err := msgp.ReadInt64Bytes(b)
		if err != nil {
			return 0, b, err
		}
		if v < 0 {
			return 0, b, errors.New("must not be negative")
		}
		return uint64(v), rest, nil
	default:
		return 0, b, fmt.Errorf("expected an integer, got %s", msgp.NextType(b))
	}
}

// readParams decodes an array of scalar values, reusing dst's storage.
func readParams(b []byte, dst []any) ([]any, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return dst, b, err
	}
	if dst == nil || cap(dst) < int(n) {
		if n > 65535 {
			return dst, b, fmt.Errorf("%d values, at most 65535", n)
		}
		dst = make([]any, 0, n)
	}
	dst = dst[:0]
	for i := uint32(0); i < n; i++ {
		if dst, b, err = readScalar(b, dst); err != nil {
			return dst, b, fmt.Errorf("value %d: %w", i+1, err)
		}
	}
	return dst, b, nil
}

// readScalar decodes one scalar and appends it to dst: nil, bool, int64
// (uint64 above MaxInt64), float64, string or []byte.
func readScalar(b []byte, dst []any) ([]any, []byte, error) {
	var v any
	var err error
	switch t := msgp.NextType(b); t {
	case msgp.NilType:
		b, err = msgp.ReadNilBytes(b)
	case msgp.BoolType:
		v, b, err = msgp.ReadBoolBytes(b)
	case msgp.IntType:
		v, b, err = msgp.ReadInt64Bytes(b)
	case msgp.UintType:
		var u uint64
		u, b, err = msgp.ReadUint64Bytes(b)
		if u <= math.MaxInt64 {
			v = int64(u) // drivers take int64 best; only huge values stay unsigned
		} else {
			v = u
		}
	case msgp.Float32Type:
		var f float32
		f, b, err = msgp.ReadFloat32Bytes(b)
		v = float64(f)
	case msgp.Float64Type:
		v, b, err = msgp.ReadFloat64Bytes(b)
	case msgp.StrType:
		v, b, err = msgp.ReadStringBytes(b)
	case msgp.BinType:
		v, b, err = msgp.ReadBytesBytes(b, nil)
	default:
		return dst, b, fmt.Errorf("%s is not a scalar value", t)
	}
	if err != nil {
		return dst, b, errors.New(describe(err))
	}
	return append(dst, v), b, nil
}

func readKeys(b []byte) ([][]any, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > 65535 {
		return nil, b, fmt.Errorf("%d keys, at most 65535", n)
	}
	keys := make([][]any, n)
	for i := range keys {
		if keys[i], b, err = readParams(b, nil); err != nil {
			return nil, b, fmt.Errorf("key %d: %w", i+1, err)
		}
	}
	return keys, b, nil
}

func readStrings(b []byte) ([]string, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > 65535 {
		return nil, b, fmt.Errorf("%d names, at most 65535", n)
	}
	out := make([]string, n)
	for i := range out {
		if out[i], b, err = msgp.ReadStringBytes(b); err != nil {
			return nil, b, fmt.Errorf("name %d: %s", i+1, describe(err))
		}
	}
	return out, b, nil
}

// readBytes reads a str or bin as bytes.
func readBytes(b []byte) ([]byte, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.BinType:
		return msgp.ReadBytesBytes(b, nil)
	case msgp.StrType:
		s, rest, err := msgp.ReadStringZC(b)
		return append([]byte(nil), s...), rest, err
	}
	return nil, b, fmt.Errorf("expected bytes, got %s", msgp.NextType(b))
}

func readRow(b []byte) (map[string]any, []byte, error) {
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > 65535 {
		return nil, b, fmt.Errorf("%d columns, at most 65535", n)
	}
	row := make(map[string]any, n)
	var one []any
	for i := uint32(0); i < n; i++ {
		var k string
		if k, b, err = msgp.ReadStringBytes(b); err != nil {
			return nil, b, fmt.Errorf("column name: %s", describe(err))
		}
		if one, b, err = readScalar(b, one[:0]); err != nil {
			return nil, b, fmt.Errorf("column %q: %w", k, err)
		}
		row[k] = one[0]
	}
	return row, b, nil
}

func readHeaders(b []byte) (map[string]string, []byte, error) {
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > 1024 {
		return nil, b, fmt.Errorf("%d headers, at most 1024", n)
	}
	h := make(map[string]string, n)
	for i := uint32(0); i < n; i++ {
		var k, v string
		if k, b, err = msgp.ReadStringBytes(b); err != nil {
			return nil, b, fmt.Errorf("header name: %s", describe(err))
		}
		if v, b, err = msgp.ReadStringBytes(b); err != nil {
			return nil, b, fmt.Errorf("header %q: %s", k, describe(err))
		}
		h[k] = v
	}
	return h, b, nil
}

func readMutations(b []byte) ([]Mutation, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n > 100000 {
		return nil, b, fmt.Errorf("%d mutations, at most 100000", n)
	}
	out := make([]Mutation, n)
	for i := range out {
		var fields uint32
		if fields, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, b, fmt.Errorf("mutation %d: %s", i+1, describe(err))
		}
		m := &out[i]
		for j := uint32(0); j < fields; j++ {
			var k []byte
			if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
				return nil, b, err
			}
			switch string(k) {
			case "op":
				m.Op, b, err = msgp.ReadStringBytes(b)
			case "family":
				m.Family, b, err = msgp.ReadStringBytes(b)
			case "qualifier":
				m.Qualifier, b, err = msgp.ReadStringBytes(b)
			case "value":
				var one []any
				if one, b, err = readScalar(b, nil); err == nil {
					m.Value = one[0]
				}
			case "ts":
				m.Timestamp, b, err = msgp.ReadInt64Bytes(b)
			default:
				err = fmt.Errorf("unknown field %q", k)
			}
			if err != nil {
				return nil, b, fmt.Errorf("mutation %d: %s: %v", i+1, k, err)
			}
		}
	}
	return out, b, nil
}

// describe shortens msgp's errors for messages that go to clients.
func describe(err error) string {
	switch {
	case errors.Is(err, msgp.ErrShortBytes):
		return "truncated"
	}
	var te msgp.TypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("expected %s, got %s", te.Method, te.Encoded)
	}
	return err.Error()
}

// AppendRequest appends r's payload (without the length prefix) to b, with keys
// in the order of docs/protocol.md and integers in their shortest form, as
// clients are expected to write them. Zero-valued fields are left out; a
// row's columns are written in sorted order.
func AppendRequest(b []byte, r *Request) []byte {
	var e reqEncoder
	e.field(r.HasID || r.ID != 0, "id", func(b []byte) []byte { return msgp.AppendUint64(b, uint64(r.ID)) })
	op := r.OpName
	if op == "" {
		op = r.Op.String()
	}
	e.str(op != "", "op", op) // a join's right side has none
	e.str(r.Backend != "", "backend", r.Backend)
	e.str(r.SQL != "", "sql", r.SQL)
	e.values(r.Params != nil, "params", r.Params)
	e.field(r.Tx != 0, "tx", func(b []byte) []byte { return msgp.AppendUint64(b, r.Tx) })
	e.field(r.TimeoutMS != 0, "timeout_ms", func(b []byte) []byte { return msgp.AppendUint64(b, uint64(r.TimeoutMS)) })
	e.field(r.Ops != nil, "ops", func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, uint32(len(r.Ops)))
		for i := range r.Ops {
			b = AppendRequest(b, &r.Ops[i])
		}
		return b
	})
	e.str(r.Token != "", "token", r.Token)
	e.str(r.Table != "", "table", r.Table)
	e.values(r.Key != nil, "key", r.Key)
	e.field(r.Keys != nil, "keys", func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, uint32(len(r.Keys)))
		for _, k := range r.Keys {
			b = appendValues(b, k)
		}
		return b
	})
	e.strs(r.Columns != nil, "columns", r.Columns)
	e.values(r.Prefix != nil, "prefix", r.Prefix)
	e.values(r.Start != nil, "start", r.Start)
	e.values(r.End != nil, "end", r.End)
	e.field(r.Limit != 0, "limit", func(b []byte) []byte { return msgp.AppendUint64(b, uint64(r.Limit)) })
	// As str: a PHP client sends back the cursor it got as a string, and ext-msgpack writes every string as str.
	e.field(r.Cursor != nil, "cursor", func(b []byte) []byte { return msgp.AppendStringFromBytes(b, r.Cursor) })
	e.field(r.Row != nil, "row", func(b []byte) []byte {
		names := make([]string, 0, len(r.Row))
		for k := range r.Row {
			names = append(names, k)
		}
		sort.Strings(names)
		b = msgp.AppendMapHeader(b, uint32(len(names)))
		for _, k := range names {
			b = AppendValue(msgp.AppendString(b, k), r.Row[k])
		}
		return b
	})
	e.strs(r.Families != nil, "families", r.Families)
	e.field(r.Latest, "latest", func(b []byte) []byte { return msgp.AppendBool(b, true) })
	e.mutations(r.Mutations != nil, "mutations", r.Mutations)
	e.mutations(r.IfTrue != nil, "if_true", r.IfTrue)
	e.mutations(r.IfFalse != nil, "if_false", r.IfFalse)
	e.str(r.Family != "", "family", r.Family)
	e.str(r.Qualifier != "", "qualifier", r.Qualifier)
	e.field(r.Value != nil, "value", func(b []byte) []byte { return AppendValue(b, r.Value) })
	e.field(r.Delta != 0, "delta", func(b []byte) []byte { return appendInt(b, r.Delta) })
	e.field(r.Columnar, "columnar", func(b []byte) []byte { return msgp.AppendBool(b, true) })
	e.str(r.TimeFormat != "", "time_format", r.TimeFormat)
	e.str(r.Position != "", "position", r.Position)
	e.field(r.Primary, "primary", func(b []byte) []byte { return msgp.AppendBool(b, true) })
	e.field(r.CacheTTLMS != 0, "cache_ttl_ms", func(b []byte) []byte { return appendInt(b, r.CacheTTLMS) })
	e.field(r.Versions, "versions", func(b []byte) []byte { return msgp.AppendBool(b, true) })
	e.str(r.Method != "", "method", r.Method)
	e.str(r.Path != "", "path", r.Path)
	e.field(r.Headers != nil, "headers", func(b []byte) []byte {
		names := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		b = msgp.AppendMapHeader(b, uint32(len(names)))
		for _, k := range names {
			b = msgp.AppendString(msgp.AppendString(b, k), r.Headers[k])
		}
		return b
	})
	// As str, as ext-msgpack writes a PHP string.
	e.field(r.Body != nil, "body", func(b []byte) []byte { return msgp.AppendStringFromBytes(b, r.Body) })
	e.field(r.Left != nil, "left", func(b []byte) []byte { return AppendRequest(b, r.Left) })
	e.field(r.Right != nil, "right", func(b []byte) []byte { return AppendRequest(b, r.Right) })
	e.strs(r.On != nil, "on", r.On)
	e.str(r.Kind != "", "kind", r.Kind)
	e.strs(r.OrderBy != nil, "order_by", r.OrderBy)
	return e.appendTo(b)
}

// reqEncoder collects a map's fields, to write the header with their count.
type reqEncoder struct {
	n    uint32
	body []byte
}

func (e *reqEncoder) field(present bool, key string, val func([]byte) []byte) {
	if !present {
		return
	}
	e.n++
	e.body = val(msgp.AppendString(e.body, key))
}

func (e *reqEncoder) str(present bool, key, v string) {
	e.field(present, key, func(b []byte) []byte { return msgp.AppendString(b, v) })
}

func (e *reqEncoder) strs(present bool, key string, v []string) {
	e.field(present, key, func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, uint32(len(v)))
		for _, s := range v {
			b = msgp.AppendString(b, s)
		}
		return b
	})
}

func (e *reqEncoder) values(present bool, key string, v []any) {
	e.field(present, key, func(b []byte) []byte { return appendValues(b, v) })
}

func (e *reqEncoder) mutations(present bool, key string, ms []Mutation) {
	e.field(present, key, func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, uint32(len(ms)))
		for _, m := range ms {
			var me reqEncoder
			me.str(true, "op", m.Op)
			me.str(m.Family != "", "family", m.Family)
			me.str(m.Qualifier != "", "qualifier", m.Qualifier)
			me.field(m.Value != nil, "value", func(b []byte) []byte { return AppendValue(b, m.Value) })
			me.field(m.Timestamp != 0, "ts", func(b []byte) []byte { return appendInt(b, m.Timestamp) })
			b = me.appendTo(b)
		}
		return b
	})
}

func (e *reqEncoder) appendTo(b []byte) []byte {
	return append(msgp.AppendMapHeader(b, e.n), e.body...)
}

func appendValues(b []byte, vs []any) []byte {
	b = msgp.AppendArrayHeader(b, uint32(len(vs)))
	for _, v := range vs {
		b = AppendValue(b, v)
	}
	return b
}
