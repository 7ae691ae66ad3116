package cassandra

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"gopkg.in/inf.v0"

	tether "github.com/tether-php/tether"
)

// This file maps CQL values to the protocol's scalars and back
// (docs/cassandra.md, "Values").
//
// Reading, a cell is decoded from the bytes of the native protocol, so no
// value goes through reflection. Collections, tuples, user-defined types and
// vectors come back as one JSON text each, in the format of Cassandra's own
// toJson(); a client writes them back through fromJson(?), which the key API's
// Put does by itself.
//
// Writing, every parameter is a param: it learns the bind marker's type from
// the prepared statement and converts the loosely typed value a PHP client
// sends (an int for a text column, "1" for a boolean, a string for a blob).

// cell is a scan destination that decodes one value in place.
type cell struct {
	v   any
	raw bool // keep the bytes (an element of a tuple column, assembled later)
	typ gocql.TypeInfo
	buf []byte
	nul bool
}

// UnmarshalCQL implements gocql.Unmarshaler.
func (c *cell) UnmarshalCQL(info gocql.TypeInfo, data []byte) error {
	if c.raw {
		c.typ, c.nul = info, data == nil
		c.buf = append(c.buf[:0], data...)
		return nil
	}
	v, err := decode(info, data)
	c.v = v
	return err
}

// decode maps one CQL value to a protocol scalar.
func decode(info gocql.TypeInfo, data []byte) (any, error) {
	if data == nil {
		return nil, nil
	}
	switch info.Type() {
	case gocql.TypeAscii, gocql.TypeText, gocql.TypeVarchar:
		return string(data), nil
	case gocql.TypeBlob:
		return bytes.Clone(data), nil
	case gocql.TypeBoolean:
		if len(data) != 1 {
			return nil, badLength(info, data)
		}
		return data[0] != 0, nil
	case gocql.TypeTinyInt, gocql.TypeSmallInt, gocql.TypeInt, gocql.TypeBigInt, gocql.TypeCounter:
		return decodeInt(info, data)
	case gocql.TypeVarint:
		n := decodeVarint(data)
		if n.IsInt64() {
			return n.Int64(), nil
		}
		return n.String(), nil
	case gocql.TypeFloat:
		if len(data) != 4 {
			return nil, badLength(info, data)
		}
		return widen(math.Float32frombits(binary.BigEndian.Uint32(data))), nil
	case gocql.TypeDouble:
		if len(data) != 8 {
			return nil, badLength(info, data)
		}
		return math.Float64frombits(binary.BigEndian.Uint64(data)), nil
	}
	if s, err := text(info, data); err != nil || s != nil {
		if err != nil {
			return nil, err
		}
		return *s, nil
	}
	switch info.Type() {
	case gocql.TypeList, gocql.TypeSet, gocql.TypeMap, gocql.TypeUDT, gocql.TypeTuple:
		b, err := appendJSON(nil, info, data)
		return string(b), err
	}
	if _, ok := info.(gocql.VectorType); ok {
		b, err := appendJSON(nil, info, data)
		return string(b), err
	}
	// A custom type: its serialized bytes, as Cassandra would show them.
	return bytes.Clone(data), nil
}

// text returns the text form of the types that travel as strings: decimal,
// timestamp, date, time, uuid, timeuuid, inet and duration; nil for others.
func text(info gocql.TypeInfo, data []byte) (*string, error) {
	var s string
	switch info.Type() {
	case gocql.TypeDecimal:
		if len(data) < 4 {
			return nil, badLength(info, data)
		}
		scale := int32(binary.BigEndian.Uint32(data))
		s = inf.NewDecBig(decodeVarint(data[4:]), inf.Scale(scale)).String()
	case gocql.TypeTimestamp:
		if len(data) != 8 {
			return nil, badLength(info, data)
		}
		s = time.UnixMilli(int64(binary.BigEndian.Uint64(data))).UTC().Format(timestampLayout)
	case gocql.TypeDate:
		if len(data) != 4 {
			return nil, badLength(info, data)
		}
		days := int64(binary.BigEndian.Uint32(data)) - 1<<31
		s = time.Unix(days*86400, 0).UTC().Format(time.DateOnly)
	case gocql.TypeTime:
		if len(data) != 8 {
			return nil, badLength(info, data)
		}
		s = formatTime(int64(binary.BigEndian.Uint64(data)))
	case gocql.TypeUUID, gocql.TypeTimeUUID:
		if len(data) != 16 {
			return nil, badLength(info, data)
		}
		s = gocql.UUID(data).String()
	case gocql.TypeInet:
		if len(data) != 4 && len(data) != 16 {
			return nil, badLength(info, data)
		}
		s = net.IP(data).String()
	case gocql.TypeDuration:
		var d gocql.Duration
		if err := gocql.Unmarshal(info, data, &d); err != nil {
			return nil, err
		}
		s = formatDuration(d)
	default:
		return nil, nil
	}
	return &s, nil
}

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func badLength(info gocql.TypeInfo, data []byte) error {
	return fmt.Errorf("cassandra: %d bytes for a %s value", len(data), typeName(info))
}

func decodeInt(info gocql.TypeInfo, data []byte) (any, error) {
	switch len(data) {
	case 1:
		return int64(int8(data[0])), nil
	case 2:
		return int64(int16(binary.BigEndian.Uint16(data))), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(data))), nil
	case 8:
		return int64(binary.BigEndian.Uint64(data)), nil
	}
	return nil, badLength(info, data)
}

// decodeVarint reads a big-endian two's complement integer.
func decodeVarint(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return n
}

// widen turns a float into a double through its shortest decimal form, so
// that a float 1.1 reads 1.1 and not 1.100000023841858.
func widen(f float32) float64 {
	d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return d
}

// formatTime formats nanoseconds since midnight as HH:MM:SS.fffffffff.
func formatTime(ns int64) string {
	return fmt.Sprintf("%02d:%02d:%02d.%09d", ns/int64(time.Hour), ns/int64(time.Minute)%60, ns/int64(time.Second)%60, ns%int64(time.Second))
}

// formatDuration formats a CQL duration in ISO 8601 (P1Y2M3DT4H5M6.000000007S),
// which Cassandra reads back. Its three parts always share one sign.
func formatDuration(d gocql.Duration) string {
	var b strings.Builder
	months, days, ns := int64(d.Months), int64(d.Days), d.Nanoseconds
	if months < 0 || days < 0 || ns < 0 {
		b.WriteByte('-')
		months, days, ns = -months, -days, -ns
	}
	b.WriteByte('P')
	if months/12 > 0 {
		fmt.Fprintf(&b, "%dY", months/12)
	}
	if months%12 > 0 {
		fmt.Fprintf(&b, "%dM", months%12)
	}
	if days > 0 {
		fmt.Fprintf(&b, "%dD", days)
	}
	if ns > 0 || months == 0 && days == 0 {
		b.WriteByte('T')
		h, m := ns/int64(time.Hour), ns/int64(time.Minute)%60
		s, frac := ns/int64(time.Second)%60, ns%int64(time.Second)
		if h > 0 {
			fmt.Fprintf(&b, "%dH", h)
		}
		if m > 0 {
			fmt.Fprintf(&b, "%dM", m)
		}
		if s > 0 || frac > 0 || h == 0 && m == 0 {
			fmt.Fprintf(&b, "%d", s)
			if frac > 0 {
				b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", frac), "0"))
			}
			b.WriteByte('S')
		}
	}
	return b.String()
}

// appendJSON appends the JSON form of a value as Cassandra's toJson() writes
// it: collections as arrays and objects (map keys as strings, in the map's
// order), blobs as "0x..." strings, numbers as numbers, everything else as
// the string decode returns.
func appendJSON(b []byte, info gocql.TypeInfo, data []byte) ([]byte, error) {
	if data == nil {
		return append(b, "null"...), nil
	}
	switch t := info.(type) {
	case gocql.CollectionType:
		if t.Type() == gocql.TypeMap {
			return appendMap(b, t, data)
		}
		return appendElems(b, '[', ']', data, -1, func(int) gocql.TypeInfo { return t.Elem })
	case gocql.TupleTypeInfo:
		return appendElems(b, '[', ']', data, len(t.Elems), func(i int) gocql.TypeInfo { return t.Elems[i] })
	case gocql.UDTTypeInfo:
		return appendUDT(b, t, data)
	case gocql.VectorType:
		return appendVector(b, t, data)
	}
	v, err := decode(info, data)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		switch info.Type() {
		case gocql.TypeDecimal, gocql.TypeVarint:
			return append(b, x...), nil // exact digits, as a JSON number
		}
		return strconv.AppendQuote(b, x), nil
	case []byte:
		b = append(b, `"0x`...)
		b = hex.AppendEncode(b, x)
		return append(b, '"'), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.AppendQuote(b, strconv.FormatFloat(x, 'g', -1, 64)), nil
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	}
	return nil, fmt.Errorf("cassandra: no JSON form for %T", v)
}

// appendElems appends a list, set or tuple: an int count (a tuple has none and
// n elements), then each element as [bytes].
func appendElems(b []byte, open, closing byte, data []byte, n int, elem func(int) gocql.TypeInfo) ([]byte, error) {
	if n < 0 {
		var err error
		if n, data, err = readCount(data); err != nil {
			return nil, err
		}
	}
	b = append(b, open)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		var p []byte
		var err error
		if len(data) > 0 { // a tuple may end early: the rest are null
			if p, data, err = readBytes(data); err != nil {
				return nil, err
			}
		}
		if b, err = appendJSON(b, elem(i), p); err != nil {
			return nil, err
		}
	}
	return append(b, closing), nil
}

func appendMap(b []byte, t gocql.CollectionType, data []byte) ([]byte, error) {
	n, data, err := readCount(data)
	if err != nil {
		return nil, err
	}
	b = append(b, '{')
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		var k, v []byte
		if k, data, err = readBytes(data); err != nil {
			return nil, err
		}
		if v, data, err = readBytes(data); err != nil {
			return nil, err
		}
		// A key is a JSON string: a text key as it is, any other the text of its JSON.
		kj, err := appendJSON(nil, t.Key, k)
		if err != nil {
			return nil, err
		}
		if len(kj) > 0 && kj[0] == '"' {
			b = append(b, kj...)
		} else {
			b = strconv.AppendQuote(b, string(kj))
		}
		b = append(b, ':')
		if b, err = appendJSON(b, t.Elem, v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendUDT(b []byte, t gocql.UDTTypeInfo, data []byte) ([]byte, error) {
	b = append(b, '{')
	for i, f := range t.Elements {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.Name)
		b = append(b, ':')
		var p []byte
		var err error
		if len(data) > 0 { // fields added after the value was written are absent: null
			if p, data, err = readBytes(data); err != nil {
				return nil, err
			}
		}
		if b, err = appendJSON(b, f.Type, p); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendVector appends a vector: fixed-size elements back to back, or each
// prefixed by its unsigned vint length (the driver's rule, vector.go).
func appendVector(b []byte, t gocql.VectorType, data []byte) ([]byte, error) {
	size := -1
	if fixedSize(t.SubType) && t.Dimensions > 0 {
		size = len(data) / t.Dimensions
	}
	b = append(b, '[')
	for i := 0; i < t.Dimensions; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		n := size
		if n < 0 {
			l, w := readUvarint(data)
			if w == 0 {
				return nil, errors.New("cassandra: truncated vector")
			}
			n, data = int(l), data[w:]
		}
		if n > len(data) {
			return nil, errors.New("cassandra: truncated vector")
		}
		var err error
		if b, err = appendJSON(b, t.SubType, data[:n:n]); err != nil {
			return nil, err
		}
		data = data[n:]
	}
	return append(b, ']'), nil
}

func fixedSize(t gocql.TypeInfo) bool {
	switch t.Type() {
	case gocql.TypeBigInt, gocql.TypeBoolean, gocql.TypeTimestamp, gocql.TypeDouble, gocql.TypeFloat,
		gocql.TypeInt, gocql.TypeTimeUUID, gocql.TypeUUID:
		return true
	}
	if v, ok := t.(gocql.VectorType); ok {
		return fixedSize(v.SubType)
	}
	return false
}

// readUvarint reads Cassandra's unsigned vint: the count of leading one bits
// of the first byte is the number of extra bytes. It returns 0 bytes read
// when data is too short.
func readUvarint(data []byte) (uint64, int) {
	if len(data) == 0 {
		return 0, 0
	}
	extra := bits.LeadingZeros8(^data[0])
	if len(data) < extra+1 {
		return 0, 0
	}
	v := uint64(data[0] & (0xff >> extra))
	for i := 1; i <= extra; i++ {
		v = v<<8 | uint64(data[i])
	}
	return v, extra + 1
}

func readCount(data []byte) (int, []byte, error) {
	if len(data) < 4 {
		return 0, nil, errors.New("cassandra: truncated collection")
	}
	n := int(int32(binary.BigEndian.Uint32(data)))
	if n < 0 || n > len(data) {
		return 0, nil, errors.New("cassandra: bad collection size")
	}
	return n, data[4:], nil
}

// readBytes reads one [bytes]: an int length (negative: null), then the bytes.
func readBytes(data []byte) (p, rest []byte, err error) {
	if len(data) < 4 {
		return nil, nil, errors.New("cassandra: truncated collection")
	}
	n := int(int32(binary.BigEndian.Uint32(data)))
	data = data[4:]
	if n < 0 {
		return nil, data, nil
	}
	if n > len(data) {
		return nil, nil, errors.New("cassandra: truncated collection")
	}
	return data[:n:n], data[n:], nil
}

// typeName is a type's CQL name, for messages.
func typeName(info gocql.TypeInfo) string {
	if s, ok := info.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("type 0x%04x", int(info.Type()))
}

// ---------------------------------------------------------------------------
// Parameters

// param is a statement parameter (nil, bool, int64, uint64, float64, string or
// []byte) that converts itself to the type of its bind marker.
type param struct {
	v        any
	name     string // the column, in the key API: for messages
	maxBytes int    // largest string or []byte accepted
}

// MarshalCQL implements gocql.Marshaler. Its errors are *tether.Error:
// bad_request when the value does not convert, too_large when it is over
// max_value_bytes.
func (p param) MarshalCQL(info gocql.TypeInfo) ([]byte, error) {
	if p.v == nil {
		return nil, nil
	}
	if n := byteLen(p.v); p.maxBytes > 0 && n > p.maxBytes {
		return nil, &tether.Error{Code: tether.CodeTooLarge,
			Message: fmt.Sprintf("cassandra: %svalue of %d bytes is over max_value_bytes (%d)", p.label(), n, p.maxBytes)}
	}
	v, err := convert(info, p.v)
	if err == nil {
		var b []byte
		if b, err = gocql.Marshal(info, v); err == nil {
			return b, nil
		}
	}
	return nil, &tether.Error{Code: tether.CodeBadRequest, Err: err,
		Message: fmt.Sprintf("cassandra: cannot bind %s%s to %s: %v", p.label(), describe(p.v), typeName(info), err)}
}

func (p param) label() string {
	if p.name == "" {
		return ""
	}
	return "column " + p.name + ": "
}

func byteLen(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	}
	return 0
}

// describe names a parameter for a message without quoting all of it.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 || !utf8.ValidString(x) {
			return fmt.Sprintf("a string of %d bytes", len(x))
		}
		return strconv.Quote(x)
	case []byte:
		return fmt.Sprintf("%d bytes", len(x))
	}
	return fmt.Sprintf("%T %v", v, v)
}

var (
	errNotInteger = errors.New("not an integer")
	errNoJSON     = errors.New("bind collections, tuples and user-defined types as JSON text with fromJson(?)")
)

// convert maps a protocol scalar to a Go value the driver marshals to info.
func convert(info gocql.TypeInfo, v any) (any, error) {
	switch info.Type() {
	case gocql.TypeAscii, gocql.TypeText, gocql.TypeVarchar:
		switch x := v.(type) {
		case string, []byte:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case uint64:
			return strconv.FormatUint(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		case bool:
			if x {
				return "1", nil
			}
			return "0", nil
		}
	case gocql.TypeBlob:
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return x, nil
		}
	case gocql.TypeBoolean:
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		case uint64:
			return x != 0, nil
		case string:
			return strconv.ParseBool(x)
		}
	case gocql.TypeTinyInt, gocql.TypeSmallInt, gocql.TypeInt, gocql.TypeBigInt, gocql.TypeCounter:
		return toInt64(v)
	case gocql.TypeVarint:
		return toBigInt(v)
	case gocql.TypeFloat:
		f, err := toFloat(v)
		if err == nil && !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
			return nil, errors.New("out of range for a float")
		}
		return float32(f), err
	case gocql.TypeDouble:
		return toFloat(v)
	case gocql.TypeDecimal:
		d, err := toDecimal(v)
		if err != nil {
			return nil, err
		}
		return *d, nil
	case gocql.TypeTimestamp:
		switch x := v.(type) {
		case int64: // milliseconds since the epoch
			return x, nil
		case string:
			t, err := parseTimestamp(x)
			return t.UnixMilli(), err
		}
	case gocql.TypeDate:
		if s, ok := v.(string); ok {
			t, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return nil, errors.New("want a date as YYYY-MM-DD")
			}
			return t, nil
		}
	case gocql.TypeTime:
		switch x := v.(type) {
		case int64: // nanoseconds since midnight
			return time.Duration(x), nil
		case string:
			return parseTime(x)
		}
	case gocql.TypeUUID, gocql.TypeTimeUUID:
		switch x := v.(type) {
		case string:
			return gocql.ParseUUID(x)
		case []byte:
			return gocql.UUIDFromBytes(x)
		}
	case gocql.TypeInet:
		switch x := v.(type) {
		case string:
			if ip := net.ParseIP(x); ip != nil {
				return ip, nil
			}
			return nil, errors.New("not an IP address")
		case []byte:
			if len(x) == 4 || len(x) == 16 {
				return net.IP(x), nil
			}
		}
	case gocql.TypeDuration:
		switch x := v.(type) {
		case int64: // nanoseconds
			return gocql.Duration{Nanoseconds: x}, nil
		case string:
			return parseDuration(x)
		}
	case gocql.TypeList, gocql.TypeSet, gocql.TypeMap, gocql.TypeUDT, gocql.TypeTuple:
		return nil, errNoJSON
	default:
		if _, ok := info.(gocql.VectorType); ok {
			return nil, errNoJSON
		}
		if b, ok := v.([]byte); ok { // a custom type's serialized form
			return b, nil
		}
	}
	return nil, fmt.Errorf("a %T does not convert", v)
}

func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, errors.New("out of range")
		}
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, errNotInteger
		}
		return int64(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, errNotInteger
		}
		return n, nil
	}
	return 0, fmt.Errorf("a %T does not convert", v)
}

func toBigInt(v any) (*big.Int, error) {
	switch x := v.(type) {
	case uint64:
		return new(big.Int).SetUint64(x), nil
	case string:
		n, ok := new(big.Int).SetString(strings.TrimSpace(x), 10)
		if !ok {
			return nil, errNotInteger
		}
		return n, nil
	}
	n, err := toInt64(v)
	if err != nil {
		return nil, err
	}
	return big.NewInt(n), nil
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, errors.New("not a number")
		}
		return f, nil
	}
	return 0, fmt.Errorf("a %T does not convert", v)
}

// toDecimal converts exactly: a string's digits are kept as written, a float
// goes through its shortest decimal form.
func toDecimal(v any) (*inf.Dec, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case int64:
		return inf.NewDec(x, 0), nil
	case uint64:
		return inf.NewDecBig(new(big.Int).SetUint64(x), 0), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("not a finite number")
		}
		s = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return nil, fmt.Errorf("a %T does not convert", v)
	}
	return parseDecimal(s)
}

// parseDecimal reads [-+]digits[.digits][e[-+]digits].
func parseDecimal(s string) (*inf.Dec, error) {
	bad := errors.New("not a decimal number")
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return nil, bad
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	sign := ""
	if digits != "" && (digits[0] == '-' || digits[0] == '+') {
		sign, digits = digits[:1], digits[1:]
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return nil, bad
	}
	n, ok := new(big.Int).SetString(sign+digits, 10)
	if !ok {
		return nil, bad
	}
	scale := int64(len(frac)) - exp
	if scale < math.MinInt32 || scale > math.MaxInt32 {
		return nil, errors.New("exponent out of range")
	}
	return inf.NewDecBig(n, inf.Scale(scale)), nil
}

// parseTimestamp reads RFC 3339 and the forms Cassandra accepts in CQL
// ("2024-05-01 10:00:00", with or without fraction and zone; a date alone is
// midnight UTC).
func parseTimestamp(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z0700", "2006-01-02 15:04:05.999999999Z0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want RFC 3339 (2006-01-02T15:04:05.000Z) or milliseconds since the epoch")
}

// parseTime reads HH:MM:SS[.fffffffff].
func parseTime(s string) (time.Duration, error) {
	bad := errors.New("want a time as HH:MM:SS[.fffffffff]")
	hms, frac, hasFrac := strings.Cut(s, ".")
	parts := strings.Split(hms, ":")
	if len(parts) != 3 || hasFrac && (frac == "" || len(frac) > 9) {
		return 0, bad
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || i > 0 && n > 59 || i == 0 && n > 23 {
			return 0, bad
		}
		d += time.Duration(n) * unit
	}
	if hasFrac {
		n, err := strconv.Atoi(frac + strings.Repeat("0", 9-len(frac)))
		if err != nil || n < 0 {
			return 0, bad
		}
		d += time.Duration(n)
	}
	return d, nil
}

// parseDuration reads the ISO 8601 form formatDuration writes, with W for
// weeks also accepted.
func parseDuration(s string) (gocql.Duration, error) {
	bad := errors.New("want an ISO 8601 duration such as P1DT2H or -PT0.5S")
	var d gocql.Duration
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return d, bad
	}
	s = s[1:]
	inTime := false
	for s != "" {
		if s[0] == 'T' {
			if inTime {
				return d, bad
			}
			inTime, s = true, s[1:]
			continue
		}
		i := strings.IndexAny(s, "YMWDHS")
		if i <= 0 {
			return d, bad
		}
		num, unit := s[:i], s[i]
		s = s[i+1:]
		if unit == 'S' && inTime {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f < 0 {
				return d, bad
			}
			whole, frac, _ := strings.Cut(num, ".")
			sec, _ := strconv.ParseInt(whole, 10, 64)
			d.Nanoseconds += sec * int64(time.Second)
			if frac != "" {
				if len(frac) > 9 {
					return d, bad
				}
				ns, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
				d.Nanoseconds += ns
			}
			continue
		}
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil || n < 0 {
			return d, bad
		}
		switch {
		case !inTime && unit == 'Y':
			d.Months += int32(n * 12)
		case !inTime && unit == 'M':
			d.Months += int32(n)
		case !inTime && unit == 'W':
			d.Days += int32(n * 7)
		case !inTime && unit == 'D':
			d.Days += int32(n)
		case inTime && unit == 'H':
			d.Nanoseconds += n * int64(time.Hour)
		case inTime && unit == 'M':
			d.Nanoseconds += n * int64(time.Minute)
		default:
			return d, bad
		}
	}
	if neg {
		d.Months, d.Days, d.Nanoseconds = -d.Months, -d.Days, -d.Nanoseconds
	}
	return d, nil
}
