package mysql

import (
	"math"
	"strconv"
	"testing"
)

// TestParseInt checks the text-protocol integer parser against strconv at
// the edges of the ranges and on what is not an integer.
func TestParseInt(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
		"", "-", "1.5", "1e3", " 1", "+1", "0001", "99999999999999999999999",
		"0000000000000000000000000018446744073709551615", "-000000000000000000000000009223372036854775808"} {
		want, werr := strconv.ParseInt(s, 10, 64)
		got, ok := parseInt([]byte(s))
		if s == "+1" {
			werr = strconv.ErrSyntax // the server never writes a '+'
		}
		if ok != (werr == nil) || ok && got != want {
			t.Errorf("parseInt(%q) = %d, %v; strconv: %d, %v", s, got, ok, want, werr)
		}
		uwant, uerr := strconv.ParseUint(s, 10, 64)
		ugot, uok := parseUint([]byte(s))
		if s == "+1" {
			uerr = strconv.ErrSyntax
		}
		if uok != (uerr == nil) || uok && ugot != uwant {
			t.Errorf("parseUint(%q) = %d, %v; strconv: %d, %v", s, ugot, uok, uwant, uerr)
		}
	}
	if u, ok := parseUint([]byte(strconv.FormatUint(math.MaxUint64, 10))); !ok || u != math.MaxUint64 {
		t.Errorf("parseUint(MaxUint64) = %d, %v", u, ok)
	}
}

// TestSessionHints: what the text says of session state, in any case, on
// word boundaries.
func TestSessionHints(t *testing.T) {
	for sql, want := range map[string]hints{
		"select get_lock('a', 0)":            hintUnpooled,
		"call p()":                           hintUnpooled,
		"SELECT recall, callback FROM calls": 0,
		"EXECUTE stmt":                       hintUnpooled,
		"xa start 'x'":                       hintUnpooled,
		"SELECT last_insert_id()":            hintUnpooled,
		"set names utf8mb4":                  hintCollation,
		"SET character_set_client = latin1":  hintCollation,
		"SELECT @v := 1":                     hintUserVar,
		"SELECT @@session.time_zone":         0,
		"SELECT 1":                           0,
		"CALL":                               hintUnpooled,
	} {
		if got := sessionHints(sql); got != want {
			t.Errorf("sessionHints(%q) = %b, want %b", sql, got, want)
		}
	}
}

// TestQueryKind: binlog query events and what they do to the transaction.
func TestQueryKind(t *testing.T) {
	for q, want := range map[string]int{
		"BEGIN": queryBegin, "XA START X'01'": queryBegin, "COMMIT": queryEnd, "ROLLBACK": queryEnd,
		"XA COMMIT X'01'": queryXAEnd, "XA ROLLBACK X'01'": queryXAEnd, "SAVEPOINT trans2": queryIgnore,
		"RELEASE SAVEPOINT trans2": queryIgnore, "ROLLBACK TO trans2": queryIgnore, "XA END X'01'": queryIgnore,
		"UPDATE t SET v = 1": queryStatement, "CREATE TABLE t (id INT)": queryStatement, " commit ": queryEnd,
		"COMMITTED_THING = 1": queryStatement,
	} {
		if got := queryKind(q); got != want {
			t.Errorf("queryKind(%q) = %d, want %d", q, got, want)
		}
	}
}
