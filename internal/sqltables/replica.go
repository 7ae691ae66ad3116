package sqltables

// This file holds what read/write splitting needs beyond Cacheable: the
// constructs that make a read unfit for a replica (Info.ReplicaSafe). Most
// of them are found where Cacheable's are (uncacheable); each such site
// also calls primary with the reason. The rest of the non-cacheable
// constructs (NOW(), RAND(), UUID(), SLEEP(), USER(), catalog tables,
// EXPLAIN, DESCRIBE) are harmless on a replica.

// reasonSequence is the ReplicaReason of a read that uses a sequence: the
// one kind of certain read that may write (nextval, setval).
const reasonSequence = "uses a sequence, which the primary owns and the session's nextval set"

// MayWrite reports whether the statement may change data, as far as the
// text tells: not certain, a write or DDL, a statement of another kind that
// is not a session setting (COMMIT as text, DO), or a read that uses a
// sequence. A read that is merely unfit for a replica (a lock, a variable,
// FOUND_ROWS()) and a SET do not: a router's read-your-writes wait need not
// follow them.
func (i Info) MayWrite() bool {
	return !i.Certain || i.Kind == Write || i.Kind == DDL || i.Kind == Other && !i.Session ||
		i.Kind == Read && i.ReplicaReason == reasonSequence
}

// primaryFuncs are the built-ins (besides lockFuncs) that must run on the
// primary, by the reason why.
var primaryFuncs = map[string]string{
	// They answer about the session's previous statement, which ran on
	// the primary (a write) or on another connection.
	"LAST_INSERT_ID FOUND_ROWS ROW_COUNT": "reads the session's previous statement (LAST_INSERT_ID(), FOUND_ROWS(), ROW_COUNT())",
	// nextval and setval write the sequence; currval, lastval and
	// MariaDB's LASTVAL read what the session's nextval returned.
	"NEXTVAL SETVAL CURRVAL LASTVAL LAST_VALUE_SEQ": reasonSequence,
	// Settings: a setting may differ between servers (transaction_read_only
	// is on on a standby) or have been set in the session on the primary;
	// set_config and setseed change the session.
	"CURRENT_SETTING SET_CONFIG SETSEED": "reads or changes a setting of the session or the server",
	// txid_current assigns a transaction id (an error on a standby); the
	// others read the server's transaction state.
	"TXID_CURRENT TXID_CURRENT_IF_ASSIGNED TXID_CURRENT_SNAPSHOT TXID_STATUS": "reads or assigns a transaction id, which the primary owns",
	// They name the server or the connection the statement runs on.
	"CONNECTION_ID VERSION INET_CLIENT_ADDR INET_CLIENT_PORT INET_SERVER_ADDR INET_SERVER_PORT": "names the server or connection it runs on, which a replica answers for itself",
	// A file of the server's host.
	"LOAD_FILE": "calls LOAD_FILE(), which reads a file of the server it runs on",
	// Replication waits mean one server.
	"MASTER_POS_WAIT SOURCE_POS_WAIT MASTER_GTID_WAIT WAIT_FOR_EXECUTED_GTID_SET": "waits for replication on the server it runs on",
}

// replicaPgFuncs are the PostgreSQL system functions known to leave no
// trace and to answer on a replica as on the primary (sizes, catalog
// lookups, sleeps); any other pg_* or txid_* function goes to the primary
// (pg_advisory_lock, pg_notify, pg_backend_pid, pg_current_wal_lsn,
// pg_is_in_recovery, pg_terminate_backend ...).
const replicaPgFuncs = `
PG_SLEEP PG_SLEEP_FOR PG_SLEEP_UNTIL PG_TYPEOF PG_SIZE_PRETTY PG_SIZE_BYTES PG_RELATION_SIZE
PG_TOTAL_RELATION_SIZE PG_TABLE_SIZE PG_INDEXES_SIZE PG_COLUMN_SIZE PG_DATABASE_SIZE PG_GET_VIEWDEF
PG_GET_INDEXDEF PG_GET_CONSTRAINTDEF PG_GET_TRIGGERDEF PG_GET_FUNCTIONDEF PG_GET_FUNCTION_ARGUMENTS
PG_GET_FUNCTION_IDENTITY_ARGUMENTS PG_GET_FUNCTION_RESULT PG_GET_EXPR PG_GET_USERBYID
PG_GET_SERIAL_SEQUENCE PG_TABLE_IS_VISIBLE PG_TYPE_IS_VISIBLE PG_FUNCTION_IS_VISIBLE PG_HAS_ROLE
PG_ENCODING_TO_CHAR PG_CHAR_TO_ENCODING PG_GET_KEYWORDS PG_INPUT_IS_VALID PG_COLUMN_COMPRESSION
`

// catalogTables are the system tables and views that describe the schema
// and the users: a replica has the primary's (as of its lag). The others
// (performance_schema, sys, information_schema.PROCESSLIST, pg_stat_*,
// pg_locks, pg_settings, mysql.gtid_slave_pos ...) hold one server's
// runtime state and go to the primary.
const catalogTables = `
TABLES COLUMNS VIEWS SCHEMATA KEY_COLUMN_USAGE TABLE_CONSTRAINTS REFERENTIAL_CONSTRAINTS
CHECK_CONSTRAINTS STATISTICS ROUTINES PARAMETERS TRIGGERS CHARACTER_SETS COLLATIONS
COLLATION_CHARACTER_SET_APPLICABILITY COLUMN_PRIVILEGES TABLE_PRIVILEGES SCHEMA_PRIVILEGES
USER_PRIVILEGES PARTITIONS VIEW_TABLE_USAGE VIEW_COLUMN_USAGE CONSTRAINT_COLUMN_USAGE
CONSTRAINT_TABLE_USAGE DOMAINS ELEMENT_TYPES ENABLED_ROLES APPLICABLE_ROLES ROLE_TABLE_GRANTS KEYWORDS
USER DB GLOBAL_PRIV TABLES_PRIV COLUMNS_PRIV PROCS_PRIV ROLES_MAPPING PROC FUNC HELP_TOPIC
HELP_CATEGORY HELP_KEYWORD HELP_RELATION TIME_ZONE TIME_ZONE_NAME TIME_ZONE_TRANSITION
TIME_ZONE_TRANSITION_TYPE TIME_ZONE_LEAP_SECOND
PG_CLASS PG_ATTRIBUTE PG_NAMESPACE PG_TYPE PG_PROC PG_INDEX PG_INDEXES PG_CONSTRAINT PG_TABLES
PG_VIEWS PG_MATVIEWS PG_ROLES PG_USER PG_DATABASE PG_DESCRIPTION PG_ATTRDEF PG_ENUM PG_EXTENSION
PG_TRIGGER PG_DEPEND PG_AM PG_INHERITS PG_COLLATION PG_TABLESPACE PG_POLICY PG_POLICIES PG_REWRITE
PG_OPERATOR PG_CAST PG_LANGUAGE PG_AGGREGATE PG_RANGE PG_AUTH_MEMBERS PG_TIMEZONE_NAMES
PG_TIMEZONE_ABBREVS PG_FOREIGN_TABLE PG_FOREIGN_SERVER PG_EVENT_TRIGGER PG_SHDESCRIPTION
`

// showSchema are the words after MySQL's SHOW [FULL|EXTENDED] of the SHOW
// statements that list the replicated schema. Any other SHOW (STATUS,
// VARIABLES, PROCESSLIST, MASTER/SLAVE/REPLICA STATUS, BINARY LOGS,
// WARNINGS, ERRORS, PROFILE, ENGINE, GRANTS, OPEN TABLES ...) reads the
// state of one server or of the session's previous statement and goes to
// the primary, as does PostgreSQL's SHOW (a setting).
const showSchema = `
TABLES COLUMNS FIELDS INDEX INDEXES KEYS DATABASES SCHEMAS CREATE TABLE CHARACTER CHARSET COLLATION TRIGGERS
`

// primary records that the statement must run on the primary: the first
// reason is kept. Every caller also makes the statement uncacheable (a
// cacheable read is always replica-safe; the fuzz test checks it).
func (a *Analyzer) primary(why string) {
	if a.primaryWhy == "" {
		a.primaryWhy = why
	}
}

// systemTable checks a read of the system table name (lower case) of a
// system schema, or of an unqualified PostgreSQL pg_* table.
func (a *Analyzer) systemTable(schema, name string) {
	if schema == "performance_schema" || schema == "sys" || !lookup(name).catalog {
		a.primary("reads a system table of the server's runtime state, which differs between servers")
	}
}

// showReplica handles the start of a SHOW, HELP, HANDLER, CHECK or
// CHECKSUM statement whose first word is t: only MySQL's HELP and the SHOW
// statements that list the schema may run on a replica.
func (a *Analyzer) showReplica(t token) {
	word := a.text(t)
	switch {
	case !a.mysql:
		a.primary("is a SHOW of a setting, which may differ between servers or belong to the session")
	case len(word) == 4 && equalUpper("HELP", word):
	case len(word) == 4 && equalUpper("SHOW", word):
		w := a.peekWord()
		if w.showMod {
			a.next()
			w = a.peekWord()
		}
		if !w.show {
			a.primary("is a SHOW of server or session state (status, variables, processlist, replication, warnings), which differs between servers")
		}
	default:
		a.primary("is a HANDLER, CHECK or CHECKSUM, which uses the session's handlers or checks one server's copy")
	}
}

// replicaResult fills info's ReplicaSafe and ReplicaReason from the
// analysis; info's other fields are set.
func (a *Analyzer) replicaResult(info *Info) {
	switch {
	case !info.Certain:
		info.ReplicaReason = info.Reason
	case info.Kind != Read:
		info.ReplicaReason = "not a read"
	case a.primaryWhy != "":
		info.ReplicaReason = a.primaryWhy
	case info.Session || info.Temporary:
		// Not reached today (set_config has a primary reason): a read
		// that changes the session must run where the session lives.
		info.ReplicaReason = "changes the session's state"
	default:
		info.ReplicaSafe = true
	}
}
