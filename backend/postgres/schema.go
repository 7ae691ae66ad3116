package postgres

import (
	"errors"

	"github.com/tether-php/tether/internal/sqltables"
)

// ErrSchemaChanged is wrapped by the error of a statement, inside a
// transaction, whose prepared form the schema changed under (another
// client's ALTER TABLE, DROP and CREATE): the server refused to run it and
// aborted the transaction. Rolling back and running the transaction again
// is safe: the statement is prepared afresh. Outside a transaction tetherd
// prepares it again and runs it itself.
var ErrSchemaChanged = errors.New("postgres: the schema changed under a prepared statement")

// maxSchemaTables bounds the tables schemaGens remembers; past it, the next
// DDL retires every statement and the memory starts over.
const maxSchemaTables = 4096

// schemaGens counts the DDL that ran through tetherd on one backend, per
// table, so that the statements prepared before it on any of the backend's
// connections are retired (closed and prepared again) before their next
// use, rather than run into "cached plan must not change result type"
// (which, in a transaction, aborts it). A statement records the generation
// it was prepared at (stmt.gen); it is stale once a DDL of a table it names,
// or a DDL whose tables are not known, came after. DDL by other clients is
// not seen here: the server's refusal of the Bind is the guard then (see
// conn). Loop goroutine only: every connection of a pool is on its loop.
type schemaGens struct {
	gen    uint64
	all    uint64            // the generation of the last DDL of unknown tables
	tables map[string]uint64 // the generation of each table's last DDL
}

// analyze records what makes st stale, and what st changes if it is DDL,
// from its text (sqltables), at the current generation.
func (g *schemaGens) analyze(st *stmt) {
	st.gen = g.gen
	info := sqltables.Analyze(sqltables.PostgreSQL, st.sql)
	switch {
	case info.Kind == sqltables.DDL:
		// A statement's own temporary table is the session's; the session
		// is reset before anyone else uses the connection.
		st.ddl = !info.Temporary
		st.ddlAll = !info.Certain || len(info.Tables) == 0
		st.ddlTables = info.Tables // they share st.sql's memory, kept as long
	case !info.Certain:
		st.anyTable = true
	default:
		st.tables = info.Tables
	}
}

// changed reports whether DDL since st was prepared changed a table it
// names; when none did, st is brought to the current generation.
func (g *schemaGens) changed(st *stmt) bool {
	if st.gen == g.gen {
		return false
	}
	if st.anyTable || g.all > st.gen {
		return true
	}
	for _, t := range st.tables {
		if g.tables[t] > st.gen {
			return true
		}
	}
	st.gen = g.gen
	return false
}

// bump records a DDL of tables (of unknown tables when all is set).
func (g *schemaGens) bump(tables []string, all bool) {
	g.gen++
	if all || len(g.tables)+len(tables) > maxSchemaTables {
		g.all = g.gen
		clear(g.tables)
		return
	}
	if g.tables == nil {
		g.tables = make(map[string]uint64)
	}
	for _, t := range tables {
		g.tables[t] = g.gen
	}
}
