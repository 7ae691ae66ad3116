// Package postgres is the PostgreSQL backend, on github.com/jackc/pgx/v5
// through its database/sql adapter.
package postgres

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
)

// Backend is a PostgreSQL server behind a pool of connections.
type Backend struct {
	*sqldb.DB
}

// New returns a backend for cfg.DSN, a libpq connection string
// ("host=/var/run/postgresql dbname=app user=app") or URL. The connect timeout
// comes from connect_timeout.
func New(cfg tether.BackendConfig) (*Backend, error) {
	pc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: dsn: %w", err)
	}
	pc.ConnectTimeout = time.Duration(cfg.ConnectTimeout)
	// tetherd prepares and caches statements itself (sqldb); pgx's own cache
	// would prepare them a second time under other names.
	pc.DefaultQueryExecMode = pgx.QueryExecModeExec
	pc.StatementCacheCapacity = 0
	pc.DescriptionCacheCapacity = 0
	return &Backend{DB: sqldb.New(dialect{}, cfg, func() (*sql.DB, error) {
		return stdlib.OpenDB(*pc, stdlib.OptionAfterConnect(registerCoercions)), nil
	})}, nil
}

type dialect struct{}

func (dialect) Name() string { return "postgres" }

// Convert implements sqldb.Dialect. pgx returns int64, float64 (float32 for
// real), bool, string for text and numeric (exact), []byte for bytea and
// time.Time for date, timestamp and timestamptz.
func (dialect) Convert(dbType string, v any) any {
	switch x := v.(type) {
	case time.Time:
		switch dbType {
		case "DATE":
			return x.Format(sqldb.LayoutDate)
		case "TIMESTAMPTZ":
			return x.Format(sqldb.LayoutTimestamp)
		default:
			return x.Format(sqldb.LayoutDateTime)
		}
	case float32:
		return float64(x)
	case []byte:
		if dbType == "BYTEA" {
			return bytes.Clone(x) // x may be the driver's buffer
		}
		return string(x)
	}
	return v
}

// ClassifyError implements sqldb.Dialect: the backend code is the SQLSTATE.
func (dialect) ClassifyError(err error) *tether.Error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization failure, deadlock
			return &tether.Error{Code: tether.CodeBackendError, Message: pe.Message, BackendCode: pe.Code, Retry: true}
		case "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006":
			return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + pe.Message, BackendCode: pe.Code}
		case "57014": // query_canceled: our own deadline
			return nil
		}
		return &tether.Error{Code: tether.CodeBackendError, Message: pe.Message, BackendCode: pe.Code}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + ce.Error(), Retry: true, Err: tether.ErrUnavailable}
	}
	if pgconn.SafeToRetry(err) {
		return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + err.Error(), Retry: true, Err: tether.ErrUnavailable}
	}
	return sqldb.ClassifyIOError("postgres", err)
}

// ChangesSession implements sqldb.Dialect: SET (but not SET LOCAL, which ends
// with the transaction), RESET, temporary tables, LISTEN, PREPARE, DECLARE
// (cursors WITH HOLD), LOAD, set_config() and session-level advisory locks.
func (dialect) ChangesSession(sql string) bool {
	w := sqldb.Keywords(sql, 3)
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case "SET":
		return !(len(w) > 1 && w[1] == "LOCAL")
	case "RESET", "LISTEN", "PREPARE", "DECLARE", "LOAD", "DO", "CALL":
		return true
	}
	return sqldb.CreatesTemp(w) || sqldb.ContainsFold(sql, "SET_CONFIG", "PG_ADVISORY_LOCK", "PG_TRY_ADVISORY_LOCK")
}

// KeySQL implements sqldb.Dialect. A table name may be schema-qualified; an
// unqualified one is looked up on the search_path.
func (dialect) KeySQL() sqldb.KeySQL {
	q := sqldb.QuoteWith(`"`)
	return sqldb.KeySQL{
		Quote:       q,
		Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		Columns: func(table string) (string, []any) {
			// indkey is an int2vector, whose subscripts start at 0: rebuild it
			// as an ordinary array to get 1-based key positions.
			return `SELECT a.attname::text, COALESCE(array_position(string_to_array(i.indkey::text, ' ')::int2[], a.attnum), 0)
				FROM pg_attribute a
				LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
				WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
				ORDER BY a.attnum`, []any{table}
		},
		Upsert: func(keyCols, otherCols []string) string {
			return sqldb.OnConflict(q, keyCols, otherCols, "EXCLUDED")
		},
	}
}

var _ tether.Backend = (*Backend)(nil)
