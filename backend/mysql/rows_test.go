package mysql

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/tether-php/tether/internal/sqltext"
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

// sessionHintsTenPasses is sessionHints as it was, one search of the text per
// word: the one-pass version must find exactly what it found.
func sessionHintsTenPasses(sql string) hints {
	var h hints
	if sqltext.ContainsFold(sql, "GET_LOCK") || sqltext.ContainsFold(sql, "LAST_INSERT_ID") ||
		wordFold(sql, "CALL") || wordFold(sql, "EXECUTE") || wordFold(sql, "HANDLER") || wordFold(sql, "XA") {
		h |= hintUnpooled
	}
	for i := 0; i < len(sql); i++ {
		if sql[i] == '@' {
			if i+1 < len(sql) && sql[i+1] == '@' {
				i++
				continue
			}
			h |= hintUserVar
			break
		}
	}
	if sqltext.ContainsFold(sql, "NAMES") || sqltext.ContainsFold(sql, "CHARACTER") || sqltext.ContainsFold(sql, "COLLAT") ||
		sqltext.ContainsFold(sql, "CHARSET") {
		h |= hintCollation
	}
	return h
}

// wordFold is containsWordFold as it was.
func wordFold(sql, word string) bool {
	n := len(word)
	for i := 0; i+n <= len(sql); i++ {
		if (i > 0 && isWordByte(sql[i-1])) || (i+n < len(sql) && isWordByte(sql[i+n])) {
			continue
		}
		j := 0
		for ; j < n; j++ {
			c := sql[i+j]
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			if c != word[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// TestSessionHintsOnePass: the one-pass sessionHints finds what ten searches
// found, on WordPress's statements, on words cut at the end, on mixed case and
// on random text made of the words' pieces.
func TestSessionHintsOnePass(t *testing.T) {
	corpus := []string{
		"SELECT option_name, option_value FROM wp_options WHERE autoload = 'yes'",
		"SELECT SQL_CALC_FOUND_ROWS wp_posts.ID FROM wp_posts WHERE 1=1 ORDER BY wp_posts.post_date DESC LIMIT 0, 10",
		"SELECT LAST_INSERT_ID(", "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", "select @@a, @b", "@", "@@", "@@@",
		"xA", "exa", "_XA_", "x", "CALL", "CALLS", "recall", "call(", "Execute", "EXECUTED", "handler;", "get_loc",
		"get_LOCK", "charse", "Collation", "character_set_client", "namess", "NAME", "é xa é", "\x80XA", "XA\x80",
	}
	for _, sql := range corpus {
		if got, want := sessionHints(sql), sessionHintsTenPasses(sql); got != want {
			t.Errorf("sessionHints(%q) = %b, ten passes found %b", sql, got, want)
		}
	}
	pieces := []string{"GET_", "LOCK", "LAST_", "INSERT_ID", "call", "CALL", "Execute", "HANDLER", "xa", "XA", "names",
		"CHAR", "ACTER", "SET", "collat", "@", "@@", " ", "_", "a", "1", "(", "\x80", "é", ";", "'"}
	rng := rand.New(rand.NewSource(20))
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for k := rng.Intn(8); k >= 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		sql := b.String()
		if got, want := sessionHints(sql), sessionHintsTenPasses(sql); got != want {
			t.Fatalf("sessionHints(%q) = %b, ten passes found %b", sql, got, want)
		}
	}
}

// BenchmarkSessionHints: the front page's longest statement.
func BenchmarkSessionHints(b *testing.B) {
	sql := "SELECT DISTINCT t.term_id, tr.object_id FROM wp_terms AS t INNER JOIN wp_term_taxonomy AS tt ON t.term_id = tt.term_id " +
		"INNER JOIN wp_term_relationships AS tr ON tr.term_taxonomy_id = tt.term_taxonomy_id WHERE tt.taxonomy IN ('category', " +
		"'post_tag', 'post_format') AND tr.object_id IN (35, 36, 37, 38, 39, 40, 41, 42, 43, 44) ORDER BY t.name ASC"
	for i := 0; i < b.N; i++ {
		sessionHints(sql)
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

func BenchmarkSessionHintsTenPasses(b *testing.B) {
	sql := "SELECT DISTINCT t.term_id, tr.object_id FROM wp_terms AS t INNER JOIN wp_term_taxonomy AS tt ON t.term_id = tt.term_id " +
		"INNER JOIN wp_term_relationships AS tr ON tr.term_taxonomy_id = tt.term_taxonomy_id WHERE tt.taxonomy IN ('category', " +
		"'post_tag', 'post_format') AND tr.object_id IN (35, 36, 37, 38, 39, 40, 41, 42, 43, 44) ORDER BY t.name ASC"
	for i := 0; i < b.N; i++ {
		sessionHintsTenPasses(sql)
	}
}
