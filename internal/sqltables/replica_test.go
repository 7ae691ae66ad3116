package sqltables_test

import (
	"testing"

	"github.com/tether-php/tether/internal/sqltables"
)

const (
	ansi = sqltables.ANSIQuotes
	nbe  = sqltables.NoBackslashEscapes
)

// replicaCases: whether each statement may run on a replica. Each rule has
// a statement it sends to the primary and one that stays on a replica.
var replicaCases = []struct {
	name string
	d    sqltables.Dialect
	sql  string
	safe bool
}{
	// Plain reads.
	{"Select", my, "SELECT * FROM t WHERE id = 1", true},
	{"SelectPG", pg, "SELECT * FROM t WHERE id = $1", true},
	{"LowerCase", my, "select a, b from t join u on t.id = u.id where a in (select a from v)", true},
	{"Union", my, "SELECT a FROM t UNION ALL SELECT a FROM u", true},
	{"ParenUnion", my, "(SELECT a FROM t) UNION (SELECT a FROM u) ORDER BY a", true},
	{"With", pg, "WITH x AS (SELECT * FROM t) SELECT * FROM x JOIN u ON true", true},
	{"WithRecursive", pg, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 3) SELECT * FROM r", true},
	{"Subquery", pg, "SELECT * FROM t WHERE a = ANY (SELECT b FROM u)", true},
	{"SystemTime", my, "SELECT * FROM t FOR SYSTEM_TIME ALL", true},

	// Volatile but harmless on a replica: not cacheable, replica-safe.
	{"Now", my, "SELECT NOW(), RAND(), UUID(), UUID_SHORT(), SYSDATE(), UNIX_TIMESTAMP() FROM t", true},
	{"NowPG", pg, "SELECT now(), random(), gen_random_uuid(), clock_timestamp(), CURRENT_TIMESTAMP", true},
	{"Sleep", my, "SELECT SLEEP(0), BENCHMARK(1, 1)", true},
	{"User", my, "SELECT USER(), CURRENT_USER, DATABASE(), SCHEMA()", true},
	{"UserPG", pg, "SELECT current_user, session_user, current_schema(), current_database()", true},
	{"PgSleep", pg, "SELECT pg_sleep(0.1)", true},
	{"PgSize", pg, "SELECT pg_size_pretty(pg_total_relation_size('t')), pg_typeof(1)", true},
	{"PgCatalogFunction", pg, "SELECT pg_catalog.pg_get_viewdef('v'::regclass)", true},
	{"InformationSchema", my, "SELECT * FROM information_schema.tables WHERE table_schema = 'db'", true},
	{"InformationSchemaUpper", my, "SELECT * FROM INFORMATION_SCHEMA.COLUMNS", true},
	{"MySQLUser", my, "SELECT user FROM mysql.user", true},
	{"PgClass", pg, "SELECT * FROM pg_catalog.pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace", true},
	{"PgTables", pg, "SELECT tablename FROM pg_tables", true},
	{"InformationSchemaPG", pg, "SELECT column_name FROM information_schema.columns WHERE table_name = $1", true},

	// Keywords in strings, comments and quoted identifiers.
	{"ForUpdateInString", my, "SELECT 'FOR UPDATE' FROM t", true},
	{"ForUpdateInDoubleQuotedString", my, `SELECT "FOR UPDATE", 'GET_LOCK(1)' FROM t`, true},
	{"ForUpdateInStringPG", pg, "SELECT 'FOR UPDATE', $$ FOR UPDATE $$, $q$ nextval('s') $q$ FROM t", true},
	{"ForUpdateInLineComment", my, "SELECT * FROM t -- FOR UPDATE", true},
	{"ForUpdateInHashComment", my, "SELECT * FROM t # FOR UPDATE", true},
	{"ForUpdateInBlockComment", my, "SELECT * FROM t /* FOR UPDATE */", true},
	{"ForUpdateInNestedCommentPG", pg, "SELECT * FROM t /* a /* b */ FOR UPDATE */", true},
	{"ForUpdateInEscapedString", my, `SELECT 'it\'s FOR UPDATE' FROM t`, true},
	{"ForUpdateInQuotedIdentifier", pg, `SELECT "for" FROM t AS "update"`, true},
	{"ForUpdateAnsiQuotes", my | ansi, `SELECT "FOR UPDATE" FROM "t"`, true},
	{"ForUpdateAnsiQuotesCode", my | ansi, `SELECT "a" FROM "t" FOR UPDATE`, false},
	{"BackslashHidesForUpdate", my, `SELECT 'a\' FOR UPDATE, ' FROM t`, true},
	{"NoBackslashEscapesForUpdate", my | nbe, `SELECT 'a\', 1 FROM t FOR UPDATE`, false},
	{"NoBackslashEscapesString", my | nbe, `SELECT 'a\' FROM t WHERE b = 'FOR UPDATE'`, true},
	{"ForUpdateAfterString", my, "SELECT * FROM t WHERE a = 'FOR UPDATE' FOR UPDATE", false},

	// Locking reads.
	{"ForUpdate", my, "SELECT * FROM t WHERE id = 1 FOR UPDATE", false},
	{"ForUpdateLower", my, "select * from t where id = 1 for update", false},
	{"ForUpdateMixed", pg, "SeLeCt * FrOm t FoR uPdAtE", false},
	{"ForShare", my, "SELECT * FROM t FOR SHARE", false},
	{"ForUpdateSkipLocked", pg, "SELECT * FROM t FOR UPDATE OF t SKIP LOCKED", false},
	{"ForNoKeyUpdate", pg, "SELECT * FROM t FOR NO KEY UPDATE", false},
	{"ForKeyShare", pg, "SELECT * FROM t FOR KEY SHARE NOWAIT", false},
	{"LockInShareMode", my, "SELECT * FROM t LOCK IN SHARE MODE", false},
	{"ExecutableCommentForUpdate", my, "SELECT * FROM t /*! FOR UPDATE */", false},
	{"ExecutableCommentVersion", my, "SELECT * FROM t /*!80000 FOR SHARE */", false},
	{"MariaDBCommentForUpdate", my, "SELECT * FROM t /*M!100000 FOR UPDATE */", false},
	{"ExecutableCommentIsACommentInPG", pg, "SELECT * FROM t /*! FOR UPDATE */", true},
	{"SubqueryForUpdate", pg, "SELECT * FROM t WHERE id IN (SELECT id FROM u FOR UPDATE)", false},
	{"DerivedForUpdate", my, "SELECT * FROM (SELECT * FROM u FOR UPDATE) x", false},
	{"UnionForUpdate", my, "SELECT a FROM t UNION SELECT a FROM u FOR UPDATE", false},
	{"ParenUnionForUpdate", my, "(SELECT a FROM t FOR UPDATE) UNION (SELECT a FROM u)", false},
	{"CTEForUpdate", pg, "WITH x AS (SELECT * FROM t FOR UPDATE) SELECT * FROM x", false},

	// Lock functions.
	{"GetLock", my, "SELECT GET_LOCK('x', 1)", false},
	{"GetLockLower", my, "select get_lock('x', 1)", false},
	{"ReleaseLock", my, "SELECT RELEASE_LOCK('x')", false},
	{"ReleaseAllLocks", my, "SELECT RELEASE_ALL_LOCKS()", false},
	{"IsUsedLock", my, "SELECT IS_USED_LOCK('x')", false},
	{"IsFreeLock", my, "SELECT * FROM t WHERE IS_FREE_LOCK('x')", false},
	{"AdvisoryLock", pg, "SELECT pg_advisory_lock(1)", false},
	{"AdvisoryLockUpper", pg, "SELECT PG_ADVISORY_LOCK(1)", false},
	{"TryAdvisoryLock", pg, "SELECT pg_try_advisory_lock(1)", false},
	{"AdvisoryXactLock", pg, "SELECT pg_advisory_xact_lock(1)", false},
	{"TryAdvisoryXactLockShared", pg, "SELECT * FROM t WHERE pg_try_advisory_xact_lock_shared(t.id)", false},
	{"AdvisoryUnlock", pg, "SELECT pg_advisory_unlock(1)", false},
	{"AdvisoryUnlockAll", pg, "SELECT pg_advisory_unlock_all()", false},
	{"QualifiedAdvisoryLock", pg, "SELECT pg_catalog.pg_advisory_lock(1)", false},

	// SELECT ... INTO.
	{"IntoVariable", my, "SELECT a INTO @x FROM t", false},
	{"IntoVariableAtEnd", my, "SELECT a FROM t LIMIT 1 INTO @x", false},
	{"IntoOutfile", my, "SELECT * FROM t INTO OUTFILE '/tmp/x'", false},
	{"IntoDumpfile", my, "SELECT a FROM t LIMIT 1 INTO DUMPFILE '/tmp/x'", false},
	{"IntoTablePG", pg, "SELECT * INTO new_t FROM t", false},
	{"IntoTempPG", pg, "SELECT * INTO TEMP new_t FROM t", false},
	{"IntoInString", my, "SELECT 'INTO @x' FROM t", true},

	// Variables.
	{"AssignVariable", my, "SELECT @x := 1", false},
	{"AssignVariableInQuery", my, "SELECT @rn := @rn + 1, a FROM t", false},
	{"ReadUserVariable", my, "SELECT * FROM t WHERE a = @x", false},
	{"ReadSystemVariable", my, "SELECT @@read_only", false},
	{"ReadSessionVariable", my, "SELECT @@SESSION.sql_mode", false},
	{"VariableInString", my, "SELECT '@x := 1' FROM t", true},
	{"AtOperatorPG", pg, "SELECT @ -5", true},

	// Sequences.
	{"Nextval", pg, "SELECT nextval('s')", false},
	{"NextvalUpper", pg, "SELECT NEXTVAL('s')", false},
	{"NextvalQualified", pg, "SELECT pg_catalog.nextval('s')", false},
	{"Setval", pg, "SELECT setval('s', 1)", false},
	{"Currval", pg, "SELECT currval('s')", false},
	{"Lastval", pg, "SELECT lastval()", false},
	{"NextvalInFrom", pg, "SELECT * FROM nextval('s')", false},
	{"NextvalMariaDB", my, "SELECT NEXTVAL(s)", false},
	{"LastvalMariaDB", my, "SELECT LASTVAL(s)", false},
	{"NextValueFor", my, "SELECT NEXT VALUE FOR s", false},
	{"PreviousValueFor", my, "SELECT PREVIOUS VALUE FOR s", false},
	{"SequenceRead", pg, "SELECT last_value FROM s", true},

	// The session's previous statement.
	{"LastInsertID", my, "SELECT LAST_INSERT_ID()", false},
	{"LastInsertIDExpr", my, "SELECT LAST_INSERT_ID(5)", false},
	{"LastInsertIDInWhere", my, "SELECT * FROM t WHERE id = LAST_INSERT_ID()", false},
	{"FoundRows", my, "SELECT FOUND_ROWS()", false},
	{"RowCount", my, "SELECT ROW_COUNT()", false},
	{"CalcFoundRows", my, "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", false},
	{"NoCalcFoundRows", my, "SELECT SQL_NO_CACHE * FROM t LIMIT 10", true},

	// Settings and server state.
	{"SetConfig", pg, "SELECT set_config('app.user', $1, false)", false},
	{"CurrentSetting", pg, "SELECT current_setting('transaction_read_only')", false},
	{"Setseed", pg, "SELECT setseed(0.5)", false},
	{"TxidCurrent", pg, "SELECT txid_current()", false},
	{"TxidSnapshot", pg, "SELECT txid_current_snapshot()", false},
	{"CurrentXactID", pg, "SELECT pg_current_xact_id()", false},
	{"BackendPid", pg, "SELECT pg_backend_pid()", false},
	{"Notify", pg, "SELECT pg_notify('c', 'x')", false},
	{"IsInRecovery", pg, "SELECT pg_is_in_recovery()", false},
	{"CurrentWalLsn", pg, "SELECT pg_current_wal_lsn()", false},
	{"TerminateBackend", pg, "SELECT pg_terminate_backend(1)", false},
	{"InetServerAddr", pg, "SELECT inet_server_addr()", false},
	{"ConnectionID", my, "SELECT CONNECTION_ID()", false},
	{"Version", my, "SELECT VERSION()", false},
	{"LoadFile", my, "SELECT LOAD_FILE('/etc/passwd')", false},
	{"MasterGtidWait", my, "SELECT MASTER_GTID_WAIT('0-1-1', 1)", false},

	// System tables: the catalog stays, runtime state goes to the primary.
	{"PerformanceSchema", my, "SELECT * FROM performance_schema.threads", false},
	{"PerformanceSchemaTables", my, "SELECT * FROM performance_schema.tables", false},
	{"Sys", my, "SELECT * FROM sys.session", false},
	{"Processlist", my, "SELECT * FROM information_schema.PROCESSLIST", false},
	{"GlobalStatus", my, "SELECT * FROM information_schema.global_status", false},
	{"GtidSlavePos", my, "SELECT * FROM mysql.gtid_slave_pos", false},
	{"PgStatActivity", pg, "SELECT * FROM pg_stat_activity", false},
	{"PgStatReplication", pg, "SELECT * FROM pg_catalog.pg_stat_replication", false},
	{"PgLocks", pg, "SELECT * FROM pg_locks", false},
	{"PgSettings", pg, "SELECT name, setting FROM pg_settings", false},
	{"CatalogAndState", pg, "SELECT * FROM pg_class JOIN pg_stat_user_tables USING (relname)", false},

	// SHOW, HELP, HANDLER, CHECK, DESCRIBE, EXPLAIN.
	{"ShowTables", my, "SHOW TABLES", true},
	{"ShowFullTables", my, "SHOW FULL TABLES LIKE 'wp_%'", true},
	{"ShowFullColumns", my, "SHOW FULL COLUMNS FROM t", true},
	{"ShowColumnsLower", my, "show columns from t", true},
	{"ShowIndex", my, "SHOW INDEX FROM t", true},
	{"ShowCreateTable", my, "SHOW CREATE TABLE t", true},
	{"ShowTableStatus", my, "SHOW TABLE STATUS LIKE 't'", true},
	{"ShowDatabases", my, "SHOW DATABASES", true},
	{"ShowCharacterSet", my, "SHOW CHARACTER SET", true},
	{"Help", my, "HELP 'select'", true},
	{"ShowMasterStatus", my, "SHOW MASTER STATUS", false},
	{"ShowBinaryLogStatus", my, "SHOW BINARY LOG STATUS", false},
	{"ShowSlaveStatus", my, "SHOW SLAVE STATUS", false},
	{"ShowReplicaStatus", my, "SHOW REPLICA STATUS", false},
	{"ShowAllSlavesStatus", my, "SHOW ALL SLAVES STATUS", false},
	{"ShowProcesslist", my, "SHOW PROCESSLIST", false},
	{"ShowFullProcesslist", my, "SHOW FULL PROCESSLIST", false},
	{"ShowSessionStatus", my, "SHOW SESSION STATUS", false},
	{"ShowStatus", my, "SHOW STATUS LIKE 'Threads%'", false},
	{"ShowGlobalStatus", my, "SHOW GLOBAL STATUS", false},
	{"ShowSessionVariables", my, "SHOW SESSION VARIABLES LIKE 'read_only'", false},
	{"ShowVariables", my, "show variables", false},
	{"ShowWarnings", my, "SHOW WARNINGS", false},
	{"ShowBinaryLogs", my, "SHOW BINARY LOGS", false},
	{"ShowEngineStatus", my, "SHOW ENGINE INNODB STATUS", false},
	{"ShowOpenTables", my, "SHOW OPEN TABLES", false},
	{"ShowGrants", my, "SHOW GRANTS", false},
	{"Handler", my, "HANDLER t OPEN", false},
	{"HandlerRead", my, "HANDLER t READ FIRST", false},
	{"CheckTable", my, "CHECK TABLE t", false},
	{"ChecksumTable", my, "CHECKSUM TABLE t", false},
	{"ShowPG", pg, "SHOW search_path", false},
	{"ShowTransactionReadOnlyPG", pg, "SHOW transaction_read_only", false},
	{"ShowAllPG", pg, "SHOW ALL", false},
	{"Describe", my, "DESCRIBE t", true},
	{"Desc", my, "DESC t", true},
	{"ExplainTable", my, "EXPLAIN t", true},
	{"Explain", my, "EXPLAIN SELECT * FROM t", true},
	{"ExplainFormat", my, "EXPLAIN FORMAT=JSON SELECT * FROM t", true},
	{"ExplainForConnection", my, "EXPLAIN FOR CONNECTION 5", false},
	{"ExplainFormatForConnection", my, "EXPLAIN FORMAT=JSON FOR CONNECTION 5", false},
	{"ExplainAnalyze", pg, "EXPLAIN ANALYZE SELECT * FROM t", true},
	{"ExplainAnalyzeOptions", pg, "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM t", true},
	{"ExplainAnalyzeMySQL", my, "EXPLAIN ANALYZE SELECT * FROM t", true},
	{"AnalyzeMariaDB", my, "ANALYZE SELECT * FROM t", true},
	{"ExplainAnalyzeForUpdate", pg, "EXPLAIN ANALYZE SELECT * FROM t FOR UPDATE", false},
	{"ExplainAnalyzeNextval", pg, "EXPLAIN ANALYZE SELECT nextval('s')", false},
	{"ExplainAnalyzeDelete", pg, "EXPLAIN ANALYZE DELETE FROM t", false},
	{"ExplainOptionsUpdate", pg, "EXPLAIN (ANALYZE) UPDATE t SET a = 1", false},
	{"ExplainAnalyzeGetLock", my, "EXPLAIN ANALYZE SELECT GET_LOCK('x', 1)", false},
	{"AnalyzeMariaDBForUpdate", my, "ANALYZE SELECT * FROM t FOR UPDATE", false},
	{"ExplainUpdate", my, "EXPLAIN UPDATE t SET a = 1", false},
	{"CopyTo", pg, "COPY t TO STDOUT", false},
	{"CopyQueryToFile", pg, "COPY (SELECT * FROM t) TO '/tmp/x'", false},

	// Data-modifying WITH.
	{"WithDelete", pg, "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", false},
	{"WithUpdate", pg, "WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x", false},
	{"WithInsertLater", pg, "WITH a AS (SELECT 1), b AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM a, b", false},

	// Not a single certain read.
	{"Insert", my, "INSERT INTO t VALUES (1)", false},
	{"Update", pg, "UPDATE t SET a = 1", false},
	{"Delete", my, "DELETE FROM t", false},
	{"Begin", my, "BEGIN", false},
	{"StartTransactionReadOnly", my, "START TRANSACTION READ ONLY", false},
	{"SetNames", my, "SET NAMES utf8mb4", false},
	{"SetVariable", my, "SET @x = 1", false},
	{"LockTables", my, "LOCK TABLES t READ", false},
	{"Create", my, "CREATE TABLE t (a int)", false},
	{"Call", my, "CALL p()", false},
	{"Do", my, "DO SLEEP(1)", false},
	{"TwoReads", my, "SELECT 1; SELECT 2", false},
	{"UnknownFunction", my, "SELECT my_func(a) FROM t", false},
	{"UnknownFunctionPG", pg, "SELECT f() FROM t", false},
	{"Unterminated", my, "SELECT * FROM t WHERE a = 'x", false},
	{"UnterminatedExecutable", my, "SELECT * FROM t /*! FOR UPDATE", false},
	{"Empty", my, "", false},
	{"UnknownDialect", 0, "SELECT 1", false},
}

func TestAnalyze_ReplicaSafe(t *testing.T) {
	var a sqltables.Analyzer
	for _, tc := range replicaCases {
		t.Run(dialectName(tc.d)+"/"+tc.name, func(t *testing.T) {
			got := sqltables.Analyze(tc.d, tc.sql)
			if got.ReplicaSafe != tc.safe {
				t.Errorf("Analyze(%q).ReplicaSafe = %v, want %v (%s, certain=%v, reason %q, replica reason %q)",
					tc.sql, got.ReplicaSafe, tc.safe, got.Kind, got.Certain, got.Reason, got.ReplicaReason)
			}
			if got.ReplicaSafe != (got.ReplicaReason == "") {
				t.Errorf("Analyze(%q): ReplicaSafe %v with ReplicaReason %q", tc.sql, got.ReplicaSafe, got.ReplicaReason)
			}
			if again := a.Analyze(tc.d, tc.sql); again.ReplicaSafe != got.ReplicaSafe || again.ReplicaReason != got.ReplicaReason {
				t.Errorf("Analyzer.Analyze(%q) = %+v, Analyze = %+v", tc.sql, again, got)
			}
		})
	}
}

// TestAnalyze_ReplicaSafeCases: every statement of the main table that is
// Cacheable is ReplicaSafe, and a ReplicaSafe one is a certain read.
func TestAnalyze_ReplicaSafeCases(t *testing.T) {
	for _, tc := range cases {
		got := sqltables.Analyze(tc.d, tc.sql)
		if got.Cacheable && !got.ReplicaSafe {
			t.Errorf("Analyze(%q) is Cacheable but not ReplicaSafe: %q", tc.sql, got.ReplicaReason)
		}
		if got.ReplicaSafe && (!got.Certain || got.Kind != read || got.Session || got.Temporary) {
			t.Errorf("Analyze(%q) = %+v: ReplicaSafe but not a certain read", tc.sql, got)
		}
	}
}

func TestAnalyze_ReplicaReason(t *testing.T) {
	for _, tc := range []struct {
		d      sqltables.Dialect
		sql    string
		reason string
	}{
		{my, "SELECT * FROM t", ""},
		{my, "SELECT NOW()", ""},
		{my, "SELECT 1; SELECT 2", "several statements"},
		{my, "SELECT f(1)", "calls a function not known to be read-only, which might write"},
		{my, "INSERT INTO t VALUES (1)", "not a read"},
		{my, "SELECT * FROM t FOR UPDATE", "is a locking read (FOR UPDATE, FOR SHARE), whose locks must be the primary's"},
		{my, "SELECT * FROM t LOCK IN SHARE MODE", "is a locking read (LOCK IN SHARE MODE), whose locks must be the primary's"},
		{my, "SELECT GET_LOCK('a', 1)", "calls GET_LOCK(), which takes, releases or tests a lock on the server it runs on"},
		{pg, "SELECT pg_advisory_lock(1)", "calls a PostgreSQL system function not known to be harmless on a replica (locks, notifications, server state)"},
		{my, "SELECT a INTO @x FROM t", "is a SELECT ... INTO, which sets variables or writes a file"},
		{my, "SELECT @x := 1", "uses a user or system variable, which lives in the session on the primary or differs between servers"},
		{my, "SELECT * FROM t INTO OUTFILE '/x'", "is a SELECT ... INTO, which sets variables or writes a file"},
		{pg, "SELECT nextval('s')", "uses a sequence, which the primary owns and the session's nextval set"},
		{my, "SELECT FOUND_ROWS()", "reads the session's previous statement (LAST_INSERT_ID(), FOUND_ROWS(), ROW_COUNT())"},
		{pg, "SELECT set_config('a.b', 'c', false)", "reads or changes a setting of the session or the server"},
		{my, "SHOW SLAVE STATUS", "is a SHOW of server or session state (status, variables, processlist, replication, warnings), which differs between servers"},
		{pg, "SELECT * FROM pg_stat_activity", "reads a system table of the server's runtime state, which differs between servers"},
		// The first reason is kept.
		{my, "SELECT GET_LOCK('a', 1) FROM t FOR UPDATE", "calls GET_LOCK(), which takes, releases or tests a lock on the server it runs on"},
	} {
		if got := sqltables.Analyze(tc.d, tc.sql).ReplicaReason; got != tc.reason {
			t.Errorf("Analyze(%q).ReplicaReason = %q, want %q", tc.sql, got, tc.reason)
		}
	}
}

func TestInfo_MayWrite(t *testing.T) {
	for _, c := range []struct {
		d    sqltables.Dialect
		sql  string
		want bool
	}{
		{sqltables.MySQL, "SELECT * FROM t WHERE id = 1", false},
		{sqltables.MySQL, "SELECT * FROM t WHERE id = 1 FOR UPDATE", false},
		{sqltables.MySQL, "SELECT FOUND_ROWS()", false},
		{sqltables.MySQL, "SET NAMES utf8mb4", false},
		{sqltables.MySQL, "SET SESSION sql_mode = 'ANSI'", false},
		{sqltables.PostgreSQL, "SET application_name = 'x'", false},
		{sqltables.MySQL, "INSERT INTO t VALUES (1)", true},
		{sqltables.MySQL, "UPDATE t SET v = 1", true},
		{sqltables.MySQL, "ALTER TABLE t ADD c INT", true},
		{sqltables.MySQL, "CALL p()", true},
		{sqltables.MySQL, "SELECT my_function(1)", true},
		{sqltables.PostgreSQL, "SELECT nextval('s')", true},
		{sqltables.MySQL, "SELECT NEXTVAL(s)", true},
		{sqltables.MySQL, "COMMIT", true},
	} {
		if got := sqltables.Analyze(c.d, c.sql).MayWrite(); got != c.want {
			t.Errorf("MayWrite(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}
