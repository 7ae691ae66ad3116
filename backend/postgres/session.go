package postgres

import (
	"strconv"
	"strings"
)

// Session state, by the server's word. PostgreSQL reports on its own only
// the transaction status (in every ReadyForQuery) and a few parameters
// (ParameterStatus: TimeZone, client_encoding, application_name, DateStyle,
// IntervalStyle, ...). Everything else that outlives a statement (SET of any
// other variable, search_path among them, temporary tables and every other
// object in pg_temp, advisory locks, prepared statements, cursors, LISTEN) it
// does not announce, but it answers when asked: checkSQL asks, in the same
// round trip, after every statement that is not plainly a query or a DML
// statement (needsCheck). The pool then moves the pooled variables into the
// client's profile and resets the connection (DISCARD ALL) for anything else.
//
// What is not asked after a plain SELECT or DML: the work of a user-defined
// function it calls (one that SETs search_path or creates a temporary table
// from inside a SELECT). Variables that PostgreSQL reports are caught even
// then; the rest is documented (docs/operations.md).

// pooledVariables are the session variables that stay pooled (lower case):
// what PHP frameworks set when they connect (Laravel: client_encoding,
// TimeZone, search_path, application_name, the isolation level; Doctrine the
// same) and the like. A SET of any other variable resets the connection.
var pooledVariables = []string{
	"application_name", "client_encoding", "datestyle", "intervalstyle", "timezone", "search_path",
	"default_transaction_isolation", "default_transaction_read_only", "default_transaction_deferrable",
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "extra_float_digits",
	"standard_conforming_strings", "bytea_output", "lc_monetary", "lc_numeric", "lc_time", "lc_messages",
	"work_mem", "synchronous_commit", "row_security", "jit", "constraint_exclusion",
}

// checkSQL asks the server for every kind of session state that outlives a
// statement: one row per variable SET in this session (name, value), and one
// row per other kind of state held ("@temporary object" and so on, value
// empty). A temporary object is anything in the session's temporary schema
// (pg_temp), not only a table, view or sequence (pg_class): a function or
// procedure, a type or domain, an operator, a collation, a conversion, an
// operator class or family, a text search configuration or dictionary,
// extended statistics. Each one would be seen, and called, by the next client
// of the connection. The catalogs are read only once the session has a
// temporary schema at all (pg_my_temp_schema() is 0 until then).
const checkSQL = `SELECT name, current_setting(name) FROM pg_settings WHERE source = 'session'
UNION ALL SELECT '@temporary object', '' WHERE pg_my_temp_schema() <> 0 AND (
	EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_type WHERE typnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_operator WHERE oprnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_collation WHERE collnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_conversion WHERE connamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_opclass WHERE opcnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_opfamily WHERE opfnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictnamespace = pg_my_temp_schema())
	OR EXISTS (SELECT 1 FROM pg_statistic_ext WHERE stxnamespace = pg_my_temp_schema()))
UNION ALL SELECT '@advisory lock', '' WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
UNION ALL SELECT '@prepared statement', '' WHERE EXISTS (SELECT 1 FROM pg_prepared_statements WHERE from_sql)
UNION ALL SELECT '@LISTEN', '' WHERE EXISTS (SELECT 1 FROM pg_listening_channels())
UNION ALL SELECT '@cursor', '' WHERE EXISTS (SELECT 1 FROM pg_cursors)`

// reportedVariables are the variables PostgreSQL reports in a
// ParameterStatus whenever they change: a SET of one needs no question.
var reportedVariables = map[string]bool{
	"application_name": true, "client_encoding": true, "datestyle": true, "intervalstyle": true,
	"timezone": true, "standard_conforming_strings": true, "default_transaction_read_only": true,
	"in_hot_standby": true, "is_superuser": true, "session_authorization": true,
}

// check is what tetherd asks the server after a statement, decided once per
// statement and connection.
type check uint8

const (
	checkNone     check = iota // a query or DML statement, or a SET the server reports (ParameterStatus)
	checkVar                   // a SET or RESET of one pooled variable the server does not report: read it back
	checkUnpooled              // a SET of a variable that is not pooled: the session needs a reset, nothing to ask
	checkFull                  // anything else: checkSQL
)

// checkFor decides what to ask after sql, and the variable a checkVar reads.
// Statements that start with SET are parsed for the variable they set (one
// per statement: the extended protocol takes one statement at a time); any
// form it does not know is checked in full.
func checkFor(sql string, pooled map[string]bool) (check, string) {
	if !needsCheck(sql) {
		return checkNone, ""
	}
	words := leadingWords(sql, 4)
	if len(words) < 2 {
		return checkFull, ""
	}
	var name string
	switch words[0] {
	case "SET":
		w := words[1:]
		switch w[0] {
		case "LOCAL", "TRANSACTION", "CONSTRAINTS":
			return checkNone, "" // over with the transaction
		case "SESSION":
			w = w[1:]
		}
		if len(w) == 0 {
			return checkFull, ""
		}
		switch w[0] {
		case "TIME":
			name = "timezone"
		case "NAMES":
			name = "client_encoding"
		case "SCHEMA":
			name = "search_path"
		case "ROLE", "AUTHORIZATION", "CHARACTERISTICS":
			return checkFull, ""
		default:
			name = strings.ToLower(w[0])
		}
	case "RESET":
		if words[1] == "ALL" {
			return checkFull, ""
		}
		name = strings.ToLower(words[1])
	default:
		return checkFull, ""
	}
	switch {
	case !pooled[name]:
		return checkUnpooled, ""
	case reportedVariables[name]:
		return checkNone, ""
	}
	return checkVar, name
}

// resetSQL clears a session for the next client: ROLLBACK first, since
// DISCARD ALL cannot run inside a transaction. It also drops the prepared
// statements, which the connection then prepares again.
var resetSQL = []string{"ROLLBACK", "DISCARD ALL"}

// needsCheck reports whether a statement may change session state the server
// does not report, so that checkSQL must follow it. Only a statement that is
// plainly a query or DML (its first keyword, after white space, comments
// and parentheses, is SELECT, INSERT, UPDATE, DELETE, WITH, VALUES, TABLE or
// MERGE) and names none of the things that hold session state is let
// through; anything the lexer cannot read (nested comments, odd white space)
// is checked. A filter that fails closed, never the guard.
func needsCheck(sql string) bool {
	switch firstKeyword(sql) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE":
	default:
		return true
	}
	up := strings.ToUpper(sql)
	for _, needle := range []string{"TEMP", "SET_CONFIG", "ADVISORY", "LISTEN", "PREPARE", "DECLARE", "CURSOR", "DBLINK", "LO_"} {
		if strings.Contains(up, needle) {
			return true
		}
	}
	return false
}

// firstKeyword returns a statement's first word, upper-cased (see
// leadingWords); "" when it meets anything else first.
func firstKeyword(sql string) string {
	if w := leadingWords(sql, 1); len(w) == 1 {
		return w[0]
	}
	return ""
}

// leadingWords returns up to n words (letters, digits, '_') at the start of
// a statement, upper-cased, separated by nothing but what skipSpace skips; it
// stops at the first thing that is not a word.
func leadingWords(sql string, n int) []string {
	var words []string
	i := 0
	for len(words) < n {
		if i = skipSpace(sql, i); i < 0 || i >= len(sql) || !isWordStart(sql[i]) {
			break
		}
		j := i
		for j < len(sql) && (isWordStart(sql[j]) || sql[j] >= '0' && sql[j] <= '9') {
			j++
		}
		words = append(words, strings.ToUpper(sql[i:j]))
		i = j
	}
	return words
}

// skipSpace returns the index of the first byte at or after i that is not
// plain white space, a -- comment, a one-level /* */ comment or an opening
// parenthesis; -1 for a comment it cannot read (unterminated, nested).
func skipSpace(sql string, i int) int {
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 || strings.Contains(sql[i+2:i+2+end], "/*") {
				return -1
			}
			i += end + 4
		default:
			return i
		}
	}
	return i
}

func isWordStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// applySQL is the statement that brings a session's pooled variables to a
// client's values: set_config for each, with the name and value bound as
// parameters ($1, $2 for the first, and so on); a NULL value returns the
// variable to the session's default (pg_settings.reset_val).
func applySQL(n int) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		name, value := "$"+strconv.Itoa(2*i+1), "$"+strconv.Itoa(2*i+2)
		b.WriteString("set_config(" + name + "::text, COALESCE(" + value + "::text, (SELECT reset_val FROM pg_settings WHERE lower(name) = lower(" + name + "::text))), false)")
	}
	return b.String()
}
