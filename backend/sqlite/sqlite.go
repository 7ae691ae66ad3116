// Package sqlite is the SQLite backend, tetherd's embedded default, on
// github.com/mattn/go-sqlite3.
//
// The database is opened in WAL mode with a busy timeout, and transactions
// begin IMMEDIATE (they take the write lock at BEGIN), so that concurrent
// writers wait for each other instead of failing with SQLITE_BUSY halfway.
package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
)

// Backend is a SQLite database file behind a pool of connections.
type Backend struct {
	*sqldb.DB
	path string
}

// New returns a SQLite backend for cfg.DSN, a file path optionally followed by
// go-sqlite3 options ("var/tether.db?_foreign_keys=1"). It does not touch the
// file until Open.
func New(cfg tether.BackendConfig) (*Backend, error) {
	path, opts, _ := strings.Cut(cfg.DSN, "?")
	path = strings.TrimPrefix(path, "file:")
	if path == "" {
		return nil, fmt.Errorf("sqlite: dsn has no path")
	}
	q, err := url.ParseQuery(opts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dsn options %q: %w", opts, err)
	}
	setDefault(q, "_journal_mode", "WAL")
	setDefault(q, "_busy_timeout", strconv.Itoa(int(time.Duration(cfg.AcquireTimeout).Milliseconds()+5000)))
	setDefault(q, "_txlock", "immediate")
	setDefault(q, "_foreign_keys", "1")
	dsn := "file:" + path + "?" + q.Encode()
	b := &Backend{path: path}
	b.DB = sqldb.New(dialect{}, cfg, func() (*sql.DB, error) {
		if dir := filepath.Dir(path); path != ":memory:" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("create directory of %s: %w", path, err)
			}
		}
		// sqldb.Open guards the driver: a panic in it discards its
		// connection instead of leaking a pool slot.
		return sqldb.Open(&sqlite3.SQLiteDriver{}, dsn)
	})
	return b, nil
}

func setDefault(q url.Values, k, v string) {
	if q.Get(k) == "" {
		q.Set(k, v)
	}
}

type dialect struct{}

func (dialect) Name() string { return "sqlite" }

// Convert implements sqldb.Dialect. go-sqlite3 already returns int64, float64,
// string (TEXT), []byte (BLOB) and bool (declared BOOLEAN); columns declared
// DATE, DATETIME or TIMESTAMP come back as time.Time.
func (dialect) Convert(dbType string, v any) any {
	switch x := v.(type) {
	case time.Time:
		if dbType == "DATE" {
			return x.Format(sqldb.LayoutDate)
		}
		return x.Format(sqldb.LayoutDateTime)
	case []byte:
		return bytes.Clone(x) // the Dialect contract: x may be the driver's
	}
	return v
}

// ClassifyError implements sqldb.Dialect: the backend code is SQLite's
// extended result code, as a decimal number.
func (dialect) ClassifyError(err error) *tether.Error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return nil
	}
	code := strconv.Itoa(int(se.ExtendedCode))
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return &tether.Error{Code: tether.CodeBackendError, Message: se.Error(), BackendCode: code, Retry: true}
	case sqlite3.ErrCantOpen, sqlite3.ErrIoErr, sqlite3.ErrFull, sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
		return &tether.Error{Code: tether.CodeUnavailable, Message: "sqlite: " + se.Error(), BackendCode: code}
	}
	return &tether.Error{Code: tether.CodeBackendError, Message: se.Error(), BackendCode: code}
}

// ChangesSession implements sqldb.Dialect: PRAGMA, ATTACH/DETACH and
// temporary objects live as long as the connection.
func (dialect) ChangesSession(sql string) bool {
	w := sqldb.Keywords(sql, 3)
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case "PRAGMA", "ATTACH", "DETACH":
		return true
	}
	return sqldb.CreatesTemp(w)
}

// KeySQL implements sqldb.Dialect.
func (dialect) KeySQL() sqldb.KeySQL {
	q := sqldb.QuoteWith(`"`)
	return sqldb.KeySQL{
		Quote:       q,
		Placeholder: func(int) string { return "?" },
		Columns: func(table string) (string, []any) {
			return "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", []any{table}
		},
		Upsert: func(keyCols, otherCols []string) string {
			return sqldb.OnConflict(q, keyCols, otherCols, "excluded")
		},
	}
}

var _ tether.Backend = (*Backend)(nil)
