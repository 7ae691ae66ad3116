// Package sqltables tells, from a statement's text alone, whether it reads,
// writes or changes the schema, which tables it reads or writes, whether
// its result may be cached and whether a replica may run it: the lexical
// analysis the shared result cache (issue 12) and read/write splitting
// (issue 21) run on every statement in tetherd's event loop.
//
// # Why a hand-written lexer
//
// The analysis runs on the hot path, once per statement, on the loop
// goroutine. A full SQL parser (vitess's sqlparser, TiDB's parser,
// pg_query through cgo) builds a syntax tree per statement, allocating in
// proportion to its length, and knows one dialect; this package walks the
// bytes once with a hand-written lexer, keeps a fixed stack of parenthesis
// levels, looks words up in a precomputed hash table, and allocates nothing
// with a reused Analyzer (Analyze allocates only the returned Tables): about
// a microsecond for a WordPress query (figures below). It does not validate
// SQL: it recognizes the positions where tables are named (FROM, JOIN, ',',
// UPDATE, INTO, USING, TABLE, the DDL heads) and the constructs that make a
// result uncacheable, and says so (Certain false) whenever what it sees
// leaves room for doubt. A cache can also keep an entry's Info with it, so
// that a hit does not analyze again.
//
// # Using it from a cache
//
//	info := analyzer.Analyze(sqltables.MySQL, sql)
//	switch {
//	case !info.Certain:
//		// may write anything: drop the backend's cache; do not cache
//	case info.Kind == sqltables.Write, info.Kind == sqltables.DDL:
//		// drop the entries that read any of info.Tables
//	case info.Cacheable:
//		// cache the result under info.Tables
//	}
//	if info.Session || info.Temporary {
//		// this session's reads may differ from other sessions' from now on
//	}
//
// Info.Tables holds unqualified, unquoted, lower-cased names: `db`.`Posts`,
// db.posts, "Posts" and posts all give "posts". A qualified name registers
// only its unqualified form, so a write to t always meets a read of db.t,
// whatever the default schema; the cost is over-invalidation between
// same-named tables of different schemas (and PostgreSQL's case-sensitive
// "T" and t), never a stale read. MySQL's table-name case sensitivity
// (lower_case_table_names) is covered the same way.
//
// # What it knows
//
// Kinds: SELECT, WITH ... SELECT, VALUES, TABLE, SHOW, DESCRIBE and EXPLAIN
// are reads (the last three never cacheable); INSERT, REPLACE, UPDATE,
// DELETE, MERGE, TRUNCATE, LOAD DATA, COPY ... FROM, REFRESH MATERIALIZED
// VIEW, PostgreSQL's data-modifying WITH (WITH x AS (UPDATE t ...) SELECT
// ...), SELECT ... INTO new_table and EXPLAIN ANALYZE of a write are
// writes; CREATE, ALTER, DROP and RENAME of tables, views and indexes are
// DDL (of other objects: DDL and uncertain); SET, DO (MySQL), transaction
// control, USE, LOCK, GRANT and the like are Other; CALL, EXECUTE,
// PostgreSQL's DO, MariaDB's BEGIN NOT ATOMIC and unknown statements are
// Other and uncertain.
//
// Tables: for reads, every table in FROM and JOIN lists, parenthesized
// joins, derived tables, subqueries anywhere, CTE bodies and UNION parts.
// For writes, the target of INSERT/REPLACE (not the tables of its SELECT),
// UPDATE's and DELETE's tables (for MySQL's multi-table forms, every table
// of the table list: which ones SET or the target list modify is not
// worked out, and a DELETE target that is an alias is reported as is),
// MERGE's target, PostgreSQL's UPDATE ... FROM and DELETE ... USING tables
// are read, not written. For DDL: the created, altered, dropped or renamed
// table or view (old and new names), the table of CREATE/DROP INDEX.
//
// Functions: a call of a function that is not a known built-in makes the
// statement uncertain, in both dialects: a PostgreSQL function or a MySQL
// stored function can write. Known non-deterministic or session-dependent
// built-ins (NOW, CURRENT_TIMESTAMP, RAND, UUID, LAST_INSERT_ID, FOUND_ROWS,
// USER, DATABASE, GET_LOCK, SLEEP, now(), random(), nextval, current_setting,
// txid_current, pg_* functions ...) make a read uncacheable, as do user and
// system variables, locking reads (FOR UPDATE, FOR SHARE, LOCK IN SHARE
// MODE), SELECT ... INTO, SQL_CALC_FOUND_ROWS (it sets FOUND_ROWS()),
// PostgreSQL's 'now'/'today' literals, and reads of information_schema,
// performance_schema, mysql, sys, pg_catalog or unqualified pg_* tables
// (their contents change without writes through Tether).
//
// Lexing: -- comments (MySQL: "-- " only, so 1--1 is arithmetic), # (MySQL
// only), /* */ (nested in PostgreSQL), MySQL's /*! */ and MariaDB's /*M! */
// executable comments whose content is lexed as SQL, strings with MySQL
// backslash escapes, PostgreSQL standard strings, E'...' strings, $$ and
// $tag$ dollar quoting, `x` and "x" identifiers with doubled-quote escapes,
// U&"x". Keywords inside strings, comments and quoted identifiers, or after
// a dot (t.from), never count. Anything unterminated makes the statement
// uncertain; so do unbalanced parentheses, several statements in one
// string, more than 64 tables or 64 nested parentheses, and a token that
// cannot be a table name where one is expected.
//
// # Read/write splitting
//
// Info.ReplicaSafe tells a router (issue 21) that a statement may run on a
// replica: a single Certain Read that takes no lock, writes nothing, leaves
// no trace on the session and reads nothing that only the primary or the
// session's own connection knows. When unsure, it is false: the primary.
// It is found in the same pass as Cacheable, at no measurable cost; every
// construct that clears it also clears Cacheable, so a Cacheable read is
// always ReplicaSafe, and ReplicaReason says why (a constant string):
//
//	if info.ReplicaSafe && !inTransaction && !sessionChanged {
//		// a replica may serve it (if its lag allows)
//	} else {
//		// the primary; info.ReplicaReason says why
//	}
//
// The rules, with the reason for each:
//
//   - Locking reads go to the primary, in any subquery, CTE or UNION part
//     and inside MySQL's /*! */ comments: FOR UPDATE, FOR SHARE, FOR NO KEY
//     UPDATE, FOR KEY SHARE, LOCK IN SHARE MODE. A replica's locks exclude
//     nobody on the primary.
//   - Lock functions: GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS and also
//     IS_FREE_LOCK and IS_USED_LOCK (they answer about the locks of the
//     server they run on, and the application's locks are the primary's);
//     every pg_advisory_* and pg_try_advisory_* function.
//   - SELECT ... INTO (variables, OUTFILE, DUMPFILE; PostgreSQL's INTO
//     new_table is a Write).
//   - Variables, read or assigned (@x, @x := ..., @@x): a user variable has
//     its value only in the session, on the primary (a replica's is NULL);
//     a system variable may differ between servers (read_only, server_id,
//     gtid_*). PostgreSQL's current_setting(), set_config() and setseed()
//     likewise, and SHOW (a setting) in PostgreSQL.
//   - Sequences: nextval, setval, currval, lastval, MariaDB's NEXTVAL,
//     LASTVAL, NEXT VALUE FOR and PREVIOUS VALUE FOR. nextval writes;
//     currval and lastval read what the session's nextval returned.
//   - The session's previous statement: LAST_INSERT_ID() (with or without
//     an argument, which sets it), FOUND_ROWS(), ROW_COUNT(), and
//     SQL_CALC_FOUND_ROWS (it sets the FOUND_ROWS() that follows, which runs
//     on the primary). WordPress's paged queries therefore stay on the
//     primary; a router that pinned such a pair to one replica connection
//     could do better.
//   - What names one server or connection: CONNECTION_ID(), VERSION(),
//     inet_server_addr() and the like, LOAD_FILE(), the replication waits
//     (MASTER_GTID_WAIT ...), txid_current() (it assigns a transaction id:
//     an error on a standby) and the other txid_* functions, EXPLAIN FOR
//     CONNECTION, HANDLER (the session's handlers), CHECK and CHECKSUM TABLE
//     (one server's copy), COPY (it may write a server file or run a
//     program; TO STDOUT would do but is not told apart).
//   - PostgreSQL's pg_* functions, except a short list known to be harmless
//     (pg_sleep, pg_typeof, the size and pg_get_*def functions ...): the
//     others include pg_notify, pg_backend_pid, pg_is_in_recovery,
//     pg_current_wal_lsn, pg_terminate_backend.
//   - System tables of runtime state: all of performance_schema and sys,
//     and in information_schema, mysql and pg_catalog every table but those
//     that describe the schema and the users (information_schema.TABLES,
//     COLUMNS ..., mysql.user, pg_class, pg_tables ...): PROCESSLIST,
//     GLOBAL_STATUS, mysql.gtid_slave_pos, pg_stat_*, pg_locks, pg_settings
//     differ between servers.
//   - MySQL's SHOW, except the statements that list the schema (SHOW
//     [FULL] TABLES, COLUMNS, FIELDS, INDEX, KEYS, DATABASES, CREATE ...,
//     TABLE STATUS, CHARACTER SET, COLLATION, TRIGGERS) and HELP: SHOW
//     MASTER/SLAVE/REPLICA STATUS, PROCESSLIST, [SESSION|GLOBAL] STATUS
//     and VARIABLES, WARNINGS, BINARY LOGS, ENGINE, GRANTS ... go to the
//     primary.
//   - EXPLAIN and DESCRIBE are replica-safe; EXPLAIN ANALYZE (and MariaDB's
//     ANALYZE) runs the statement, so it is judged as the statement is
//     (a write, a FOR UPDATE, a nextval: the primary), as is a plain
//     EXPLAIN of them, conservatively.
//
// Replica-safe although not cacheable: NOW(), CURRENT_TIMESTAMP, RAND(),
// UUID(), gen_random_uuid(), SLEEP(), USER(), CURRENT_USER, DATABASE(),
// current_schema(), the catalog tables, EXPLAIN, DESCRIBE, the schema SHOWs.
//
// ReplicaSafe judges the statement alone. The router must still keep on
// the primary a statement inside a transaction and, from then on, a
// session that has changed its state (a statement with Session or
// Temporary, or any SET), and must accept that a replica's answer is as
// old as its lag (read-your-writes is the router's). A statement whose
// effect hides in a view, a trigger or a function the lexer takes for
// built-in is not seen; unknown functions make the statement uncertain,
// hence primary.
//
// # Known gaps (the cache must cover them)
//
//   - Views: a read of a view reports the view, not its base tables; a write
//     to a base table does not invalidate it. The cache must expand views from
//     the catalog (PostgreSQL's view_table_usage, MySQL's
//     information_schema.VIEWS) or not cache reads of views.
//   - Triggers and foreign keys with ON DELETE/UPDATE CASCADE or SET NULL
//     write tables the statement does not name; so do stored functions
//     called from DDL (CREATE TABLE t AS SELECT f()), which are not checked.
//   - Temporary tables: a session's temporary t hides the permanent t and
//     nothing in a SELECT shows it. Info.Temporary marks the statements that
//     create one; the cache must stop sharing that session's reads.
//   - Sequences read as tables (SELECT last_value FROM s) change through
//     nextval, which is no write to them.
//   - Session state beyond functions: time_zone (TIMESTAMP columns), sql_mode,
//     collation, search_path change results; the cache must key on or stop
//     at SETs (issue 12). A cache hit does not update FOUND_ROWS() or
//     ROW_COUNT() for the session.
//   - MySQL's sql_mode ANSI_QUOTES and NO_BACKSLASH_ESCAPES change the
//     lexing: pass them (MySQL|ANSIQuotes|NoBackslashEscapes) when the
//     session has them. Without ANSIQuotes a "x" table name makes the
//     statement uncertain; without NoBackslashEscapes a string ending in a
//     backslash is misread. PostgreSQL's standard_conforming_strings off is
//     not supported (backslashes in '...' strings would be misread).
//   - PostgreSQL row-level security policies and views that use current_user
//     or current_setting() make a plain SELECT depend on the session.
//   - Executable comments are code whatever their version number.
//   - CTE names are reported as tables read (WITH x AS ... FROM x gives x),
//     which only over-invalidates; unqualified information_schema tables
//     read with that schema as the default are not recognized as system
//     tables.
//   - The known-function list is one list for both dialects.
//
// # Cost
//
// go test -bench . -benchmem -count 5 ./internal/sqltables/ (medians; Intel
// Xeon, 2 vCPU shared with other work, go1.26; the statements are in
// analyzer_test.go):
//
//	                                        Analyzer (reused)   Analyze
//	WordPress term query, 3-table JOIN      1233 ns, 0 allocs   1372 ns, 1 alloc (48 B)
//	WordPress posts query, LEFT JOIN        1200 ns, 0 allocs   1267 ns, 1 alloc (32 B)
//	WordPress INSERT ... ON DUPLICATE KEY    844 ns, 0 allocs    857 ns, 1 alloc (16 B)
//	PostgreSQL SELECT with LEFT JOIN         995 ns, 0 allocs   1027 ns, 1 alloc (32 B)
//
// ReplicaSafe added about 0.5% to the instructions per statement (callgrind,
// Analyzer, the four statements: +0.4, +0.9, -0.3, +0.7%; the timings of a
// shared machine could not tell the two apart) and no allocation.
//
// A word costs one hash-table probe, a byte one class-table load; a
// table name that is not lower-case ASCII is lower-cased once per Analyzer
// and remembered (up to 4096 spellings).
package sqltables
