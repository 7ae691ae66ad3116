package sqltables

import "strings"

// Dialect selects the lexical rules and built-ins of a SQL dialect.
type Dialect uint8

const (
	// MySQL is MySQL and MariaDB with the default sql_mode: "x" is a
	// string, backslash escapes in strings, # and "-- " comments,
	// /*! */ and /*M! */ executable comments.
	MySQL Dialect = iota + 1
	// PostgreSQL is PostgreSQL with standard_conforming_strings on: "x" is
	// an identifier, E'' strings take backslash escapes, $$ and $tag$
	// quoting, nested comments, ::casts.
	PostgreSQL

	// ANSIQuotes, or-ed with MySQL, is sql_mode ANSI_QUOTES: "x" is an
	// identifier.
	ANSIQuotes Dialect = 1 << 6
	// NoBackslashEscapes, or-ed with MySQL, is sql_mode
	// NO_BACKSLASH_ESCAPES: a backslash in a string is an ordinary byte
	// (the server reports the mode in every OK packet's status flags).
	NoBackslashEscapes Dialect = 1 << 7
)

// Kind is what a statement does to tables.
type Kind uint8

const (
	// Other reads and writes no table: SET, BEGIN, COMMIT, CALL, DO, an
	// empty statement. CALL and the like are Other but not Certain.
	Other Kind = iota
	// Read only reads: SELECT, WITH ... SELECT, VALUES, TABLE, SHOW,
	// EXPLAIN of a read.
	Read
	// Write changes rows: INSERT, UPDATE, DELETE, REPLACE, MERGE, LOAD
	// DATA, TRUNCATE, COPY ... FROM, a PostgreSQL data-modifying WITH or
	// SELECT ... INTO new_table.
	Write
	// DDL changes the schema: CREATE, ALTER, DROP, RENAME.
	DDL
)

func (k Kind) String() string {
	switch k {
	case Read:
		return "read"
	case Write:
		return "write"
	case DDL:
		return "ddl"
	}
	return "other"
}

// rank orders kinds for a multi-statement string, which is as strong as its
// strongest statement.
func (k Kind) rank() int {
	switch k {
	case Read:
		return 1
	case Other:
		return 2
	case Write:
		return 3
	}
	return 4
}

// Info is what Analyze finds in a statement.
type Info struct {
	Kind Kind
	// Tables are the tables a Read reads, or the tables a Write or DDL
	// writes (creates, alters, drops, renames: old and new names), each
	// once, in order of appearance; nil for Other. A name is the
	// unqualified, unquoted, lower-cased table name: `db`.`T` and t give
	// "t". Matching on it can only over-invalidate (the same name in two
	// schemas, PostgreSQL's "T" and t), never miss a table. A name may
	// share memory with sql: strings.Clone one kept longer than sql.
	Tables []string
	// Certain is false when the analysis may have missed a table or a
	// write: an unterminated string or comment, unbalanced parentheses,
	// several statements, a CALL, a call of a function not known to be
	// read-only (it might write), a construct the lexer does not know. A
	// cache must then treat the statement as a write to every table
	// (drop the backend's cache) and must not cache its result.
	Certain bool
	// Cacheable is true for a Certain Read whose result depends only on
	// the rows of Tables (and the session's settings): no NOW(), RAND(),
	// variable, lock, FOR UPDATE, SELECT ... INTO or system table.
	Cacheable bool
	// Reason says why Cacheable is false: the first cause of uncertainty
	// when Certain is false, else the first non-cacheable construct, else
	// "not a read". Empty when Cacheable. It is a constant string: keeping
	// it allocates nothing.
	Reason string
	// Temporary is true when the statement creates a temporary table
	// (CREATE TEMPORARY TABLE, PostgreSQL SELECT ... INTO TEMP). From then
	// on the session's reads may name a table only it can see, which the
	// cache must not share with other sessions.
	Temporary bool
	// Session is true when the statement changes session state that later
	// statements' results may depend on: SET, USE, RESET, DISCARD,
	// PostgreSQL's set_config(). The cache must stop sharing the session's
	// reads with others (or key them on that state) from then on.
	Session bool
	// ReplicaSafe is true for a Certain Read, a single statement, that a
	// replica may run in place of the primary: it takes no lock (FOR
	// UPDATE, FOR SHARE, LOCK IN SHARE MODE, GET_LOCK(),
	// pg_advisory_lock()), writes nothing (SELECT ... INTO, nextval()),
	// leaves no trace on the session (variables, set_config(),
	// SQL_CALC_FOUND_ROWS), reads nothing only the session's connection
	// or the primary knows (LAST_INSERT_ID(), FOUND_ROWS(), ROW_COUNT(),
	// currval(), variables, settings, the server's runtime state: most
	// SHOW statements, performance_schema, pg_stat_*), and calls no
	// function not known to be harmless on a replica. NOW(), RAND(),
	// UUID(), SLEEP(), the catalog tables (information_schema.TABLES,
	// pg_class), EXPLAIN and DESCRIBE make a read uncacheable but are
	// replica-safe; a Cacheable Info is always ReplicaSafe. When unsure,
	// false: the primary. It speaks of the statement alone: a router must
	// still keep a transaction, and a session that has changed its state
	// (Session, Temporary), on the primary, and the data a replica
	// returns is as old as its lag.
	ReplicaSafe bool
	// ReplicaReason says why ReplicaSafe is false: Reason when Certain is
	// false, "not a read" for a statement of another Kind, else the first
	// construct that must run on the primary. Empty when ReplicaSafe. It
	// is a constant string: keeping it allocates nothing.
	ReplicaReason string
}

// TableName names a table given as a plain name (the key API's table, "app.Users"
// or "`Users`") the way Info.Tables names those a statement reads or writes:
// unqualified, unquoted, lower case. Writes found by Analyze and reads named
// so meet in the result cache under one name.
func TableName(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.ToLower(strings.Trim(name, "`\""))
}
