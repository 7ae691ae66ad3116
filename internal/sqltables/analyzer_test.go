package sqltables_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tether-php/tether/internal/sqltables"
)

const (
	my = sqltables.MySQL
	pg = sqltables.PostgreSQL

	read  = sqltables.Read
	write = sqltables.Write
	ddl   = sqltables.DDL
	other = sqltables.Other
)

// want is an expected Info; cache is checked only for Certain reads.
type want struct {
	kind    sqltables.Kind
	tables  []string
	certain bool
	cache   bool
	temp    bool
	session bool
}

// ok is a certain, cacheable read of tables.
func ok(tables ...string) want { return want{kind: read, tables: tables, certain: true, cache: true} }

// nocache is a certain read of tables that must not be cached.
func nocache(tables ...string) want { return want{kind: read, tables: tables, certain: true} }

// writes is a certain write of tables.
func writes(tables ...string) want { return want{kind: write, tables: tables, certain: true} }

// ddls is a certain DDL statement on tables.
func ddls(tables ...string) want { return want{kind: ddl, tables: tables, certain: true} }

// unsure is an uncertain statement of kind k.
func unsure(k sqltables.Kind, tables ...string) want { return want{kind: k, tables: tables} }

var quiet = want{kind: other, certain: true}

// session is a certain statement that changes the session's state.
var session = want{kind: other, certain: true, session: true}

type testCase struct {
	name string
	d    sqltables.Dialect
	sql  string
	want want
}

var cases = []testCase{
	// Reads.
	{"Select", my, "SELECT * FROM t", ok("t")},
	{"Join", my, "SELECT * FROM wp_posts p JOIN wp_postmeta m ON p.ID = m.post_id WHERE p.post_type = 'post'", ok("wp_posts", "wp_postmeta")},
	{"JoinKinds", my, "SELECT * FROM a LEFT OUTER JOIN b ON a.x = b.x INNER JOIN c USING (x) NATURAL JOIN d CROSS JOIN e RIGHT JOIN f ON 1", ok("a", "b", "c", "d", "e", "f")},
	{"CommaList", my, "SELECT * FROM a, b AS bb, (SELECT * FROM c) x, d", ok("a", "b", "c", "d")},
	{"CommaAfterOn", my, "SELECT * FROM a JOIN b ON a.x = b.x, c", ok("a", "b", "c")},
	{"CommaAfterUsing", my, "SELECT * FROM t1 JOIN t2 USING (id), t3", ok("t1", "t2", "t3")},
	{"ParenJoin", my, "SELECT * FROM t1 LEFT JOIN (t2 JOIN t3 ON t2.a = t3.a) ON t1.a = t2.a", ok("t1", "t2", "t3")},
	{"ParenJoinList", my, "SELECT * FROM t1 LEFT JOIN (t2, t3) ON 1", ok("t1", "t2", "t3")},
	{"Union", my, "SELECT a FROM t1 UNION ALL SELECT a FROM t2 UNION SELECT a FROM t3", ok("t1", "t2", "t3")},
	{"ParenUnion", my, "(SELECT a FROM t1) UNION (SELECT a FROM t2) ORDER BY a", ok("t1", "t2")},
	{"ScalarSubquery", my, "SELECT (SELECT COUNT(*) FROM b) AS c FROM a", ok("b", "a")},
	{"WhereSubquery", my, "SELECT * FROM t WHERE a = (SELECT MAX(a) FROM u) AND b IN (SELECT b FROM v)", ok("t", "u", "v")},
	{"Exists", my, "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", ok("t", "u")},
	{"AnySubquery", pg, "SELECT * FROM t WHERE a = ANY (SELECT b FROM u) AND c IN (1, 2)", ok("t", "u")},
	{"SubqueryInFunction", my, "SELECT COALESCE((SELECT a FROM u LIMIT 1), 0) FROM t", ok("u", "t")},
	{"DerivedTableNested", my, "SELECT * FROM (SELECT * FROM (SELECT * FROM deep) x) y", ok("deep")},
	{"Qualified", my, "SELECT * FROM db1.t1 JOIN `db2`.`T2` ON 1", ok("t1", "t2")},
	{"QualifiedSpaces", my, "SELECT * FROM db . t", ok("t")},
	{"QuotedMySQL", my, "SELECT * FROM `Db`.`My``Tab`", ok("my`tab")},
	{"QuotedPostgres", pg, `SELECT * FROM "Users" JOIN public."Order""s" ON 1`, ok("users", `order"s`)},
	{"UnicodeQuoted", pg, `SELECT * FROM U&"T\0061b"`, ok(`t\0061b`)},
	{"UpperCase", my, "SELECT * FROM WP_POSTS", ok("wp_posts")},
	{"NonASCII", my, "SELECT * FROM `Ärger`", ok("ärger")},
	{"Dedup", my, "SELECT * FROM t a JOIN t b ON a.x = b.y JOIN T c", ok("t")},
	{"Dual", my, "SELECT 1 FROM dual", ok()},
	{"NoTable", my, "SELECT 1 + 1", ok()},
	{"Values", pg, "VALUES (1), (2)", ok()},
	{"TableStatement", pg, "TABLE t", ok("t")},
	{"UnionTable", my, "SELECT * FROM a UNION TABLE b", ok("a", "b")},
	{"With", my, "WITH x AS (SELECT * FROM t) SELECT * FROM x JOIN u ON 1", ok("t", "x", "u")},
	{"WithColumnsMaterialized", pg, "WITH x(a) AS MATERIALIZED (SELECT 1), y AS (SELECT * FROM u) SELECT * FROM x, y", ok("u", "x", "y")},
	{"WithRecursive", pg, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 3) SELECT * FROM r", ok("r")},
	{"TableFunction", pg, "SELECT * FROM generate_series(1, 3) g, t", ok("t")},
	{"Ordinality", pg, "SELECT * FROM unnest(a) WITH ORDINALITY AS x, t2", ok("t2")},
	{"Lateral", pg, "SELECT * FROM t, LATERAL (SELECT * FROM u WHERE u.a = t.a) x", ok("t", "u")},
	{"Only", pg, "SELECT * FROM ONLY t", ok("t")},
	{"OnlyIsATableInMySQL", my, "SELECT * FROM only o", ok("only")},
	{"DelayedIsATableInPG", pg, "SELECT * FROM delayed d", ok("delayed")},
	{"TableSample", pg, "SELECT * FROM t TABLESAMPLE BERNOULLI (10) REPEATABLE (1), u", ok("t", "u")},
	{"JSONTable", my, "SELECT * FROM t, JSON_TABLE(t.doc, '$[*]' COLUMNS (a INT PATH '$.a')) AS jt", ok("t")},
	{"AliasColumns", pg, "SELECT * FROM t1 AS a (x, y), (VALUES (1)) v(z)", ok("t1")},
	{"Cast", pg, "SELECT x::numeric(10,2), CAST(y AS varchar(3)) FROM t", ok("t")},
	{"CastMySQL", my, "SELECT CAST(a AS DECIMAL(10,2)), CONVERT(b, CHAR(10)), CONVERT(c USING utf8mb4) FROM t", ok("t")},
	{"PgCatalogFunction", pg, "SELECT pg_catalog.lower('A') FROM t", ok("t")},
	{"IndexHints", my, "SELECT * FROM t USE INDEX (i) JOIN u FORCE INDEX FOR JOIN (j), v IGNORE INDEX FOR ORDER BY (k), w", ok("t", "u", "v", "w")},
	{"Partition", my, "SELECT * FROM t PARTITION (p1, p2) WHERE a = 1", ok("t")},
	{"StraightJoin", my, "SELECT STRAIGHT_JOIN * FROM t1 STRAIGHT_JOIN t2 ON t1.a = t2.a", ok("t1", "t2")},
	{"Functions", my, "SELECT DATE_ADD(d, INTERVAL 1 DAY), IF(a, b, c), IFNULL(a, 0), GROUP_CONCAT(DISTINCT x ORDER BY y SEPARATOR ',') FROM t GROUP BY a WITH ROLLUP", ok("t")},
	{"FunctionFrom", pg, "SELECT EXTRACT(EPOCH FROM d), SUBSTRING(s FROM 2 FOR 3), TRIM(BOTH 'x' FROM s), POSITION('a' IN s) FROM t", ok("t")},
	{"IsDistinctFrom", pg, "SELECT * FROM t WHERE a IS NOT DISTINCT FROM b", ok("t")},
	{"Window", pg, "SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY b), count(*) FILTER (WHERE c) FROM t", ok("t")},
	{"EmptyOver", pg, "SELECT count(*) OVER () FROM t", ok("t")},
	{"EmptyParens", my, "SELECT * FROM t WHERE a IN (SELECT b FROM u) AND (())", ok("t", "u")},
	{"WithinGroup", pg, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FROM t", ok("t")},
	{"MatchAgainst", my, "SELECT * FROM t WHERE MATCH (a) AGAINST ('x' IN BOOLEAN MODE)", ok("t")},
	{"JSON", my, "SELECT JSON_EXTRACT(doc, '$.a'), JSON_UNQUOTE(x) FROM t", ok("t")},
	{"ColumnNamedFrom", my, "SELECT t.from, t.select FROM t", ok("t")},
	{"Limit", my, "SELECT a FROM t ORDER BY FIELD(id, 3, 1, 2), id DESC LIMIT 10, 20", ok("t")},
	{"Placeholders", pg, "SELECT * FROM t WHERE a = $1 AND b = $2", ok("t")},
	{"PlaceholdersMySQL", my, "SELECT * FROM t WHERE a = ? AND b IN (?, ?)", ok("t")},
	{"ExplainNotCached", my, "EXPLAIN SELECT * FROM t", nocache("t")},
	{"Describe", my, "DESCRIBE t", nocache()},
	{"Show", my, "SHOW TABLES", nocache()},
	{"CopyToIsRead", pg, "COPY t TO STDOUT", nocache("t")},
	{"CopyQuery", pg, "COPY (SELECT * FROM t) TO STDOUT", nocache("t")},
	{"TrailingSemicolon", my, "SELECT * FROM t;  ", ok("t")},
	{"TrailingComment", my, "SELECT * FROM t; -- done", ok("t")},

	// Not cacheable reads.
	{"Now", my, "SELECT NOW()", nocache()},
	{"NowPG", pg, "SELECT * FROM t WHERE d > now() - interval '1 day'", nocache("t")},
	{"CurrentTimestampBare", my, "SELECT * FROM t WHERE d > CURRENT_TIMESTAMP", nocache("t")},
	{"CurrentDateBare", pg, "SELECT CURRENT_DATE", nocache()},
	{"Curdate", my, "SELECT * FROM t WHERE d = CURDATE()", nocache("t")},
	{"Sysdate", my, "SELECT SYSDATE()", nocache()},
	{"UnixTimestamp", my, "SELECT UNIX_TIMESTAMP()", nocache()},
	{"UnixTimestampOfColumn", my, "SELECT UNIX_TIMESTAMP(d) FROM t", ok("t")},
	{"UtcTimestampBare", my, "SELECT UTC_TIMESTAMP", nocache()},
	{"Rand", my, "SELECT * FROM t ORDER BY RAND() LIMIT 1", nocache("t")},
	{"UUID", my, "SELECT UUID(), UUID_SHORT()", nocache()},
	{"ConnectionID", my, "SELECT CONNECTION_ID()", nocache()},
	{"LastInsertID", my, "SELECT * FROM t WHERE id = LAST_INSERT_ID()", nocache("t")},
	{"FoundRows", my, "SELECT FOUND_ROWS()", nocache()},
	{"RowCount", my, "SELECT ROW_COUNT()", nocache()},
	{"User", my, "SELECT USER(), CURRENT_USER", nocache()},
	{"UserColumnMySQL", my, "SELECT user FROM accounts", ok("accounts")},
	{"UserPG", pg, "SELECT user", nocache()},
	{"Database", my, "SELECT DATABASE()", nocache()},
	{"Schema", my, "SELECT SCHEMA()", nocache()},
	{"UserVariable", my, "SELECT * FROM t WHERE a = @x", nocache("t")},
	{"SystemVariable", my, "SELECT @@session.time_zone", nocache()},
	{"QuotedVariable", my, "SELECT @`a b`", nocache()},
	{"GetLock", my, "SELECT GET_LOCK('x', 10)", nocache()},
	{"ReleaseLock", my, "SELECT RELEASE_LOCK('x'), IS_FREE_LOCK('y')", nocache()},
	{"Sleep", my, "SELECT SLEEP(1)", nocache()},
	{"Benchmark", my, "SELECT BENCHMARK(10, MD5('x'))", nocache()},
	{"ClockTimestamp", pg, "SELECT clock_timestamp(), statement_timestamp()", nocache()},
	{"Random", pg, "SELECT random()", nocache()},
	{"GenRandomUUID", pg, "SELECT gen_random_uuid()", nocache()},
	{"Nextval", pg, "SELECT nextval('s'), currval('s'), lastval()", nocache()},
	{"Setval", pg, "SELECT setval('s', 1)", nocache()},
	{"CurrentSetting", pg, "SELECT current_setting('TimeZone')", nocache()},
	{"TxidCurrent", pg, "SELECT txid_current()", nocache()},
	{"BackendPid", pg, "SELECT pg_backend_pid()", nocache()},
	{"PgSleep", pg, "SELECT pg_sleep(1)", nocache()},
	{"AdvisoryLock", pg, "SELECT pg_advisory_lock(1), pg_try_advisory_xact_lock(2)", nocache()},
	{"SessionUser", pg, "SELECT current_user, session_user", nocache()},
	{"NowLiteral", pg, "SELECT 'now'::timestamp", nocache()},
	{"TodayLiteral", pg, "SELECT * FROM t WHERE d = date 'today'", nocache("t")},
	{"NextValueFor", my, "SELECT NEXT VALUE FOR s", nocache()},
	{"ForUpdate", my, "SELECT * FROM t WHERE id = 1 FOR UPDATE", nocache("t")},
	{"ForShare", pg, "SELECT * FROM t FOR SHARE SKIP LOCKED", nocache("t")},
	{"ForNoKeyUpdate", pg, "SELECT * FROM t FOR NO KEY UPDATE", nocache("t")},
	{"ForKeyShare", pg, "SELECT * FROM t FOR KEY SHARE NOWAIT", nocache("t")},
	{"LockInShareMode", my, "SELECT * FROM t LOCK IN SHARE MODE", nocache("t")},
	{"CalcFoundRows", my, "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", nocache("t")},
	{"SelectIntoVariable", my, "SELECT a INTO @x FROM t", nocache("t")},
	{"SelectIntoOutfile", my, "SELECT * FROM t INTO OUTFILE '/tmp/x'", nocache("t")},
	{"SelectIntoDumpfile", my, "SELECT a FROM t LIMIT 1 INTO DUMPFILE '/tmp/x'", nocache("t")},
	{"InformationSchema", my, "SELECT * FROM information_schema.tables WHERE table_schema = 'db'", nocache("tables")},
	{"InformationSchemaUpper", my, "SELECT * FROM INFORMATION_SCHEMA.TABLES", nocache("tables")},
	{"PerformanceSchema", my, "SELECT * FROM performance_schema.threads", nocache("threads")},
	{"MySQLSchema", my, "SELECT user FROM mysql.user", nocache("user")},
	{"PgCatalog", pg, "SELECT * FROM pg_catalog.pg_class", nocache("pg_class")},
	{"PgCatalogUnqualified", pg, "SELECT * FROM pg_stat_activity", nocache("pg_stat_activity")},
	{"PgSystemFunction", pg, "SELECT pg_size_pretty(pg_relation_size('t'))", nocache()},
	{"NowInSubquery", my, "SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE d < NOW())", nocache("t", "u")},
	{"ExecutableCommentForUpdate", my, "SELECT * FROM t /*! FOR UPDATE */", nocache("t")},

	// Writes.
	{"Insert", my, "INSERT INTO t (a, b) VALUES (1, 2), (3, 4)", writes("t")},
	{"InsertNoInto", my, "INSERT t VALUES (1)", writes("t")},
	{"InsertModifiers", my, "INSERT LOW_PRIORITY IGNORE INTO t SET a = 1", writes("t")},
	{"InsertOnDuplicate", my, "INSERT INTO wp_options (option_name) VALUES ('a') ON DUPLICATE KEY UPDATE option_name = VALUES(option_name)", writes("wp_options")},
	{"InsertSelect", my, "INSERT INTO t SELECT * FROM u WHERE id IN (SELECT id FROM v)", writes("t")},
	{"InsertColumnsSelect", my, "INSERT INTO t (a) SELECT a FROM u", writes("t")},
	{"InsertParenSelect", my, "INSERT INTO t (SELECT * FROM u)", writes("t")},
	{"InsertQualified", my, "INSERT INTO `db`.`T` VALUES (1)", writes("t")},
	{"InsertReturning", pg, "INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = EXCLUDED.a RETURNING id", writes("t")},
	{"InsertAlias", pg, "INSERT INTO t AS x (a) VALUES (1)", writes("t")},
	{"InsertDefaultValues", pg, "INSERT INTO t DEFAULT VALUES", writes("t")},
	{"InsertNow", my, "INSERT INTO t (d) VALUES (NOW())", writes("t")},
	{"Replace", my, "REPLACE INTO t (a) VALUES (1)", writes("t")},
	{"ReplaceFunctionInRead", my, "SELECT REPLACE(a, 'x', 'y'), INSERT(a, 1, 2, 'z') FROM t", ok("t")},
	{"Update", my, "UPDATE t SET a = 1 WHERE id = 2", writes("t")},
	{"UpdateModifiers", my, "UPDATE LOW_PRIORITY IGNORE t SET a = 1 WHERE id IN (SELECT id FROM u)", writes("t")},
	{"UpdateMulti", my, "UPDATE t1, t2 SET t1.a = t2.a WHERE t1.id = t2.id", writes("t1", "t2")},
	{"UpdateJoin", my, "UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.b", writes("t1", "t2")},
	{"UpdateFrom", pg, "UPDATE t SET a = u.a FROM u WHERE t.id = u.id", writes("t")},
	{"UpdateOnly", pg, "UPDATE ONLY t AS x SET a = 1", writes("t")},
	{"Delete", my, "DELETE FROM t WHERE id = 1", writes("t")},
	{"DeleteModifiers", my, "DELETE LOW_PRIORITY QUICK IGNORE FROM t ORDER BY id LIMIT 10", writes("t")},
	{"DeleteMulti", my, "DELETE t1 FROM t1 LEFT JOIN t2 ON t1.id = t2.id WHERE t2.id IS NULL", writes("t1", "t2")},
	{"DeleteMultiUsing", my, "DELETE FROM t1, t2 USING t1 JOIN t2 JOIN t3 WHERE t1.id = t2.id", writes("t1", "t2", "t3")},
	{"DeleteJoinUsingColumns", my, "DELETE o1 FROM wp_options AS o1 JOIN wp_options AS o2 USING (`option_name`) WHERE o2.option_id > o1.option_id", writes("o1", "wp_options")},
	{"MergeUsingSubquery", pg, "MERGE INTO t USING (SELECT * FROM s) AS x ON t.id = x.id WHEN MATCHED THEN DELETE", writes("t")},
	{"DeleteUsingPG", pg, "DELETE FROM t USING u WHERE t.id = u.id", writes("t")},
	{"DeleteSubquery", my, "DELETE FROM t WHERE a IN (SELECT a FROM u)", writes("t")},
	{"Merge", pg, "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = s.a WHEN NOT MATCHED THEN INSERT (id, a) VALUES (s.id, s.a)", writes("t")},
	{"Truncate", my, "TRUNCATE TABLE t", writes("t")},
	{"TruncateList", pg, "TRUNCATE a, ONLY b RESTART IDENTITY", writes("a", "b")},
	{"TruncateCascade", pg, "TRUNCATE a CASCADE", unsure(write, "a")},
	{"LoadData", my, "LOAD DATA LOCAL INFILE '/tmp/x' REPLACE INTO TABLE t FIELDS TERMINATED BY ','", writes("t")},
	{"CopyFrom", pg, "COPY t (a, b) FROM STDIN WITH (FORMAT csv)", writes("t")},
	{"WithUpdate", pg, "WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x", writes("t")},
	{"WithDeleteInsert", pg, "WITH moved AS (DELETE FROM t WHERE a RETURNING *) INSERT INTO log SELECT * FROM moved", writes("t", "log")},
	{"WithInsert", pg, "WITH y AS (SELECT 1) INSERT INTO t SELECT * FROM y", writes("t")},
	{"SelectIntoTable", pg, "SELECT * INTO new_t FROM t", writes("new_t")},
	{"SelectIntoTemp", pg, "SELECT * INTO TEMP t2 FROM t", want{kind: write, tables: []string{"t2"}, certain: true, temp: true}},
	{"ExplainAnalyzeDelete", pg, "EXPLAIN ANALYZE DELETE FROM t", writes("t")},
	{"ExplainOptionsUpdate", pg, "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE t SET a = 1", writes("t")},
	{"RefreshMaterializedView", pg, "REFRESH MATERIALIZED VIEW CONCURRENTLY s.mv WITH DATA", writes("mv")},
	{"CopyQueryUpdate", pg, "COPY (UPDATE t SET a = 1 RETURNING *) TO STDOUT", writes("t")},

	// DDL.
	{"CreateTable", my, "CREATE TABLE t (id INT(11) NOT NULL AUTO_INCREMENT, PRIMARY KEY (id))", ddls("t")},
	{"CreateTableIfNotExists", pg, "CREATE TABLE IF NOT EXISTS s.t (id serial)", ddls("t")},
	{"CreateTableAs", my, "CREATE TABLE t AS SELECT * FROM u", ddls("t")},
	{"CreateTableSelect", my, "CREATE TABLE t SELECT * FROM u", ddls("t")},
	{"CreateTableLike", my, "CREATE TABLE t LIKE u", ddls("t")},
	{"CreateTemporary", my, "CREATE TEMPORARY TABLE tmp AS SELECT * FROM t", want{kind: ddl, tables: []string{"tmp"}, certain: true, temp: true}},
	{"CreateTempPG", pg, "CREATE LOCAL TEMP TABLE tmp (a int)", want{kind: ddl, tables: []string{"tmp"}, certain: true, temp: true}},
	{"CreateView", my, "CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW v AS SELECT * FROM t", ddls("v")},
	{"CreateMaterializedView", pg, "CREATE MATERIALIZED VIEW mv AS SELECT * FROM t", ddls("mv")},
	{"CreateIndex", my, "CREATE UNIQUE INDEX i ON t (a)", ddls("t")},
	{"CreateIndexPG", pg, "CREATE INDEX CONCURRENTLY IF NOT EXISTS i ON ONLY t USING btree (a)", ddls("t")},
	{"CreateIndexNoName", pg, "CREATE INDEX ON t (a)", ddls("t")},
	{"AlterTable", my, "ALTER TABLE t ADD COLUMN c INT", ddls("t")},
	{"AlterTableRenameTo", my, "ALTER TABLE t ADD COLUMN c INT, RENAME TO u", ddls("t", "u")},
	{"AlterTableRenameMySQL", my, "ALTER TABLE t RENAME new_t", ddls("t", "new_t")},
	{"AlterTableRenameColumn", my, "ALTER TABLE t RENAME COLUMN a TO b", ddls("t")},
	{"AlterTableRenameColumnPG", pg, "ALTER TABLE t RENAME a TO b", ddls("t")},
	{"AlterTableRenamePG", pg, "ALTER TABLE IF EXISTS ONLY t RENAME TO u", ddls("t", "u")},
	{"AlterExchange", my, "ALTER TABLE t EXCHANGE PARTITION p WITH TABLE t2", ddls("t", "t2")},
	{"AlterIgnoreTable", my, "ALTER ONLINE IGNORE TABLE t ADD INDEX (a)", ddls("t")},
	{"AlterView", my, "ALTER VIEW v AS SELECT 1", ddls("v")},
	{"DropTable", my, "DROP TABLE IF EXISTS a, `b`, db.c", ddls("a", "b", "c")},
	{"DropTemporary", my, "DROP TEMPORARY TABLE IF EXISTS tmp", ddls("tmp")},
	{"DropView", pg, "DROP MATERIALIZED VIEW mv", ddls("mv")},
	{"DropIndexMySQL", my, "DROP INDEX i ON t", ddls("t")},
	{"DropIndexPG", pg, "DROP INDEX i", ddls()},
	{"DropCascade", pg, "DROP TABLE t CASCADE", unsure(ddl, "t")},
	{"RenameTable", my, "RENAME TABLE a TO b, c TO d", ddls("a", "b", "c", "d")},
	{"CreateProcedure", my, "CREATE PROCEDURE p() BEGIN SELECT 1; END", unsure(ddl)},
	{"CreateTrigger", my, "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO u VALUES (1)", unsure(ddl)},
	{"CreateFunctionPG", pg, "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql", unsure(ddl)},
	{"DropDatabase", my, "DROP DATABASE d", unsure(ddl)},
	{"RenameUser", my, "RENAME USER a TO b", unsure(ddl)},
	{"DumpViewExecutableComments", my, "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`u`@`h` SQL SECURITY DEFINER */ /*!50001 VIEW `v` AS select 1 */", ddls("v")},
	{"DumpMariaDBComment", my, "/*M!100100 SELECT * FROM t */", ok("t")},

	// Other statements.
	{"SetNames", my, "SET NAMES utf8mb4", session},
	{"SetSubquery", my, "SET sql_mode=(SELECT REPLACE(@@sql_mode,'ONLY_FULL_GROUP_BY',''))", session},
	{"SetUnknownFunction", my, "SET @x = f()", want{kind: other, session: true}},
	{"SetSearchPath", pg, "SET search_path TO app, public", session},
	{"SetConfig", pg, "SELECT set_config('app.user', $1, false)", want{kind: read, certain: true, session: true}},
	{"Discard", pg, "DISCARD ALL", session},
	{"Begin", my, "BEGIN", quiet},
	{"StartTransaction", my, "START TRANSACTION READ ONLY", quiet},
	{"Commit", pg, "COMMIT", quiet},
	{"Rollback", pg, "ROLLBACK TO SAVEPOINT s", quiet},
	{"Use", my, "USE db", session},
	{"LockTables", my, "LOCK TABLES t WRITE", quiet},
	{"AnalyzeTable", my, "ANALYZE TABLE t", quiet},
	{"DoMySQL", my, "DO RELEASE_LOCK('x')", quiet},
	{"Empty", my, "", quiet},
	{"OnlyComment", my, "-- nothing", quiet},
	{"Call", my, "CALL p(1)", unsure(other)},
	{"Execute", pg, "EXECUTE s(1)", unsure(other)},
	{"DoPG", pg, "DO $$ BEGIN DELETE FROM t; END $$", unsure(other)},
	{"BeginNotAtomic", my, "BEGIN NOT ATOMIC DELETE FROM t; END", unsure(other)},
	{"Unknown", my, "FROBNICATE t", unsure(other)},
	{"StartsWithString", my, "'x'", unsure(other)},
	{"StartsWithPunct", my, "* FROM t; SELECT * FROM u", unsure(other)},
	{"JoinWithoutTable", my, "SELECT * FROM (a JOIN)", unsure(read, "a")},

	// Uncertain.
	{"UnknownFunction", my, "SELECT my_func(a) FROM t", unsure(read, "t")},
	{"UnknownFunctionPG", pg, "SELECT f() FROM t", unsure(read, "t")},
	{"QualifiedFunction", pg, "SELECT public.f(1)", unsure(read)},
	{"QualifiedFunctionMySQL", my, "SELECT db.f(1)", unsure(read)},
	{"UnknownTableFunction", pg, "SELECT * FROM my_srf(1) x", unsure(read)},
	{"QuotedFunction", pg, `SELECT "now"()`, unsure(read)},
	{"MultipleStatements", my, "SELECT 1; DELETE FROM t", unsure(write, "t")},
	{"MultipleReads", my, "SELECT * FROM a; SELECT * FROM b", unsure(read, "a", "b")},
	{"UnbalancedOpen", my, "SELECT * FROM t WHERE (a = 1", unsure(read, "t")},
	{"UnbalancedClose", my, "SELECT * FROM t WHERE a = 1)", unsure(read, "t")},
	{"MissingTable", my, "SELECT * FROM", unsure(read)},
	{"KeywordAsTable", my, "DELETE FROM where", unsure(write)},
	{"ModifierNamedTable", my, "DELETE FROM quick", writes("quick")},
	{"AnsiQuotes", my, `SELECT * FROM "t"`, unsure(read)},
	{"ParamAsTable", my, "SELECT * FROM ?", unsure(read)},
	{"TooDeep", my, "SELECT " + repeat("(", 70) + "1" + repeat(")", 70), unsure(read)},

	// Lexing.
	{"LineComment", my, "SELECT * FROM t -- , u\n WHERE 1", ok("t")},
	{"LineCommentPG", pg, "SELECT * FROM t --, u", ok("t")},
	{"MinusMinusNotComment", my, "SELECT 1--1 FROM t", ok("t")},
	{"HashComment", my, "SELECT * FROM t # , u", ok("t")},
	{"HashIsOperatorPG", pg, "SELECT 1 # 2 FROM t", ok("t")},
	{"BlockComment", my, "SELECT * FROM /* u, */ t", ok("t")},
	{"CommentBetweenTables", my, "SELECT * FROM a/**/,/**/b", ok("a", "b")},
	{"NestedCommentPG", pg, "SELECT * FROM t /* a /* nested */ FROM w */", ok("t")},
	{"NotNestedMySQL", my, "SELECT * FROM t /* a /* b */", ok("t")},
	{"OptimizerHint", my, "SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM t", ok("t")},
	{"ExecutableComment", my, "/*!40101 SELECT * FROM t */", ok("t")},
	{"ExecutableCommentTable", my, "SELECT * FROM a /*!, b */", ok("a", "b")},
	{"ExecutableCommentPG", pg, "SELECT * FROM a /*!, b */", ok("a")},
	{"StringWithKeyword", my, "SELECT 'FROM u' FROM t", ok("t")},
	{"BackslashEscape", my, `SELECT 'it\'s FROM u' FROM t`, ok("t")},
	{"BackslashEndMySQL", my, `SELECT 'a\\' FROM t`, ok("t")},
	{"DoubledQuote", my, "SELECT 'it''s FROM u' FROM t", ok("t")},
	{"DoubleQuotedString", my, `SELECT * FROM t WHERE x = "it's \" FROM u"`, ok("t")},
	{"StandardString", pg, `SELECT 'a\' FROM t`, ok("t")},
	{"EString", pg, `SELECT E'\' FROM v' FROM t`, ok("t")},
	{"EStringLower", pg, `SELECT e'\\' FROM t`, ok("t")},
	{"DollarQuote", pg, "SELECT $$ FROM u $$ FROM t", ok("t")},
	{"DollarTag", pg, "SELECT $tag$ FROM u $x$ $tag$ FROM t", ok("t")},
	{"DollarInIdentifier", pg, "SELECT a$b FROM t", ok("t")},
	{"QuotedIdentifierKeyword", pg, `SELECT "FROM" FROM t WHERE "select" = 1`, ok("t")},
	{"BacktickKeyword", my, "SELECT * FROM `t` WHERE `from` = 1", ok("t")},
	{"BacktickTableNamedSelect", my, "SELECT * FROM `select`", ok("select")},
	{"CharsetIntroducer", my, "SELECT _utf8mb4'x' FROM t WHERE a = N'y' OR b = X'00'", ok("t")},
	{"BitString", pg, "SELECT B'101', X'ff' FROM t", ok("t")},

	// sql_mode.
	{"AnsiQuotesMode", my | sqltables.ANSIQuotes, `SELECT "a" FROM "T" JOIN "x""y" ON 1 WHERE b = 'c'`, ok("t", `x"y`)},
	{"AnsiQuotesBackslash", my | sqltables.ANSIQuotes, `SELECT * FROM "t\" WHERE a = "b\"`, ok(`t\`)},
	{"NoBackslashEscapes", my | sqltables.NoBackslashEscapes, `SELECT 'a\' FROM t WHERE b = '\'`, ok("t")},
	{"NoBackslashEscapesDouble", my | sqltables.NoBackslashEscapes | sqltables.ANSIQuotes, `SELECT 'a\' FROM "t"`, ok("t")},
	{"BackslashEscapesDefault", my, `SELECT 'a\' FROM t WHERE b = '\'`, unsure(read)},
	{"ModesNotForPostgreSQL", pg | sqltables.ANSIQuotes, `SELECT 1`, unsure(read)},

	// Unterminated.
	{"UnterminatedString", my, "SELECT * FROM t WHERE a = 'x", unsure(read, "t")},
	{"UnterminatedStringBackslash", my, `SELECT 'x\'`, unsure(read)},
	{"UnterminatedDoubleQuote", my, `SELECT "x`, unsure(read)},
	{"UnterminatedBacktick", my, "SELECT * FROM `t", unsure(read)},
	{"UnterminatedIdentPG", pg, `SELECT * FROM "t`, unsure(read)},
	{"UnterminatedComment", my, "SELECT * FROM t /* x", unsure(read, "t")},
	{"UnterminatedNestedPG", pg, "SELECT * FROM t /* a /* b */", unsure(read, "t")},
	{"UnterminatedExecutable", my, "SELECT 1 /*! x", unsure(read)},
	{"UnterminatedExecutableAfterSemicolon", my, "/*!SET x = 1;", want{kind: other, session: true}},
	{"UnterminatedDollar", pg, "SELECT $tag$ x $tag FROM t", unsure(read)},
	{"UnterminatedEString", pg, `SELECT E'\'`, unsure(read)},
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

func dialectName(d sqltables.Dialect) string {
	name := "MySQL"
	if d&pg != 0 {
		name = "PostgreSQL"
	}
	if d&sqltables.ANSIQuotes != 0 {
		name += "+ANSIQuotes"
	}
	if d&sqltables.NoBackslashEscapes != 0 {
		name += "+NoBackslashEscapes"
	}
	return name
}

func TestAnalyze(t *testing.T) {
	var a sqltables.Analyzer
	for _, tc := range cases {
		t.Run(dialectName(tc.d)+"/"+tc.name, func(t *testing.T) {
			got := sqltables.Analyze(tc.d, tc.sql)
			w := tc.want
			if got.Kind != w.kind || !slices.Equal(got.Tables, w.tables) || got.Certain != w.certain ||
				got.Cacheable != (w.cache && w.certain) || got.Temporary != w.temp || got.Session != w.session {
				t.Errorf("Analyze(%q)\n got  %s %q certain=%v cacheable=%v temp=%v session=%v reason=%q\n want %s %q certain=%v cacheable=%v temp=%v session=%v",
					tc.sql, got.Kind, got.Tables, got.Certain, got.Cacheable, got.Temporary, got.Session, got.Reason,
					w.kind, w.tables, w.certain, w.cache && w.certain, w.temp, w.session)
			}
			if got.Cacheable != (got.Reason == "") {
				t.Errorf("Analyze(%q): Cacheable %v with Reason %q", tc.sql, got.Cacheable, got.Reason)
			}
			// A reused Analyzer answers the same.
			again := a.Analyze(tc.d, tc.sql)
			if again.Kind != got.Kind || !slices.Equal(again.Tables, got.Tables) || again.Certain != got.Certain ||
				again.Cacheable != got.Cacheable || again.Reason != got.Reason {
				t.Errorf("Analyzer.Analyze(%q) = %+v, Analyze = %+v", tc.sql, again, got)
			}
		})
	}
}

func TestAnalyze_Reason(t *testing.T) {
	for _, tc := range []struct {
		d      sqltables.Dialect
		sql    string
		reason string
	}{
		{my, "SELECT NOW()", "calls NOW(), whose result is not a function of the tables it reads"},
		{my, "SELECT 1; SELECT 2", "several statements"},
		{my, "SELECT 'x", "unterminated string"},
		{my, "SELECT f(1)", "calls a function not known to be read-only, which might write"},
		{my, "SELECT * FROM t FOR UPDATE", "is a locking read (FOR UPDATE, FOR SHARE)"},
		{my, "INSERT INTO t VALUES (1)", "not a read"},
		{pg, "SELECT * FROM pg_class", "reads a system catalog, which changes without writes"},
	} {
		if got := sqltables.Analyze(tc.d, tc.sql).Reason; got != tc.reason {
			t.Errorf("Analyze(%q).Reason = %q, want %q", tc.sql, got, tc.reason)
		}
	}
}

// TestAnalyze_Volatile checks that each non-deterministic or
// session-dependent built-in makes a read uncacheable but certain.
func TestAnalyze_Volatile(t *testing.T) {
	for d, exprs := range map[sqltables.Dialect][]string{
		my: {"NOW()", "CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP(6)", "CURDATE()", "CURTIME()", "SYSDATE()",
			"UNIX_TIMESTAMP()", "UTC_TIMESTAMP()", "LOCALTIME", "RAND()", "RAND(1)", "UUID()", "UUID_SHORT()",
			"CONNECTION_ID()", "LAST_INSERT_ID()", "FOUND_ROWS()", "ROW_COUNT()", "USER()", "CURRENT_USER",
			"CURRENT_USER()", "SESSION_USER()", "SYSTEM_USER()", "DATABASE()", "SCHEMA()", "@x", "@@sql_mode",
			"GET_LOCK('a', 1)", "RELEASE_LOCK('a')", "IS_FREE_LOCK('a')", "IS_USED_LOCK('a')",
			"RELEASE_ALL_LOCKS()", "SLEEP(1)", "BENCHMARK(1, 1)", "NEXTVAL(s)", "LASTVAL(s)", "SETVAL(s, 1)",
			"LOAD_FILE('/etc/passwd')", "VERSION()"},
		pg: {"now()", "current_timestamp", "current_date", "current_time", "localtimestamp",
			"clock_timestamp()", "statement_timestamp()", "transaction_timestamp()", "timeofday()", "random()",
			"gen_random_uuid()", "uuid_generate_v4()", "nextval('s')", "currval('s')", "lastval()",
			"setval('s', 1)", "current_setting('x')", "txid_current()", "pg_current_xact_id()",
			"pg_backend_pid()", "pg_sleep(1)", "pg_advisory_lock(1)", "pg_advisory_unlock(1)",
			"pg_try_advisory_lock(1)", "current_user", "session_user", "user", "current_role",
			"current_schema", "current_schema()", "current_database()", "inet_client_addr()", "age(d)",
			"'now'::timestamptz", "pg_catalog.now()"},
	} {
		for _, e := range exprs {
			sql := "SELECT " + e + " FROM t"
			if info := sqltables.Analyze(d, sql); !info.Certain || info.Cacheable || info.Kind != read {
				t.Errorf("Analyze(%s, %q) = %+v, want a certain uncacheable read", dialectName(d), sql, info)
			}
		}
	}
}

func TestKind_String(t *testing.T) {
	for k, s := range map[sqltables.Kind]string{other: "other", read: "read", write: "write", ddl: "ddl"} {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), s)
		}
	}
}

func TestAnalyze_UnknownDialect(t *testing.T) {
	if info := sqltables.Analyze(0, "SELECT 1"); info.Certain || info.Cacheable {
		t.Errorf("Analyze with dialect 0 = %+v, want uncertain", info)
	}
}

// TestAnalyzer_Allocs checks that a reused Analyzer allocates nothing, and
// Analyze only the returned Tables.
func TestAnalyzer_Allocs(t *testing.T) {
	var a sqltables.Analyzer
	for _, b := range benchCases {
		a.Analyze(b.d, b.sql) // learns mixed-case names
		if n := testing.AllocsPerRun(100, func() { a.Analyze(b.d, b.sql) }); n != 0 {
			t.Errorf("Analyzer.Analyze(%s) allocates %v times, want 0", b.name, n)
		}
		if raceEnabled {
			continue
		}
		if n := testing.AllocsPerRun(100, func() { sqltables.Analyze(b.d, b.sql) }); n > 1 {
			t.Errorf("Analyze(%s) allocates %v times, want at most 1", b.name, n)
		}
	}
}

var benchCases = []struct {
	name string
	d    sqltables.Dialect
	sql  string
}{
	{"WordPressSelect", my, "SELECT t.*, tt.*, tr.object_id FROM wp_terms AS t INNER JOIN wp_term_taxonomy AS tt " +
		"ON t.term_id = tt.term_id INNER JOIN wp_term_relationships AS tr ON tr.term_taxonomy_id = tt.term_taxonomy_id " +
		"WHERE tt.taxonomy IN ('category', 'post_tag', 'post_format') AND tr.object_id IN (1, 2, 3, 4, 5) " +
		"ORDER BY t.name ASC"},
	{"WordPressPosts", my, "SELECT SQL_CALC_FOUND_ROWS  wp_posts.ID FROM wp_posts  LEFT JOIN wp_term_relationships " +
		"ON (wp_posts.ID = wp_term_relationships.object_id) WHERE 1=1  AND ( wp_term_relationships.term_taxonomy_id IN (2) ) " +
		"AND ((wp_posts.post_type = 'post' AND (wp_posts.post_status = 'publish' OR wp_posts.post_status = 'private'))) " +
		"GROUP BY wp_posts.ID ORDER BY wp_posts.post_date DESC LIMIT 0, 10"},
	{"WordPressInsert", my, "INSERT INTO `wp_options` (`option_name`, `option_value`, `autoload`) VALUES " +
		"('_transient_doing_cron', '1732470000.1234560012817382812500', 'yes') ON DUPLICATE KEY UPDATE " +
		"`option_name` = VALUES(`option_name`), `option_value` = VALUES(`option_value`), `autoload` = VALUES(`autoload`)"},
	{"PostgresSelect", pg, `SELECT u.id, u.name, count(o.id) FROM "Users" u LEFT JOIN public.orders o ON o.user_id = u.id ` +
		`WHERE u.created_at > $1 AND u.status = ANY($2) GROUP BY u.id, u.name ORDER BY u.name LIMIT 20`},
}

func BenchmarkAnalyzer(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			var a sqltables.Analyzer
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.sql)))
			for b.Loop() {
				a.Analyze(bc.d, bc.sql)
			}
		})
	}
}

func BenchmarkAnalyze(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.sql)))
			for b.Loop() {
				sqltables.Analyze(bc.d, bc.sql)
			}
		})
	}
}

// TestTableName: a plain table name is named as Analyze names the table in a
// statement.
func TestTableName(t *testing.T) {
	for name, sql := range map[string]string{
		"Users":            "UPDATE Users SET a = 1",
		"app.Users":        "UPDATE app.Users SET a = 1",
		"`Users`":          "UPDATE `Users` SET a = 1",
		`"public"."Users"`: `UPDATE "public"."Users" SET a = 1`,
	} {
		d := sqltables.MySQL
		if strings.Contains(name, `"`) {
			d = sqltables.PostgreSQL
		}
		info := sqltables.Analyze(d, sql)
		if len(info.Tables) != 1 || sqltables.TableName(name) != info.Tables[0] {
			t.Errorf("TableName(%q) = %q, Analyze(%q) names %v", name, sqltables.TableName(name), sql, info.Tables)
		}
	}
}
