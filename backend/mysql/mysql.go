// Package mysql is the MySQL and MariaDB backend, on
// github.com/go-sql-driver/mysql.
//
// Statements use the binary protocol (server-side prepared statements, never
// client-side interpolation), so parameters are always bound by the server.
package mysql

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
)

// Backend is a MySQL or MariaDB server behind a pool of connections.
type Backend struct {
	*sqldb.DB
}

// New returns a backend for cfg.DSN in go-sql-driver/mysql's format
// ("user:pass@unix(/run/mysqld/mysqld.sock)/db" or "user:pass@tcp(host:3306)/db").
// tetherd forces interpolateParams=false and parseTime=false (dates travel as
// ISO 8601 strings) and sets the dial timeout from connect_timeout.
func New(cfg tether.BackendConfig) (*Backend, error) {
	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	mc.InterpolateParams = false
	mc.ParseTime = false
	mc.Timeout = time.Duration(cfg.ConnectTimeout)
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysql: connector: %w", err)
	}
	return &Backend{DB: sqldb.New(dialect{}, cfg, func() (*sql.DB, error) {
		return sql.OpenDB(connector), nil
	})}, nil
}

type dialect struct{}

func (dialect) Name() string { return "mysql" }

// Convert implements sqldb.Dialect for the binary protocol without parseTime:
// integers arrive as int64 (uint64 for large unsigned), FLOAT as float32,
// DOUBLE as float64, and everything else as bytes, told apart by column type.
func (dialect) Convert(dbType string, v any) any {
	switch x := v.(type) {
	case float32:
		// Widen through the shortest decimal form, so FLOAT 1.1 is 1.1.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f
	case []byte:
		switch dbType {
		case "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "BIT", "GEOMETRY":
			return bytes.Clone(x) // x is the driver's buffer
		case "DATETIME", "TIMESTAMP":
			// "YYYY-MM-DD HH:MM:SS" to ISO 8601's T, with one copy.
			var b strings.Builder
			b.Grow(len(x))
			if i := bytes.IndexByte(x, ' '); i >= 0 {
				b.Write(x[:i])
				b.WriteByte('T')
				b.Write(x[i+1:])
			} else {
				b.Write(x)
			}
			return b.String()
		}
		return string(x)
	}
	return v
}

// ClassifyError implements sqldb.Dialect: the backend code is MySQL's error
// number.
func (dialect) ClassifyError(err error) *tether.Error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		code := strconv.Itoa(int(me.Number))
		switch me.Number {
		case 1213, 1205: // deadlock, lock wait timeout: the transaction may be retried
			return &tether.Error{Code: tether.CodeBackendError, Message: me.Message, BackendCode: code, Retry: true}
		case 1040, 1203, 1045, 1044, 2002, 2003, 2006, 2013: // too many connections, access denied, gone away
			return &tether.Error{Code: tether.CodeUnavailable, Message: "mysql: " + me.Message, BackendCode: code}
		}
		return &tether.Error{Code: tether.CodeBackendError, Message: me.Message, BackendCode: code}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, mysql.ErrInvalidConn) {
		// A failed dial is safe to retry; a connection lost mid-statement is not.
		dial := oe != nil && oe.Op == "dial"
		return &tether.Error{Code: tether.CodeUnavailable, Message: "mysql: " + err.Error(), Retry: dial, Err: tether.ErrUnavailable}
	}
	return sqldb.ClassifyIOError("mysql", err)
}

// ChangesSession implements sqldb.Dialect. MySQL has no statement that resets
// a session (COM_RESET_CONNECTION is not exposed by the driver), so a
// connection that ran one of these is closed: SET (session and user
// variables, names, roles), USE, LOCK/UNLOCK TABLES, PREPARE/EXECUTE/
// DEALLOCATE, HANDLER, CALL, temporary tables, GET_LOCK() and any reference to
// a user variable (@x).
func (dialect) ChangesSession(sql string) bool {
	w := sqldb.Keywords(sql, 3)
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case "SET", "USE", "LOCK", "UNLOCK", "PREPARE", "EXECUTE", "DEALLOCATE", "HANDLER", "CALL":
		return true
	case "DROP":
		if len(w) > 1 && w[1] == "TEMPORARY" {
			return true
		}
	}
	return sqldb.CreatesTemp(w) || hasUserVariable(sql) || sqldb.ContainsFold(sql, "GET_LOCK")
}

// hasUserVariable reports an @name that is not @@system_variable.
func hasUserVariable(sql string) bool {
	for i := 0; i < len(sql); i++ {
		if sql[i] != '@' {
			continue
		}
		if i+1 < len(sql) && sql[i+1] == '@' {
			i++
			continue
		}
		return true
	}
	return false
}

// KeySQL implements sqldb.Dialect. A table name may be qualified with its
// database ("db.table"); an unqualified one is in the connection's database.
func (dialect) KeySQL() sqldb.KeySQL {
	q := sqldb.QuoteWith("`")
	return sqldb.KeySQL{
		Quote:       q,
		Placeholder: func(int) string { return "?" },
		Columns: func(table string) (string, []any) {
			const q = `SELECT c.COLUMN_NAME, COALESCE(k.ORDINAL_POSITION, 0)
				FROM information_schema.COLUMNS c
				LEFT JOIN information_schema.KEY_COLUMN_USAGE k
				  ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME
				 AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY'
				WHERE c.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND c.TABLE_NAME = ?
				ORDER BY c.ORDINAL_POSITION`
			if db, name, ok := strings.Cut(table, "."); ok {
				return q, []any{db, name}
			}
			return q, []any{nil, table}
		},
		Upsert: func(keyCols, otherCols []string) string {
			set := make([]string, 0, len(otherCols))
			for _, c := range otherCols {
				set = append(set, q(c)+" = VALUES("+q(c)+")")
			}
			if len(set) == 0 { // nothing to update: keep the row as it is
				set = append(set, q(keyCols[0])+" = "+q(keyCols[0]))
			}
			return " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
		},
	}
}

var _ tether.Backend = (*Backend)(nil)
