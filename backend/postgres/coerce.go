package postgres

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// PHP is loosely typed and its msgpack extension has no binary type: a PHP
// client sends binary data as a string, an id as an int where the column is
// text, and 1 or "1" for a boolean. pgx refuses those (or, worse, parses a
// binary string bound to bytea as escaped text). registerCoercions teaches
// each connection's type map the conversions MySQL and SQLite make anyway;
// BindParams handles binary strings, which pgx always sends as text.
func registerCoercions(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	for _, c := range []struct {
		oid     uint32
		convert func(any) (any, bool)
	}{
		{pgtype.TextOID, scalarToString},
		{pgtype.VarcharOID, scalarToString},
		{pgtype.BPCharOID, scalarToString},
		{pgtype.NameOID, scalarToString},
		{pgtype.BoolOID, scalarToBool},
	} {
		t, ok := m.TypeForOID(c.oid)
		if !ok {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: coercingCodec{Codec: t.Codec, convert: c.convert}})
	}
	return nil
}

// coercingCodec is a pgtype.Codec that encodes what convert makes of the
// values convert takes, and everything else as its inner codec does.
type coercingCodec struct {
	pgtype.Codec
	convert func(any) (any, bool)
}

func (c coercingCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	converted, ok := c.convert(value)
	if !ok {
		return c.Codec.PlanEncode(m, oid, format, value)
	}
	inner := c.Codec.PlanEncode(m, oid, format, converted)
	if inner == nil {
		return nil
	}
	return convertingPlan{inner: inner, convert: c.convert}
}

type convertingPlan struct {
	inner   pgtype.EncodePlan
	convert func(any) (any, bool)
}

func (p convertingPlan) Encode(value any, buf []byte) ([]byte, error) {
	v, _ := p.convert(value)
	return p.inner.Encode(v, buf)
}

func scalarToString(v any) (any, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case bool:
		if x {
			return "1", true
		}
		return "0", true
	}
	return nil, false
}

func scalarToBool(v any) (any, bool) {
	switch x := v.(type) {
	case int64:
		return x != 0, true
	case string:
		b, err := strconv.ParseBool(x)
		return b, err == nil
	}
	return nil, false
}

// BindParams implements sqldb.ParamBinder. pgx sends every Go string in text
// format, and PostgreSQL's text input for bytea treats a backslash as an
// escape and cannot carry NUL, so binary data from a client without a binary
// type (PHP) would be refused or silently changed. A string that is not valid
// UTF-8, or holds a NUL or a backslash, is therefore bound as bytes: bytea
// takes them as they are, and text-like types (text, varchar, json) receive
// the same bytes a string would have sent. Other strings stay strings, whose
// bytea text input is the bytes themselves.
func (dialect) BindParams(params []any) []any {
	for i, p := range params {
		if s, ok := p.(string); ok && (strings.ContainsAny(s, "\\\x00") || !utf8.ValidString(s)) {
			params[i] = []byte(s)
		}
	}
	return params
}
