package mysql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	tether "github.com/tether-php/tether"
)

// Result rows in MySQL's binary protocol, decoded straight into a
// tether.RowSink (the client's reply, for a request from the event loop).
//
// Why by hand: go-mysql's RowData.ParseBinary and go-sql-driver's rows build a
// []FieldValue or []driver.Value per row, boxing every cell, and both copy
// text; here each cell goes from the packet to the reply in one append, which
// is most of what a point read costs tetherd.

// binaryCharset is MySQL's "binary" character set (collation 63): a string
// column in it holds bytes, not text.
const binaryCharset = 63

// column is what the rows decoder needs of a column definition.
type column struct {
	name     []byte // owned: the packet buffer is reused
	charset  uint16
	typ      byte
	flags    uint16
	decimals byte
}

var errMalformed = errors.New("malformed packet")

// parseColumn reads a ColumnDefinition41 packet into col.
func parseColumn(p []byte, col *column) error {
	pos := 0
	for i := 0; i < 4; i++ { // catalog, schema, table, org_table
		n, err := gomysql.SkipLengthEncodedString(p[pos:])
		if err != nil {
			return errMalformed
		}
		pos += n
	}
	name, _, n, err := gomysql.LengthEncodedString(p[pos:])
	if err != nil {
		return errMalformed
	}
	col.name = append(col.name[:0], name...)
	pos += n
	n, err = gomysql.SkipLengthEncodedString(p[pos:]) // org_name
	if err != nil {
		return errMalformed
	}
	pos += n
	pos++ // length of the fixed fields (0x0c)
	if len(p) < pos+10 {
		return errMalformed
	}
	col.charset = binary.LittleEndian.Uint16(p[pos:])
	col.typ = p[pos+6]
	col.flags = binary.LittleEndian.Uint16(p[pos+7:])
	col.decimals = p[pos+9]
	return nil
}

// decodeRow decodes one binary result row (p starts with its 0x00 header)
// into sink.
func decodeRow(p []byte, cols []column, sink tether.RowSink, scratch []byte) ([]byte, error) {
	n := len(cols)
	nullLen := (n + 7 + 2) / 8
	if len(p) < 1+nullLen {
		return scratch, errMalformed
	}
	nulls := p[1 : 1+nullLen]
	pos := 1 + nullLen
	sink.BeginRow()
	for i := range cols {
		bit := i + 2
		if nulls[bit/8]&(1<<(bit%8)) != 0 {
			sink.Nil()
			continue
		}
		c := &cols[i]
		unsigned := c.flags&gomysql.UNSIGNED_FLAG != 0
		switch c.typ {
		case gomysql.MYSQL_TYPE_TINY:
			if len(p) < pos+1 {
				return scratch, errMalformed
			}
			if unsigned {
				sink.Int(int64(p[pos]))
			} else {
				sink.Int(int64(int8(p[pos])))
			}
			pos++
		case gomysql.MYSQL_TYPE_SHORT, gomysql.MYSQL_TYPE_YEAR:
			if len(p) < pos+2 {
				return scratch, errMalformed
			}
			v := binary.LittleEndian.Uint16(p[pos:])
			if unsigned || c.typ == gomysql.MYSQL_TYPE_YEAR {
				sink.Int(int64(v))
			} else {
				sink.Int(int64(int16(v)))
			}
			pos += 2
		case gomysql.MYSQL_TYPE_INT24, gomysql.MYSQL_TYPE_LONG:
			if len(p) < pos+4 {
				return scratch, errMalformed
			}
			v := binary.LittleEndian.Uint32(p[pos:])
			if unsigned {
				sink.Int(int64(v))
			} else {
				sink.Int(int64(int32(v)))
			}
			pos += 4
		case gomysql.MYSQL_TYPE_LONGLONG:
			if len(p) < pos+8 {
				return scratch, errMalformed
			}
			v := binary.LittleEndian.Uint64(p[pos:])
			if unsigned {
				sink.Uint(v)
			} else {
				sink.Int(int64(v))
			}
			pos += 8
		case gomysql.MYSQL_TYPE_FLOAT:
			if len(p) < pos+4 {
				return scratch, errMalformed
			}
			f := math.Float32frombits(binary.LittleEndian.Uint32(p[pos:]))
			// Widen through the shortest decimal form, so FLOAT 1.1 is 1.1.
			scratch = strconv.AppendFloat(scratch[:0], float64(f), 'g', -1, 32)
			v, _ := strconv.ParseFloat(string(scratch), 64)
			sink.Float(v)
			pos += 4
		case gomysql.MYSQL_TYPE_DOUBLE:
			if len(p) < pos+8 {
				return scratch, errMalformed
			}
			sink.Float(math.Float64frombits(binary.LittleEndian.Uint64(p[pos:])))
			pos += 8
		case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE, gomysql.MYSQL_TYPE_DATETIME, gomysql.MYSQL_TYPE_TIMESTAMP,
			gomysql.MYSQL_TYPE_DATETIME2, gomysql.MYSQL_TYPE_TIMESTAMP2:
			if len(p) < pos+1 || len(p) < pos+1+int(p[pos]) {
				return scratch, errMalformed
			}
			l := int(p[pos])
			dateOnly := c.typ == gomysql.MYSQL_TYPE_DATE || c.typ == gomysql.MYSQL_TYPE_NEWDATE
			scratch = appendDateTime(scratch[:0], p[pos+1:pos+1+l], dateOnly, c.decimals)
			if dateOnly {
				sink.Text(scratch)
			} else {
				sink.DateTime(scratch)
			}
			pos += 1 + l
		case gomysql.MYSQL_TYPE_TIME, gomysql.MYSQL_TYPE_TIME2:
			if len(p) < pos+1 || len(p) < pos+1+int(p[pos]) {
				return scratch, errMalformed
			}
			l := int(p[pos])
			scratch = appendTime(scratch[:0], p[pos+1:pos+1+l], c.decimals)
			sink.Text(scratch)
			pos += 1 + l
		default:
			v, isNull, m, err := gomysql.LengthEncodedString(p[pos:])
			if err != nil {
				return scratch, errMalformed
			}
			pos += m
			switch {
			case isNull:
				sink.Nil()
			case isBytes(c):
				sink.Bytes(v)
			default:
				sink.Text(v)
			}
		}
	}
	return scratch, nil
}

// isBytes reports whether a string-typed column holds binary data: the BLOB
// and BINARY types (a string type in the binary character set), BIT and
// GEOMETRY. JSON, DECIMAL, ENUM and SET are text whatever their character set.
func isBytes(c *column) bool {
	switch c.typ {
	case gomysql.MYSQL_TYPE_BIT, gomysql.MYSQL_TYPE_GEOMETRY:
		return true
	case gomysql.MYSQL_TYPE_TINY_BLOB, gomysql.MYSQL_TYPE_MEDIUM_BLOB, gomysql.MYSQL_TYPE_LONG_BLOB, gomysql.MYSQL_TYPE_BLOB,
		gomysql.MYSQL_TYPE_VAR_STRING, gomysql.MYSQL_TYPE_STRING, gomysql.MYSQL_TYPE_VARCHAR:
		return c.charset == binaryCharset
	}
	return false
}

// appendDateTime formats a binary DATE, DATETIME or TIMESTAMP as ISO 8601
// (the protocol's "2006-01-02" and "2006-01-02T15:04:05[.ffffff]"): the
// fraction has the column's digits (all six, when the column does not say,
// only if not zero). A zero length is MySQL's zero date.
func appendDateTime(b, v []byte, dateOnly bool, decimals byte) []byte {
	var year, month, day, hour, min, sec int
	var micro uint32
	if len(v) >= 4 {
		year = int(binary.LittleEndian.Uint16(v))
		month, day = int(v[2]), int(v[3])
	}
	if len(v) >= 7 {
		hour, min, sec = int(v[4]), int(v[5]), int(v[6])
	}
	if len(v) >= 11 {
		micro = binary.LittleEndian.Uint32(v[7:])
	}
	b = appendPad(b, year, 4)
	b = append(b, '-')
	b = appendPad(b, month, 2)
	b = append(b, '-')
	b = appendPad(b, day, 2)
	if dateOnly {
		return b
	}
	b = append(b, 'T')
	b = appendPad(b, hour, 2)
	b = append(b, ':')
	b = appendPad(b, min, 2)
	b = append(b, ':')
	b = appendPad(b, sec, 2)
	return appendFraction(b, micro, decimals)
}

// appendTime formats a binary TIME as [-]H:MM:SS[.ffffff], hours past 24
// for days.
func appendTime(b, v []byte, decimals byte) []byte {
	var neg bool
	var days uint32
	var hour, min, sec int
	var micro uint32
	if len(v) >= 8 {
		neg = v[0] == 1
		days = binary.LittleEndian.Uint32(v[1:])
		hour, min, sec = int(v[5]), int(v[6]), int(v[7])
	}
	if len(v) >= 12 {
		micro = binary.LittleEndian.Uint32(v[8:])
	}
	if neg {
		b = append(b, '-')
	}
	b = appendPad(b, int(days)*24+hour, 2)
	b = append(b, ':')
	b = appendPad(b, min, 2)
	b = append(b, ':')
	b = appendPad(b, sec, 2)
	return appendFraction(b, micro, decimals)
}

func appendFraction(b []byte, micro uint32, decimals byte) []byte {
	digits := int(decimals)
	if digits > 6 { // not given (0x1f): all six when there is a fraction
		digits = 0
		if micro != 0 {
			digits = 6
		}
	}
	if digits == 0 {
		return b
	}
	var frac [6]byte
	for i := 5; i >= 0; i-- {
		frac[i] = byte('0' + micro%10)
		micro /= 10
	}
	b = append(b, '.')
	return append(b, frac[:digits]...)
}

func appendPad(b []byte, v, width int) []byte {
	var tmp [12]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// decodeTextRow decodes one text-protocol result row (COM_QUERY's: every
// cell a length-encoded string, 0xfb for NULL) into sink, each cell typed by
// its column as decodeRow types the binary protocol's, so that a statement
// answers the same values whichever protocol ran it.
func decodeTextRow(p []byte, cols []column, sink tether.RowSink, scratch []byte) ([]byte, error) {
	pos := 0
	sink.BeginRow()
	for i := range cols {
		if pos >= len(p) {
			return scratch, errMalformed
		}
		if p[pos] == 0xfb {
			sink.Nil()
			pos++
			continue
		}
		v, _, m, err := gomysql.LengthEncodedString(p[pos:])
		if err != nil {
			return scratch, errMalformed
		}
		pos += m
		c := &cols[i]
		switch c.typ {
		case gomysql.MYSQL_TYPE_TINY, gomysql.MYSQL_TYPE_SHORT, gomysql.MYSQL_TYPE_YEAR, gomysql.MYSQL_TYPE_INT24,
			gomysql.MYSQL_TYPE_LONG, gomysql.MYSQL_TYPE_LONGLONG:
			if c.typ == gomysql.MYSQL_TYPE_LONGLONG && c.flags&gomysql.UNSIGNED_FLAG != 0 {
				u, ok := parseUint(v)
				if !ok {
					return scratch, fmt.Errorf("%w: integer column %q holds %q", errMalformed, c.name, v)
				}
				sink.Uint(u)
				continue
			}
			n, ok := parseInt(v)
			if !ok {
				return scratch, fmt.Errorf("%w: integer column %q holds %q", errMalformed, c.name, v)
			}
			sink.Int(n)
		case gomysql.MYSQL_TYPE_FLOAT, gomysql.MYSQL_TYPE_DOUBLE:
			// The server prints a FLOAT's shortest decimal form, as decodeRow
			// widens it.
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return scratch, fmt.Errorf("%w: float column %q holds %q", errMalformed, c.name, v)
			}
			sink.Float(f)
		case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE, gomysql.MYSQL_TYPE_TIME, gomysql.MYSQL_TYPE_TIME2:
			sink.Text(v)
		case gomysql.MYSQL_TYPE_DATETIME, gomysql.MYSQL_TYPE_TIMESTAMP, gomysql.MYSQL_TYPE_DATETIME2,
			gomysql.MYSQL_TYPE_TIMESTAMP2:
			// "2006-01-02 15:04:05[.ffffff]" to the protocol's ISO 8601.
			scratch = append(scratch[:0], v...)
			if len(scratch) > 10 && scratch[10] == ' ' {
				scratch[10] = 'T'
			}
			sink.DateTime(scratch)
		default:
			if isBytes(c) {
				sink.Bytes(v)
			} else {
				sink.Text(v)
			}
		}
	}
	if pos != len(p) {
		return scratch, errMalformed
	}
	return scratch, nil
}

// parseInt parses a text-protocol integer without the string conversion
// strconv.ParseInt would need (an allocation per cell): a decimal with an
// optional '-', in int64's range.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return -int64(u-1) - 1, true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// parseUint parses an unsigned decimal in uint64's range (leading zeros, as
// a ZEROFILL column prints them, allowed).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	if len(b) > 20 {
		return 0, false
	}
	var u uint64
	for _, ch := range b {
		d := uint64(ch - '0')
		if d > 9 {
			return 0, false
		}
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	return u, true
}
