package mysql

import (
	"encoding/binary"
	"encoding/hex"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tether-php/tether/backend/sqlpool"
)

// Session state, by the server's word. Every pooled connection runs with
// session tracking on (setupSQL): the OK packet that ends each statement then
// says whether a transaction is open (SERVER_STATUS_IN_TRANS, and the
// transaction state tracker, which also reports LOCK TABLES), which system
// variables it changed and to what, whether it changed the default schema, and
// whether it changed any other session state (user variables, temporary
// tables, prepared statements: session_track_state_change). The pool resets a
// connection after anything but a pooled variable (sqlpool.Report).
//
// What the server does not report, a look at the statement's text adds, and
// only ever to reset more (sessionHints): user-level locks (GET_LOCK), HANDLER
// tables, stored procedures (CALL, whose own statements may take such locks).

// trackerSQL turns session tracking on; it is part of every connection's
// setup and of its reset (COM_RESET_CONNECTION returns session variables to
// their global values).
const trackerSQL = "session_track_state_change = 1, session_track_schema = 1, " +
	"session_track_system_variables = '*', session_track_transaction_info = 'STATE'"

// pooledVariables are the session variables that stay pooled: a client's
// values are kept and applied to whichever connection runs its next
// statement. They are what PHP frameworks set when they connect (Laravel,
// WordPress, Doctrine: SET NAMES, sql_mode, time_zone, the isolation level)
// and the like. A change to any other variable resets the connection.
var pooledVariables = []string{
	"character_set_client", "character_set_connection", "character_set_results", "collation_connection",
	"time_zone", "sql_mode", "transaction_isolation", "tx_isolation", "transaction_read_only", "tx_read_only",
	"group_concat_max_len", "max_execution_time", "max_statement_time", "sql_auto_is_null", "sql_big_selects",
	"sql_safe_updates", "sql_select_limit", "lc_time_names", "lc_messages", "innodb_lock_wait_timeout",
	"lock_wait_timeout", "div_precision_increment", "default_storage_engine", "default_tmp_storage_engine",
	"foreign_key_checks", "unique_checks", "sql_notes", "sql_warnings", "sql_quote_show_create",
	"explicit_defaults_for_timestamp", "names", "wait_timeout", "net_read_timeout", "net_write_timeout",
	"interactive_timeout", "optimizer_search_depth", "join_buffer_size", "sort_buffer_size",
	"big_tables", "sql_buffer_result", "max_join_size", "collation_database", "character_set_database",
}

// baselineSQL reads the pooled variables' values after the setup: what a
// variable returns to when a client that set it is done with a connection.
func baselineSQL(vars []string) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, v := range vars {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("@@session.")
		b.WriteString(v)
	}
	return b.String()
}

// ok is what an OK packet (or the OK that ends a result set) says.
type ok struct {
	affected, insertID uint64
	status             uint16
	stateChanged       bool
	schemaChanged      bool
	trxState           string
	vars               []sqlpool.Setting
}

// parseOK reads an OK packet (header 0x00, or 0xfe ending a result set).
func parseOK(p []byte, o *ok) error {
	*o = ok{}
	pos := 1
	var n int
	o.affected, _, n = gomysql.LengthEncodedInt(p[pos:])
	pos += n
	o.insertID, _, n = gomysql.LengthEncodedInt(p[pos:])
	pos += n
	if len(p) < pos+4 {
		return errMalformed
	}
	o.status = binary.LittleEndian.Uint16(p[pos:])
	pos += 4 // status, warnings
	if pos >= len(p) {
		return nil
	}
	_, _, n, err := gomysql.LengthEncodedString(p[pos:]) // info
	if err != nil {
		return nil // older servers end with an info string<EOF>
	}
	pos += n
	if o.status&gomysql.SERVER_SESSION_STATE_CHANGED == 0 || pos >= len(p) {
		return nil
	}
	state, _, _, err := gomysql.LengthEncodedString(p[pos:])
	if err != nil {
		return errMalformed
	}
	return parseSessionState(state, o)
}

// Session state tracker entry types.
const (
	trackSystemVariables = 0
	trackSchema          = 1
	trackStateChange     = 2
	trackGTIDs           = 3
	trackTrxChars        = 4
	trackTrxState        = 5
)

func parseSessionState(b []byte, o *ok) error {
	for len(b) > 0 {
		typ := b[0]
		data, _, n, err := gomysql.LengthEncodedString(b[1:])
		if err != nil {
			return errMalformed
		}
		b = b[1+n:]
		switch typ {
		case trackSystemVariables:
			name, _, n, err := gomysql.LengthEncodedString(data)
			if err != nil {
				return errMalformed
			}
			value, _, _, err := gomysql.LengthEncodedString(data[n:])
			if err != nil {
				return errMalformed
			}
			o.vars = append(o.vars, sqlpool.Setting{Name: strings.ToLower(string(name)), Value: string(value)})
		case trackSchema:
			o.schemaChanged = true
		case trackStateChange:
			o.stateChanged = true
		case trackTrxState:
			if s, _, _, err := gomysql.LengthEncodedString(data); err == nil {
				o.trxState = string(s)
			}
		}
	}
	return nil
}

// report is the sqlpool.Report of what an OK said, on a connection whose
// pooled variables are pooled.
func (d *driver) report(o *ok, r *sqlpool.Request, h hints) {
	if h&hintUserVar != 0 {
		// MariaDB reports SET @v but not SELECT @v := ...; a statement that
		// names a user variable may have set one.
		r.AddUnpooled("user variable")
	}
	if o.status&gomysql.SERVER_SESSION_STATE_CHANGED == 0 && o.status&gomysql.SERVER_STATUS_IN_TRANS == 0 &&
		o.status&gomysql.SERVER_STATUS_AUTOCOMMIT != 0 {
		return // the common case: nothing to say
	}
	if r.Report == nil {
		r.Report = &sqlpool.Report{}
	}
	rep := r.Report
	rep.InTx = o.status&gomysql.SERVER_STATUS_IN_TRANS != 0
	if o.status&gomysql.SERVER_STATUS_AUTOCOMMIT == 0 {
		rep.AutocommitOff = true
		r.AddUnpooled("autocommit off")
	}
	// The transaction state tracker: "T" explicit, "I" implicit transaction,
	// "L" tables locked (LOCK TABLES); "_" everywhere else.
	if strings.ContainsAny(o.trxState, "TI") {
		rep.InTx = true
	}
	if strings.ContainsRune(o.trxState, 'L') {
		rep.Locked = true
		r.AddUnpooled("LOCK TABLES")
	}
	if o.schemaChanged {
		r.AddUnpooled("default schema changed (USE)")
	}
	explained := o.schemaChanged
	for _, v := range o.vars {
		if v.Name == "last_gtid" {
			// The GTID of the transaction the statement committed (binary
			// log on): where a replica that has this write stands, not
			// session state (it reset the connection after every write).
			rep.Position = v.Value
			continue
		}
		explained = true
		switch {
		case v.Name == "character_set_connection" && h&hintCollation == 0:
			// Its collation changed with it, unreported and not read back.
			r.AddUnpooled("character set changed")
		case d.pooled[v.Name]:
			rep.Settings = append(rep.Settings, v)
		case v.Name == "autocommit" && strings.EqualFold(v.Value, "ON"):
		default:
			r.AddUnpooled("session variable " + v.Name + " (not pooled)")
		}
	}
	if o.stateChanged && !explained {
		r.AddUnpooled("session state (a user variable, temporary table or prepared statement)")
	}
}

// Statement hints, from the statement's text, looked at once per connection
// (when the statement is prepared there).
type hints uint8

const (
	// hintUnpooled: it may take session state the server does not report.
	hintUnpooled hints = 1 << iota
	// hintUserVar: it mentions a user variable, which it may set without the
	// server reporting it (SELECT @v := ...; and a SET of a pooled variable
	// and a user variable at once is reported like one of the former only).
	hintUserVar
	// hintCollation: it may change the connection's character set (SET
	// NAMES, SET CHARACTER SET, collation_connection), whose collation the
	// tracker does not report: the protocol reads it back.
	hintCollation
)

// sessionHints looks at a statement's text for session state the server does
// not report. It only ever makes the pool reset more; the server's report is
// the guard.
//
// It runs for every statement sent as text (most of WordPress's), so it makes
// one pass over the text and allocates nothing: at each byte only the words
// that begin with that letter are compared, case folded as they are. (It used
// to search the text once per word, ten passes, about a tenth of tetherd's
// CPU on the WordPress front page: bench/wpqueries.) What it finds is exactly
// what those searches found: GET_LOCK, LAST_INSERT_ID, NAMES, CHARACTER,
// COLLAT and CHARSET anywhere, CALL, EXECUTE, HANDLER and XA as whole words,
// an @ not followed by another.
func sessionHints(sql string) hints {
	var h hints
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if !hintStarts[c] {
			continue
		}
		if c == '@' {
			if i+1 < len(sql) && sql[i+1] == '@' {
				i++ // @@system_variable: skip both
				continue
			}
			h |= hintUserVar
			continue
		}
		switch c | 0x20 { // ASCII letters to lower case; other bytes match no case below
		case 'g':
			if hasFoldAt(sql, i, "GET_LOCK") {
				h |= hintUnpooled
			}
		case 'l':
			if hasFoldAt(sql, i, "LAST_INSERT_ID") {
				h |= hintUnpooled
			}
		case 'n':
			if hasFoldAt(sql, i, "NAMES") {
				h |= hintCollation
			}
		case 'c':
			if hasFoldAt(sql, i, "CHARACTER") || hasFoldAt(sql, i, "COLLAT") || hasFoldAt(sql, i, "CHARSET") {
				h |= hintCollation
			}
			if hasWordFoldAt(sql, i, "CALL") {
				h |= hintUnpooled
			}
		case 'e':
			if hasWordFoldAt(sql, i, "EXECUTE") {
				h |= hintUnpooled
			}
		case 'h':
			if hasWordFoldAt(sql, i, "HANDLER") {
				h |= hintUnpooled
			}
		case 'x':
			if hasWordFoldAt(sql, i, "XA") {
				h |= hintUnpooled
			}
		}
	}
	return h
}

// hintStarts marks the bytes sessionHints looks further at: '@' and the first
// letters of its words, in either case.
var hintStarts = func() (t [256]bool) {
	for _, c := range "@GLNCEHX" {
		t[c], t[c|0x20] = true, true
	}
	return t
}()

// hasFoldAt reports whether sql holds word (upper case) at i, in any case.
func hasFoldAt(sql string, i int, word string) bool {
	if len(sql)-i < len(word) {
		return false
	}
	for j := 0; j < len(word); j++ {
		c := sql[i+j]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != word[j] {
			return false
		}
	}
	return true
}

// hasWordFoldAt reports whether sql holds word (upper case) at i, in any
// case, with no letter, digit, '_' or non-ASCII byte on either side.
func hasWordFoldAt(sql string, i int, word string) bool {
	n := len(word)
	if (i > 0 && isWordByte(sql[i-1])) || (i+n < len(sql) && isWordByte(sql[i+n])) {
		return false
	}
	return hasFoldAt(sql, i, word)
}

func isWordByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// applySQL is the SET that brings a session's pooled variables from one
// profile to another: each variable to the value the server reported for the
// client, or back to its baseline. Values are written as hexadecimal
// utf8mb4 literals (numbers as they are), so that no escaping rule, of any
// sql_mode, applies.
func applySQL(diff sqlpool.Diff, baseline map[string]string) string {
	var b strings.Builder
	b.WriteString("SET ")
	first := true
	add := func(name, value string) {
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString("SESSION ")
		b.WriteString(name) // a name the server reported, on the pooled list
		b.WriteString(" = ")
		writeLiteral(&b, value)
	}
	for _, s := range diff.Set {
		add(s.Name, s.Value)
	}
	for _, name := range diff.Reset {
		add(name, baseline[name])
	}
	return b.String()
}

func writeLiteral(b *strings.Builder, v string) {
	if v != "" && isNumber(v) {
		b.WriteString(v)
		return
	}
	if v == "" {
		b.WriteString("''")
		return
	}
	b.WriteString("_utf8mb4 X'")
	b.WriteString(hex.EncodeToString([]byte(v)))
	b.WriteString("'")
}

func isNumber(v string) bool {
	dot := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '-' && i == 0 && len(v) > 1:
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return true
}
