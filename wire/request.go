package wire

import (
	"errors"
	"fmt"
	"math"

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
	}
	return OpUnknown
}

// Request is one decoded request (or, inside a batch, one operation).
type Request struct {
	ID        uint32
	Op        Op
	OpName    string // the op as sent, kept for the error message of an unknown op
	Backend   string
	SQL       string
	Params    []any // nil, bool, int64, uint64, float64, string, []byte
	Tx        uint64
	TimeoutMS uint32
	Ops       []Request
	Token     string

	HasID bool // whether the map had an id key
}

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
	for i := uint32(0); i < n; i++ {
		var key []byte
		key, b, err = msgp.ReadMapKeyZC(b)
		if err != nil {
			return b, &RequestError{Fatal: true, Msg: "map key: " + describe(err)}
		}
		var v []byte // the value's bytes, to skip it after a type error
		v = b
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
				r.Op = parseOp(s)
				r.OpName = string(s)
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
					return b, err
				}
				fail("ops", err)
			}
		case "token":
			r.Token, b, err = msgp.ReadStringBytes(b)
			if err != nil {
				fail("token", err)
			}
		default:
			err = errors.New("unknown field")
			fail(fmt.Sprintf("%q", key), err)
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

// readParams decodes an array of scalar parameters, reusing dst's storage.
func readParams(b []byte, dst []any) ([]any, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return dst, b, err
	}
	if dst == nil || cap(dst) < int(n) {
		if n > 65535 {
			return dst, b, fmt.Errorf("%d parameters, at most 65535", n)
		}
		dst = make([]any, 0, n)
	}
	dst = dst[:0]
	for i := uint32(0); i < n; i++ {
		var v any
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
			return dst, b, fmt.Errorf("parameter %d: %s is not a scalar value", i+1, t)
		}
		if err != nil {
			return dst, b, fmt.Errorf("parameter %d: %s", i+1, describe(err))
		}
		dst = append(dst, v)
	}
	return dst, b, nil
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
// clients are expected to write them. Zero-valued fields are left out.
func AppendRequest(b []byte, r *Request) []byte {
	n := uint32(0)
	for _, present := range []bool{r.HasID || r.ID != 0, true, r.Backend != "", r.SQL != "", r.Params != nil,
		r.Tx != 0, r.TimeoutMS != 0, r.Ops != nil, r.Token != ""} {
		if present {
			n++
		}
	}
	b = msgp.AppendMapHeader(b, n)
	if r.HasID || r.ID != 0 {
		b = msgp.AppendString(b, "id")
		b = msgp.AppendUint64(b, uint64(r.ID))
	}
	op := r.OpName
	if op == "" {
		op = r.Op.String()
	}
	b = msgp.AppendString(b, "op")
	b = msgp.AppendString(b, op)
	if r.Backend != "" {
		b = msgp.AppendString(b, "backend")
		b = msgp.AppendString(b, r.Backend)
	}
	if r.SQL != "" {
		b = msgp.AppendString(b, "sql")
		b = msgp.AppendString(b, r.SQL)
	}
	if r.Params != nil {
		b = msgp.AppendString(b, "params")
		b = msgp.AppendArrayHeader(b, uint32(len(r.Params)))
		for _, p := range r.Params {
			b = AppendValue(b, p)
		}
	}
	if r.Tx != 0 {
		b = msgp.AppendString(b, "tx")
		b = msgp.AppendUint64(b, r.Tx)
	}
	if r.TimeoutMS != 0 {
		b = msgp.AppendString(b, "timeout_ms")
		b = msgp.AppendUint64(b, uint64(r.TimeoutMS))
	}
	if r.Ops != nil {
		b = msgp.AppendString(b, "ops")
		b = msgp.AppendArrayHeader(b, uint32(len(r.Ops)))
		for i := range r.Ops {
			b = AppendRequest(b, &r.Ops[i])
		}
	}
	if r.Token != "" {
		b = msgp.AppendString(b, "token")
		b = msgp.AppendString(b, r.Token)
	}
	return b
}
