package postgres

import (
	"strconv"
	"strings"
)

// Session state, by the server's word. PostgreSQL reports on its own only
// the transaction status (in every ReadyForQuery) and a few parameters
// (ParameterStatus: TimeZone, client_encoding, application_name, DateStyle,
// IntervalStyle, ...). Everything else that outlives a statement (SET of any
// other variable, search_path among them, temporary tables, advisory locks,
// prepared statements, cursors, LISTEN) it does not announce, but it answers
// when asked: checkSQL asks, in the same round trip, after every statement
// that is not plainly a query or a DML statement (needsCheck). The pool then
// moves the pooled variables into the client's profile and resets the
// connection (DISCARD ALL) for anything else.
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
// row per other kind of state held ("@temp" and so on, value empty).
const checkSQL = `SELECT name, current_setting(name) FROM pg_settings WHERE source = 'session'
UNION ALL SELECT '@temporary table', '' WHERE EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = pg_my_temp_schema())
UNION ALL SELECT '@advisory lock', '' WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
UNION ALL SELECT '@prepared statement', '' WHERE EXISTS (SELECT 1 FROM pg_prepared_statements WHERE from_sql)
UNION ALL SELECT '@LISTEN', '' WHERE EXISTS (SELECT 1 FROM pg_listening_channels())
UNION ALL SELECT '@cursor', '' WHERE EXISTS (SELECT 1 FROM pg_cursors)`

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

// firstKeyword returns a statement's first word, upper-cased, after plain
// white space, -- comments, one level of /* */ comments and opening
// parentheses; "" when it meets anything else first.
func firstKeyword(sql string) string {
	i := 0
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
				return "" // unterminated or nested: not for this lexer to read
			}
			i += end + 4
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(sql) && (sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] == '_') {
				j++
			}
			return strings.ToUpper(sql[i:j])
		default:
			return ""
		}
	}
	return ""
}

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
