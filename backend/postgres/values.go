package postgres

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	tether "github.com/tether-php/tether"
)

// Values between PHP's loose types and PostgreSQL's, in the extended
// protocol. Each parameter goes in the format its inferred type takes best:
// bytea in binary (the bytes as they are: a PHP string holding binary data
// stays intact), everything else as text, which PostgreSQL's input functions
// parse (so an id sent as an int binds to a text column, and "1" or true to a
// boolean, as MySQL and SQLite take them). Results come in binary for the
// types whose binary form is fixed (integers, floats, booleans, bytea, dates
// and timestamps: no DateStyle or TimeZone setting changes them) and as text
// for the rest (numeric keeps its exact digits).
//
// Why by hand and not pgx's type map: the type map converts through a Go
// value per cell and a [][]byte per Bind; here each parameter is appended to
// the Bind message and each cell goes from the DataRow to the reply at once.

// Type OIDs used here (pg_type).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
)

// binaryResult reports whether a result column of type oid is asked for in
// binary format.
func binaryResult(oid uint32) bool {
	switch oid {
	case oidBool, oidBytea, oidInt8, oidInt2, oidInt4, oidOID, oidFloat4, oidFloat8, oidDate, oidTimestamp, oidTimestampTZ:
		return true
	}
	return false
}

// appendParam appends one parameter's value (int32 length, then bytes; -1 for
// NULL) for a parameter of type oid, and returns its format code.
func appendParam(b []byte, oid uint32, v any) ([]byte, int16, error) {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, math.MaxUint32), 0, nil
	}
	if oid == oidBytea {
		switch x := v.(type) {
		case []byte:
			return appendBytes(b, x), 1, nil
		case string:
			b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
			return append(b, x...), 1, nil
		}
	}
	lenAt := len(b)
	b = append(b, 0, 0, 0, 0)
	switch x := v.(type) {
	case bool:
		switch {
		case oid == oidBool && x:
			b = append(b, 't')
		case oid == oidBool:
			b = append(b, 'f')
		case x:
			b = append(b, '1')
		default:
			b = append(b, '0')
		}
	case int64:
		b = appendIntParam(b, oid, x)
	case int:
		b = appendIntParam(b, oid, int64(x))
	case int32:
		b = appendIntParam(b, oid, int64(x))
	case uint64:
		if oid == oidBool {
			b = appendBool(b, x != 0)
		} else {
			b = strconv.AppendUint(b, x, 10)
		}
	case float64:
		b = appendFloat(b, x, 64)
	case float32:
		b = appendFloat(b, float64(x), 32)
	case string:
		b = append(b, x...)
	case []byte:
		if x == nil {
			return binary.BigEndian.AppendUint32(b[:lenAt], math.MaxUint32), 0, nil
		}
		b = append(b, x...)
	default:
		return b[:lenAt], 0, fmt.Errorf("unsupported type %T", v)
	}
	binary.BigEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	return b, 0, nil
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, math.MaxUint32)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendIntParam(b []byte, oid uint32, v int64) []byte {
	if oid == oidBool {
		return appendBool(b, v != 0)
	}
	return strconv.AppendInt(b, v, 10)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 't')
	}
	return append(b, 'f')
}

func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// pgEpoch is PostgreSQL's zero date and time, 2000-01-01 00:00:00 UTC.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// pgEpochUnix is pgEpoch in Unix seconds.
const pgEpochUnix = 946684800

// Time layouts of the protocol's value mapping (docs/protocol.md).
const (
	layoutDate      = "2006-01-02"
	layoutDateTime  = "2006-01-02T15:04:05.999999"
	layoutTimestamp = time.RFC3339Nano
)

// decodeCell hands one cell of a DataRow to sink: v is its bytes in the
// format asked for (binary when binaryResult(oid)).
func decodeCell(sink tether.RowSink, oid uint32, bin bool, v, scratch []byte) ([]byte, error) {
	if !bin {
		sink.Text(v)
		return scratch, nil
	}
	switch oid {
	case oidBool:
		if len(v) != 1 {
			return scratch, errMalformed
		}
		sink.Bool(v[0] != 0)
	case oidBytea:
		sink.Bytes(v)
	case oidInt2:
		if len(v) != 2 {
			return scratch, errMalformed
		}
		sink.Int(int64(int16(binary.BigEndian.Uint16(v))))
	case oidInt4:
		if len(v) != 4 {
			return scratch, errMalformed
		}
		sink.Int(int64(int32(binary.BigEndian.Uint32(v))))
	case oidOID:
		if len(v) != 4 {
			return scratch, errMalformed
		}
		sink.Int(int64(binary.BigEndian.Uint32(v)))
	case oidInt8:
		if len(v) != 8 {
			return scratch, errMalformed
		}
		sink.Int(int64(binary.BigEndian.Uint64(v)))
	case oidFloat4:
		if len(v) != 4 {
			return scratch, errMalformed
		}
		sink.Float(float64(math.Float32frombits(binary.BigEndian.Uint32(v))))
	case oidFloat8:
		if len(v) != 8 {
			return scratch, errMalformed
		}
		sink.Float(math.Float64frombits(binary.BigEndian.Uint64(v)))
	case oidDate:
		if len(v) != 4 {
			return scratch, errMalformed
		}
		days := int32(binary.BigEndian.Uint32(v))
		switch days {
		case math.MaxInt32:
			scratch = append(scratch[:0], "infinity"...)
		case math.MinInt32:
			scratch = append(scratch[:0], "-infinity"...)
		default:
			scratch = pgEpoch.AddDate(0, 0, int(days)).AppendFormat(scratch[:0], layoutDate)
		}
		sink.Text(scratch)
	case oidTimestamp, oidTimestampTZ:
		if len(v) != 8 {
			return scratch, errMalformed
		}
		us := int64(binary.BigEndian.Uint64(v))
		switch us {
		case math.MaxInt64:
			scratch = append(scratch[:0], "infinity"...)
			sink.Text(scratch)
		case math.MinInt64:
			scratch = append(scratch[:0], "-infinity"...)
			sink.Text(scratch)
		default:
			t := time.Unix(pgEpochUnix+us/1e6, us%1e6*1000).UTC()
			layout := layoutDateTime
			if oid == oidTimestampTZ {
				layout = layoutTimestamp
			}
			scratch = t.AppendFormat(scratch[:0], layout)
			sink.DateTime(scratch)
		}
	default:
		sink.Text(v)
	}
	return scratch, nil
}
