package sqltables

import "strings"

// keyword identifies the words the analysis acts on.
type keyword uint8

const (
	kwNone keyword = iota
	kwSelect
	kwWith
	kwValues
	kwTable
	kwInsert
	kwReplace
	kwUpdate
	kwDelete
	kwMerge
	kwFrom
	kwJoin
	kwUsing
	kwSet
	kwInto
	kwFor
	kwLock
	kwAs
	kwIs
	kwNot
	kwDistinct
	kwRecursive
	kwModifier // MySQL's LOW_PRIORITY, IGNORE ...: skipped before the table of INSERT, UPDATE, DELETE
	kwOnly     // PostgreSQL's ONLY t
	kwLateral
	kwEndFrom // WHERE, GROUP, ORDER, LIMIT, UNION ...: end a table list
	kwCalcFoundRows
	kwNext
	kwIf
	kwExists
	kwTemporary
	kwView
	kwIndex
	kwOn
	kwRename
	kwTo
	kwColumn
	kwCascade
	kwObject // another kind of schema object: FUNCTION, TRIGGER, DATABASE ...
	kwCreate
	kwAlter
	kwDrop
	kwTruncate
	kwLoad
	kwCopy
	kwShow    // SHOW, DESCRIBE, HELP ...: a read of server state
	kwExplain // EXPLAIN, DESCRIBE, DESC
	kwAnalyze
	kwDo
	kwCall // CALL, EXECUTE
	kwBegin
	kwQuiet // statements that neither read nor write tables
	kwShare
	kwIn
	kwValue
	kwRefresh
	kwSession // USE, RESET, DISCARD: change the session's state
)

// fnClass says what calling a function means for a cache.
type fnClass uint8

const (
	fnUnknown  fnClass = iota // not known: it might write
	fnSafe                    // built in, deterministic, reads no table
	fnVolatile                // non-deterministic, session state, locks, sleeps
)

// bare says in which dialects a word names a volatile value without
// parentheses (CURRENT_TIMESTAMP).
type bare uint8

const (
	bareNone bare = iota
	bareBoth
	bareMySQL
	barePG
)

// wordInfo is what the analysis knows of a word, by its upper-case spelling.
type wordInfo struct {
	kw       keyword
	fn       fnClass
	bare     bare
	reserved bool // cannot be an unquoted table name
	nofn     bool // "word (" is not a function call
	noArgs   bool // volatile when called without arguments: UNIX_TIMESTAMP()
	session  bool // a call changes the session's settings: set_config()
	reason   string
	// primary says why a call must run on the primary, not a replica: it
	// takes a lock, uses a sequence, reads the session's previous
	// statement or names the server or connection. Empty for the
	// functions a replica answers as well (NOW(), RAND(), UUID() ...).
	primary string
	// replica marks the PostgreSQL system functions (pg_*) known to leave
	// no trace and to answer on a replica as on the primary; other pg_*
	// functions go to the primary.
	replica bool
	// catalog marks the system tables (information_schema, mysql,
	// pg_catalog) that describe the schema or the users, which a replica
	// replicates; other system tables hold one server's runtime state.
	catalog bool
	// show marks the word after MySQL's SHOW [FULL|EXTENDED] of a SHOW
	// that lists the replicated schema (SHOW TABLES, SHOW COLUMNS ...);
	// showMod marks FULL and EXTENDED.
	show, showMod bool
}

var words = map[string]*wordInfo{}

func word(name string) *wordInfo {
	w := words[name]
	if w == nil {
		w = &wordInfo{}
		words[name] = w
	}
	return w
}

// lookup returns what is known of the word w, case-insensitively, without
// allocating: an open-addressing table probed with an FNV-1a hash of the
// upper-cased word (a Go map would need the upper-cased copy first, and
// cost twice as much).
func lookup(w string) *wordInfo {
	if len(w) > maxWordLen {
		return &noWord
	}
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		h = (h ^ uint32(upper(w[i]))) * 16777619
	}
	for i := h & slotMask; ; i = (i + 1) & slotMask {
		s := &slots[i]
		if s.info == nil {
			return &noWord
		}
		if len(s.name) == len(w) && equalUpper(s.name, w) {
			return s.info
		}
	}
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// equalUpper reports whether w upper-cased is u.
func equalUpper(u, w string) bool {
	for i := 0; i < len(w); i++ {
		if upper(w[i]) != u[i] {
			return false
		}
	}
	return true
}

const slotMask = 1<<11 - 1

var (
	slots [slotMask + 1]struct {
		name string
		info *wordInfo
	}
	maxWordLen int
)

// index fills slots from words.
func index() {
	for name, info := range words {
		h := uint32(2166136261)
		for i := 0; i < len(name); i++ {
			h = (h ^ uint32(name[i])) * 16777619
		}
		i := h & slotMask
		for slots[i].info != nil {
			i = (i + 1) & slotMask
		}
		slots[i].name, slots[i].info = name, info
		maxWordLen = max(maxWordLen, len(name))
	}
	if len(words) > len(slots)/2 {
		panic("sqltables: too many words for the lookup table")
	}
}

var noWord wordInfo

func init() {
	kws := map[keyword]string{
		kwSelect:        "SELECT",
		kwWith:          "WITH",
		kwValues:        "VALUES",
		kwTable:         "TABLE",
		kwInsert:        "INSERT",
		kwReplace:       "REPLACE",
		kwUpdate:        "UPDATE",
		kwDelete:        "DELETE",
		kwMerge:         "MERGE",
		kwFrom:          "FROM",
		kwJoin:          "JOIN STRAIGHT_JOIN",
		kwUsing:         "USING",
		kwSet:           "SET",
		kwInto:          "INTO",
		kwFor:           "FOR",
		kwLock:          "LOCK",
		kwAs:            "AS",
		kwIs:            "IS",
		kwNot:           "NOT",
		kwDistinct:      "DISTINCT",
		kwRecursive:     "RECURSIVE",
		kwModifier:      "LOW_PRIORITY DELAYED HIGH_PRIORITY IGNORE QUICK",
		kwOnly:          "ONLY",
		kwLateral:       "LATERAL",
		kwRefresh:       "REFRESH",
		kwEndFrom:       "WHERE GROUP HAVING ORDER LIMIT OFFSET FETCH WINDOW UNION EXCEPT INTERSECT RETURNING PROCEDURE QUALIFY",
		kwCalcFoundRows: "SQL_CALC_FOUND_ROWS",
		kwNext:          "NEXT PREVIOUS",
		kwIf:            "IF",
		kwExists:        "EXISTS",
		kwTemporary:     "TEMPORARY TEMP",
		kwView:          "VIEW",
		kwIndex:         "INDEX",
		kwOn:            "ON",
		kwRename:        "RENAME",
		kwTo:            "TO",
		kwColumn:        "COLUMN KEY CONSTRAINT",
		kwCascade:       "CASCADE",
		kwObject: "FUNCTION PROCEDURE TRIGGER EVENT DATABASE SCHEMA SEQUENCE USER ROLE TYPE EXTENSION " +
			"SERVER TABLESPACE DOMAIN POLICY RULE PUBLICATION SUBSCRIPTION AGGREGATE OPERATOR COLLATION " +
			"CONVERSION LANGUAGE STATISTICS TRANSFORM ACCESS OWNED PACKAGE SYNONYM LOGFILE",
		kwCreate:   "CREATE",
		kwAlter:    "ALTER",
		kwDrop:     "DROP",
		kwTruncate: "TRUNCATE",
		kwLoad:     "LOAD",
		kwCopy:     "COPY",
		kwShow:     "SHOW HELP HANDLER CHECK CHECKSUM",
		kwExplain:  "EXPLAIN DESCRIBE DESC",
		kwAnalyze:  "ANALYZE",
		kwDo:       "DO",
		kwCall:     "CALL EXECUTE EXEC",
		kwBegin:    "BEGIN",
		kwShare:    "SHARE NO",
		kwIn:       "IN",
		kwValue:    "VALUE",
		kwSession:  "USE RESET DISCARD",
		kwQuiet: "START COMMIT ROLLBACK SAVEPOINT RELEASE END ABORT XA PREPARE DEALLOCATE GRANT REVOKE " +
			"COMMENT LISTEN UNLISTEN NOTIFY CHECKPOINT VACUUM CLUSTER REINDEX OPTIMIZE FLUSH " +
			"KILL UNLOCK CLOSE PURGE INSTALL UNINSTALL",
	}
	for kw, names := range kws {
		for _, n := range strings.Fields(names) {
			word(n).kw = kw
		}
	}
	// Words that end a table name position: a table so named must be quoted.
	for _, n := range strings.Fields("SELECT FROM WHERE JOIN STRAIGHT_JOIN INNER LEFT RIGHT FULL CROSS NATURAL " +
		"OUTER ON USING SET VALUES VALUE GROUP ORDER HAVING LIMIT UNION EXCEPT INTERSECT WITH AS INTO FOR " +
		"LOCK WINDOW RETURNING OFFSET FETCH AND OR NOT IN IS NULL CASE WHEN THEN ELSE END DEFAULT DISTINCT " +
		"ALL TABLE PARTITION INSERT UPDATE DELETE REPLACE CREATE DROP ALTER WHERE") {
		word(n).reserved = true
	}
	// Words followed by a parenthesis that opens a list, a subquery or a
	// type's arguments, not a function's arguments.
	for _, n := range strings.Fields("IN EXISTS VALUES VALUE AS ON USING AND OR NOT ANY ALL SOME OVER FILTER " +
		"WITHIN ROW ARRAY FROM JOIN WHERE SELECT WHEN THEN ELSE CASE INTO SET BY HAVING LIMIT OFFSET UNION " +
		"INTERSECT EXCEPT LATERAL RETURNING IS LIKE ILIKE BETWEEN DISTINCT PARTITION WINDOW KEY INDEX PRIMARY " +
		"UNIQUE REFERENCES CHECK DEFAULT CONSTRAINT FOREIGN TABLE DO CONFLICT ONLY INTERVAL MATERIALIZED " +
		"COLLATE REGEXP RLIKE DIV XOR TABLESAMPLE USE FORCE IGNORE FOR ORDINALITY RECURSIVE WITH SETS ESCAPE " +
		"OF SIMILAR TO AT RETURN STRAIGHT_JOIN ELSEIF UPDATE DELETE MERGE MATCHED BOTH LEADING " +
		"TRAILING REPEATABLE COLUMNS PATH NESTED GROUP") {
		word(n).nofn = true
	}
	// Built-in functions and type names that read no table and return the
	// same for the same arguments (given the session's settings, which the
	// cache accounts for separately).
	for _, n := range strings.Fields(safeFuncs) {
		word(n).fn = fnSafe
	}
	word("SET_CONFIG").session = true
	// UNIX_TIMESTAMP(d) depends on d and the session's time zone only.
	word("UNIX_TIMESTAMP").noArgs = true
	word("UNIX_TIMESTAMP").reason = "calls UNIX_TIMESTAMP() without arguments"
	for _, n := range strings.Fields(volatileFuncs) {
		w := word(n)
		w.fn = fnVolatile
		w.reason = "calls " + n + "(), whose result is not a function of the tables it reads"
	}
	for _, n := range strings.Fields(lockFuncs) {
		w := word(n)
		w.fn = fnVolatile
		w.reason = "calls " + n + "(), which takes, releases or tests a lock"
	}
	// What must run on the primary (replica.go says why, rule by rule).
	for n, why := range primaryFuncs {
		for _, f := range strings.Fields(n) {
			word(f).primary = why
		}
	}
	for _, n := range strings.Fields(lockFuncs) {
		word(n).primary = "calls " + n + "(), which takes, releases or tests a lock on the server it runs on"
	}
	for _, n := range strings.Fields(replicaPgFuncs) {
		word(n).replica = true
	}
	for _, n := range strings.Fields(catalogTables) {
		word(n).catalog = true
	}
	for _, n := range strings.Fields(showSchema) {
		word(n).show = true
	}
	word("FULL").showMod = true
	word("EXTENDED").showMod = true
	bares := map[bare]string{
		bareBoth: "CURRENT_TIMESTAMP CURRENT_DATE CURRENT_TIME LOCALTIME LOCALTIMESTAMP CURRENT_USER SESSION_USER",
		// MySQL allows UTC_TIMESTAMP without parentheses; in PostgreSQL
		// these are keywords.
		bareMySQL: "UTC_TIMESTAMP UTC_DATE UTC_TIME",
		barePG:    "USER CURRENT_ROLE CURRENT_SCHEMA CURRENT_CATALOG SYSTEM_USER",
	}
	for b, names := range bares {
		for _, n := range strings.Fields(names) {
			w := word(n)
			w.bare = b
			w.fn = fnVolatile
			w.reason = "uses " + n + ", whose value is not a function of the tables read"
		}
	}
	index()
}

// safeFuncs are built-in functions of MySQL/MariaDB and PostgreSQL (and type
// names written like calls) known to read no table and to be deterministic.
const safeFuncs = `
ABS ACOS ADDDATE ADDTIME AES_DECRYPT AES_ENCRYPT AGAINST ANY_VALUE ASCII ASIN ATAN ATAN2 AVG BIN BIT_AND
BIT_COUNT BIT_LENGTH BIT_OR BIT_XOR CAST CEIL CEILING CHAR CHAR_LENGTH CHARACTER_LENGTH CHARSET COALESCE
COERCIBILITY COLLATION COMPRESS CONCAT CONCAT_WS CONV CONVERT CONVERT_TZ COS COT COUNT CRC32 DATE DATE_ADD
DATE_FORMAT DATE_SUB DATEDIFF DAY DAYNAME DAYOFMONTH DAYOFWEEK DAYOFYEAR DEGREES ELT EXP EXPORT_SET EXTRACT
FIELD FIND_IN_SET FLOOR FORMAT FROM_BASE64 FROM_DAYS FROM_UNIXTIME GREATEST GROUP_CONCAT GROUPING HEX HOUR IF
IFNULL INET_ATON INET_NTOA INET6_ATON INET6_NTOA INSERT INSTR ISNULL LAST_DAY LCASE LEAST LEFT LENGTH LN
LOCATE LOG LOG10 LOG2 LOWER LPAD LTRIM MAKEDATE MAKETIME MATCH MAX MD5 MICROSECOND MID MIN MINUTE MOD MONTH
MONTHNAME NULLIF OCT OCTET_LENGTH ORD PERIOD_ADD PERIOD_DIFF PI POSITION POW POWER QUARTER QUOTE RADIANS
REPEAT REPLACE REVERSE RIGHT ROUND RPAD RTRIM SEC_TO_TIME SECOND SHA SHA1 SHA2 SIGN SIN SOUNDEX SPACE SQRT
STD STDDEV STDDEV_POP STDDEV_SAMP STR_TO_DATE STRCMP SUBDATE SUBSTR SUBSTRING SUBSTRING_INDEX SUBTIME SUM TAN
TIME TIME_FORMAT TIME_TO_SEC TIMEDIFF TIMESTAMP TIMESTAMPADD TIMESTAMPDIFF TO_BASE64 TO_DAYS TO_SECONDS TRIM
TRUNCATE UCASE UNCOMPRESS UNCOMPRESSED_LENGTH UNHEX UPPER VAR_POP VAR_SAMP VARIANCE WEEK WEEKDAY WEEKOFYEAR
WEIGHT_STRING YEAR YEARWEEK ROW_NUMBER RANK DENSE_RANK PERCENT_RANK CUME_DIST NTILE LAG LEAD FIRST_VALUE
LAST_VALUE NTH_VALUE ROLLUP CUBE NVL NVL2 DECODE ENCODE COLUMN_GET COLUMN_JSON REGEXP_INSTR REGEXP_LIKE
REGEXP_REPLACE REGEXP_SUBSTR REGEXP_MATCHES REGEXP_MATCH REGEXP_SPLIT_TO_ARRAY REGEXP_SPLIT_TO_TABLE
REGEXP_COUNT CASE_WHEN DECIMAL NUMERIC VARCHAR NCHAR NVARCHAR BINARY VARBINARY INT INTEGER BIGINT SMALLINT
TINYINT FLOAT DOUBLE REAL DATETIME BIT BOOL BOOLEAN TEXT BYTEA UUID_TO_BIN BIN_TO_UUID IS_UUID
BTRIM SPLIT_PART STRPOS STARTS_WITH INITCAP SHA224 SHA256 SHA384 SHA512 TO_CHAR TO_DATE TO_TIMESTAMP
TO_NUMBER TO_HEX DATE_TRUNC DATE_PART DATE_BIN MAKE_DATE MAKE_TIME MAKE_TIMESTAMP MAKE_TIMESTAMPTZ
MAKE_INTERVAL JUSTIFY_DAYS JUSTIFY_HOURS JUSTIFY_INTERVAL TRUNC BOOL_AND BOOL_OR EVERY STRING_AGG ARRAY_AGG
ROW_TO_JSON ARRAY_TO_JSON TO_JSON TO_JSONB ARRAY_LENGTH ARRAY_POSITION ARRAY_POSITIONS ARRAY_REMOVE
ARRAY_APPEND ARRAY_PREPEND ARRAY_CAT ARRAY_TO_STRING STRING_TO_ARRAY ARRAY_DIMS ARRAY_LOWER ARRAY_UPPER
ARRAY_NDIMS ARRAY_REPLACE UNNEST GENERATE_SERIES GENERATE_SUBSCRIPTS CARDINALITY OVERLAY TRANSLATE CHR
LENGTHB QUOTE_IDENT QUOTE_LITERAL QUOTE_NULLABLE FORMAT_TYPE NUM_NONNULLS NUM_NULLS SCALE WIDTH_BUCKET
CBRT DIV FACTORIAL GCD LCM LOG1P PERCENTILE_CONT PERCENTILE_DISC MODE COVAR_POP COVAR_SAMP CORR
REGR_SLOPE REGR_INTERCEPT ISFINITE ISEMPTY LOWER_INC UPPER_INC LOWER_INF UPPER_INF RANGE_MERGE
INT4RANGE INT8RANGE NUMRANGE TSRANGE TSTZRANGE DATERANGE TO_TSVECTOR TO_TSQUERY PLAINTO_TSQUERY
PHRASETO_TSQUERY WEBSEARCH_TO_TSQUERY TS_RANK TS_RANK_CD TS_HEADLINE SETWEIGHT STRIP HOST MASKLEN NETMASK
NETWORK BROADCAST FAMILY ABBREV HSTORE AKEYS AVALS SKEYS SVALS EXIST DEFINED XMLELEMENT XMLFOREST XMLAGG
XMLCONCAT XPATH ASCII_STR CONCAT_OP UNACCENT SIMILARITY WORD_SIMILARITY LEVENSHTEIN SOUNDEX DIFFERENCE
METAPHONE DMETAPHONE INET INET_MERGE TIMEZONE SUBSTRB TO_ASCII BIT_COUNT GET_BIT GET_BYTE SET_BIT SET_BYTE
ISOYEAR EPOCH NORMALIZE IS_NORMALIZED ERF ERFC BERNOULLI SYSTEM UNIX_TIMESTAMP DIGEST HMAC
`

// volatileFuncs return what no table determines: time, randomness, the
// session or connection, sequences, sleeps, configuration.
const volatileFuncs = `
NOW SYSDATE CURDATE CURTIME CURRENT_TIMESTAMP CURRENT_DATE CURRENT_TIME LOCALTIME LOCALTIMESTAMP
UTC_TIMESTAMP UTC_DATE UTC_TIME RAND RANDOM_BYTES UUID UUID_SHORT SYS_GUID CONNECTION_ID
LAST_INSERT_ID FOUND_ROWS ROW_COUNT USER CURRENT_USER SESSION_USER SYSTEM_USER DATABASE SCHEMA
CURRENT_ROLE SLEEP BENCHMARK LOAD_FILE MASTER_POS_WAIT SOURCE_POS_WAIT MASTER_GTID_WAIT WAIT_FOR_EXECUTED_GTID_SET
NEXTVAL LASTVAL SETVAL CURRVAL LAST_VALUE_SEQ VERSION PASSWORD ENCRYPT GET_FORMAT ICU_VERSION
STATEMENT_TIMESTAMP CLOCK_TIMESTAMP TRANSACTION_TIMESTAMP TIMEOFDAY RANDOM RANDOM_NORMAL SETSEED
GEN_RANDOM_UUID GEN_RANDOM_BYTES UUID_GENERATE_V1 UUID_GENERATE_V1MC UUID_GENERATE_V4 UUIDV4 UUIDV7
CURRENT_SETTING SET_CONFIG TXID_CURRENT TXID_CURRENT_IF_ASSIGNED TXID_CURRENT_SNAPSHOT TXID_STATUS
CURRENT_DATABASE CURRENT_SCHEMA CURRENT_SCHEMAS CURRENT_QUERY INET_CLIENT_ADDR INET_CLIENT_PORT
INET_SERVER_ADDR INET_SERVER_PORT AGE TO_REGCLASS TO_REGTYPE TO_REGPROC HAS_TABLE_PRIVILEGE
HAS_SCHEMA_PRIVILEGE HAS_DATABASE_PRIVILEGE HAS_COLUMN_PRIVILEGE HAS_FUNCTION_PRIVILEGE OBJ_DESCRIPTION
COL_DESCRIPTION SHOBJ_DESCRIPTION CURRENT_CATALOG
`

// lockFuncs take, release or test locks: a cache hit would skip the effect.
const lockFuncs = `
GET_LOCK RELEASE_LOCK RELEASE_ALL_LOCKS IS_FREE_LOCK IS_USED_LOCK
`
