// Package mysql is the MySQL and MariaDB backend. Its server connections are
// driven by tetherd's event loop (conn.go): the handshake is done at dial time
// (dial.go), then statements go from a client's frame to the server's socket
// and back without a goroutine hand-off, prepared once per connection and
// run with bound parameters in the binary protocol. The pool (backend/sqlpool)
// keeps the connections; the server's own session tracking decides when one
// must be reset (session.go).
package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	gosql "github.com/go-sql-driver/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
)

// Backend is a MySQL or MariaDB server behind a pool of loop-driven
// connections. It implements tether.Backend, Querier, Transactor, KeyValue
// and the loop API of sqlpool.
type Backend struct {
	*sqlpool.Pool
	*sqldb.KeyValue
	d *driver
}

// New returns a backend for cfg.DSN in go-sql-driver/mysql's format
// ("user:pass@unix(/run/mysqld/mysqld.sock)/db" or "user:pass@tcp(host:3306)/db"),
// parsed by that driver. Of its options, tetherd uses the address, user,
// password, database, collation, allowCleartextPasswords, TLS (tlsConfig)
// and extra session variables (any other key=value: SET at connect). It
// connects nothing.
func New(cfg tether.BackendConfig) (*Backend, error) {
	dsn, own, err := cutParams(cfg.DSN, "tls-ca", "tls-server-name")
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	mc, err := gosql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	tc, err := tlsConfig(mc, own)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	d := &driver{cfg: mc, tls: tc, tlsPreferred: mc.AllowFallbackToPlaintext,
		connectTimeout: time.Duration(cfg.ConnectTimeout), stmtCacheSize: cfg.StmtCacheSize,
		pooled: map[string]bool{}}
	for _, v := range pooledVariables {
		d.pooled[v] = true
	}
	d.collation = 45 // utf8mb4_general_ci; the setup's SET NAMES sets the DSN's collation
	coll := mc.Collation
	if coll == "" {
		coll = "utf8mb4_general_ci"
	}
	charset, _, _ := strings.Cut(coll, "_")
	if !isIdent(coll) || !isIdent(charset) {
		return nil, fmt.Errorf("mysql: dsn: collation %q is not a collation name", coll)
	}
	setup := "SET NAMES " + charset + " COLLATE " + coll + ", " + trackerSQL
	keys := make([]string, 0, len(mc.Params))
	for k := range mc.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !isIdent(k) {
			return nil, fmt.Errorf("mysql: dsn: parameter %q is not a session variable name", k)
		}
		setup += ", SESSION " + k + " = " + mc.Params[k]
	}
	d.setupSQL = setup
	p := sqlpool.New(d, cfg)
	d.pool = p
	b := &Backend{Pool: p, d: d}
	b.KeyValue = sqldb.NewKeyValue("mysql", keySQL(), p)
	return b, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// cutParams takes tetherd's own parameters names out of dsn, before
// go-sql-driver parses it: it would take them for session variables, and a
// path's slashes for the one before the database name. A value may be URL
// escaped.
func cutParams(dsn string, names ...string) (string, map[string]string, error) {
	own := map[string]string{}
	q := strings.LastIndexByte(dsn, '?')
	if q < 0 {
		return dsn, own, nil
	}
	kept := make([]string, 0, 4)
	for _, kv := range strings.Split(dsn[q+1:], "&") {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			kept = append(kept, kv)
			continue
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", k, err)
		}
		own[k] = uv
	}
	if len(kept) == 0 {
		return dsn[:q], own, nil
	}
	return dsn[:q+1] + strings.Join(kept, "&"), own, nil
}

// tlsConfig reads the DSN's TLS settings, go-sql-driver's tls parameter and
// tetherd's own tls-ca and tls-server-name (own, cutParams), and returns the
// config of the TLS connections, nil for none; mc.TLS is set to it too, for
// the side connections:
//
//	tls=true         verify the server's chain (system roots, and tls-ca) and name
//	tls=skip-verify  encrypt, verify nothing
//	tls=preferred    encrypt, verify nothing, if the server offers TLS
//	tls=false        no TLS (the default)
//	tls-ca=path      a PEM file of the CA certificates trusted, instead of the
//	                 system's (as mysql --ssl-ca and libpq's sslrootcert)
//	tls-server-name  the name verified, when not the address's host
//
// Connections share a session cache, so that a reconnect resumes a TLS
// session (one round trip and no certificate check less). TLS 1.2 at least.
func tlsConfig(mc *gosql.Config, own map[string]string) (*tls.Config, error) {
	ca, hasCA := own["tls-ca"]
	name, hasName := own["tls-server-name"]
	if mc.TLS == nil {
		if hasCA || hasName {
			return nil, errors.New("tls-ca and tls-server-name need tls=true")
		}
		return nil, nil
	}
	tc := mc.TLS.Clone()
	tc.MinVersion = tls.VersionTLS12
	tc.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	if hasName {
		tc.ServerName = name
	}
	if hasCA {
		if tc.InsecureSkipVerify {
			return nil, fmt.Errorf("tls-ca needs tls=true, not tls=%s", mc.TLSConfig)
		}
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("tls-ca: %w", err)
		}
		// Only the CA given: with the system's roots too, any certificate a
		// public CA issued for the host's name would pass.
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca %s: no PEM certificate in it", ca)
		}
		tc.RootCAs = roots
	}
	if !tc.InsecureSkipVerify && tc.ServerName == "" {
		return nil, fmt.Errorf("tls=true over %s %s: set tls-server-name to the name to verify", mc.Net, mc.Addr)
	}
	mc.TLS = tc
	return tc, nil
}

// driver is the MySQL protocol as the pool uses it (sqlpool.Driver).
type driver struct {
	cfg            *gosql.Config
	tls            *tls.Config // nil: no TLS
	tlsPreferred   bool        // tls=preferred: plain when the server offers no TLS
	connectTimeout time.Duration
	stmtCacheSize  int
	collation      byte
	setupSQL       string
	pooled         map[string]bool
	pool           *sqlpool.Pool

	sideMu     sync.Mutex
	sideClosed bool    // Close ran: no side connection opens again
	side       *sql.DB // for KILL: opened on first use, one connection at most
}

func (d *driver) loop() *evloop.Loop { return d.pool.Loop() }

// Name implements sqlpool.Driver.
func (d *driver) Name() string { return "mysql" }

// Dial implements sqlpool.Driver.
func (d *driver) Dial(ctx context.Context) (sqlpool.ServerConn, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return nil, d.classify(err)
	}
	return c, nil
}

// setup turns session tracking on (with the DSN's collation and variables)
// and reads the pooled variables' baseline.
func (c *conn) setup(b *blockingConn) error {
	if _, err := b.queryBlocking(c.drv.setupSQL); err != nil {
		return fmt.Errorf("set up session: %w", err)
	}
	// The baseline of the pooled variables this server has (SHOW works on
	// MySQL and MariaDB alike, and skips the variables the server lacks).
	rows, err := b.queryBlocking("SHOW SESSION VARIABLES WHERE Variable_name IN ('" + strings.Join(pooledVariables, "', '") + "')")
	if err != nil {
		return fmt.Errorf("read session variables: %w", err)
	}
	c.baseline = make(map[string]string, len(rows))
	for _, row := range rows {
		if len(row) == 2 && row[0] != nil {
			c.baseline[strings.ToLower(string(row[0]))] = string(row[1])
		}
	}
	return nil
}

// Cancel implements sqlpool.Driver: KILL QUERY on the side connection.
func (d *driver) Cancel(ctx context.Context, sc sqlpool.ServerConn) error {
	return d.kill(ctx, "KILL QUERY", uint64(sc.(*conn).threadID))
}

// Terminate implements sqlpool.Driver: KILL CONNECTION on the side
// connection, then wait until the server no longer lists the session.
func (d *driver) Terminate(ctx context.Context, sc sqlpool.ServerConn) error {
	id := uint64(sc.(*conn).threadID)
	if err := d.kill(ctx, "KILL CONNECTION", id); err != nil {
		return err
	}
	for {
		var n int
		err := d.onSide(ctx, func(side *sql.Conn) error {
			return side.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %d still listed: %w", id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sideKillTimeout bounds one KILL on the side connection, for a server that
// does not answer at all: MariaDB bounds a KILL by itself, giving up waking
// its victim after about 2 s.
const sideKillTimeout = 10 * time.Second

// kill runs verb (KILL QUERY, KILL CONNECTION) for session id on the side
// connection.
func (d *driver) kill(ctx context.Context, verb string, id uint64) error {
	return d.onSide(ctx, func(side *sql.Conn) error {
		_, err := side.ExecContext(context.Background(), verb+" "+strconv.FormatUint(id, 10))
		if isUnknownThread(err) {
			return nil
		}
		return err
	})
}

// onSide runs f on the side connection. ctx bounds the wait for it, not
// what f sends, which f must send uncancelled (the side connection's read
// timeout bounds it): go-sql-driver closes a connection whose context ends
// in the middle of a command, and the server would go on listing that side
// session, still running its KILL, beside the new one the next cancel opens:
// one session beyond the documented bound. A KILL can take seconds: MariaDB
// retries waking a victim in SLEEP() for up to 2 s when other sessions sleep
// too (measured: 16 concurrent SLEEPs, some KILL QUERYs took 2.0 s).
func (d *driver) onSide(ctx context.Context, f func(*sql.Conn) error) error {
	db, err := d.sideDB()
	if err != nil {
		return err
	}
	side, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("side connection: %w", err)
	}
	defer side.Close()
	return f(side)
}

// errSideClosed: the backend is closed, and its side connection with it.
var errSideClosed = errors.New("mysql: backend closed: no side connection")

// ErrSchemaChanged is wrapped by the tx_aborted error of a statement in a
// transaction that the server refused with ER_NEED_REPREPARE: a schema
// change came between its prepare and its execute. It did not run.
var ErrSchemaChanged = errors.New("schema changed under a prepared statement")

func isUnknownThread(err error) bool {
	var me *gosql.MySQLError
	return errors.As(err, &me) && me.Number == 1094
}

// sideDB returns the side connection for KILL, opening it on first use. It
// is the one connection a MySQL backend holds beyond max_conns, and only
// while cancels happen: it closes after 30 s idle.
func (d *driver) sideDB() (*sql.DB, error) {
	d.sideMu.Lock()
	defer d.sideMu.Unlock()
	if d.side != nil {
		return d.side, nil
	}
	if d.sideClosed {
		return nil, errSideClosed
	}
	mc := d.cfg.Clone()
	mc.Timeout = d.connectTimeout
	mc.ReadTimeout, mc.WriteTimeout = sideKillTimeout, sideKillTimeout
	mc.Params = nil
	connector, err := gosql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(30 * time.Second)
	d.side = db
	return db, nil
}

// Close implements sqlpool.Driver.
func (d *driver) Close() error {
	d.sideMu.Lock()
	defer d.sideMu.Unlock()
	d.sideClosed = true
	if d.side != nil {
		err := d.side.Close()
		d.side = nil
		return err
	}
	return nil
}

// serverError is an ERR packet.
type serverError struct {
	Code    uint16
	State   string
	Message string
}

func (e *serverError) Error() string {
	return fmt.Sprintf("Error %d (%s): %s", e.Code, e.State, e.Message)
}

func parseErr(p []byte) error {
	if len(p) < 3 {
		return &serverError{Message: "malformed error packet"}
	}
	e := &serverError{Code: binary.LittleEndian.Uint16(p[1:])}
	msg := p[3:]
	if len(msg) >= 6 && msg[0] == '#' {
		e.State, msg = string(msg[1:6]), msg[6:]
	}
	e.Message = string(msg)
	return e
}

// classify maps an error to the typed error sent to the client: the backend
// code is MySQL's error number.
func (d *driver) classify(err error) error {
	if err == nil {
		return nil
	}
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	var se *serverError
	if errors.As(err, &se) {
		code := strconv.Itoa(int(se.Code))
		switch se.Code {
		case 1213, 1205: // deadlock, lock wait timeout: the transaction may be retried
			return &tether.Error{Code: tether.CodeBackendError, Message: se.Message, BackendCode: code, Retry: true, Err: err}
		case 1040, 1203, 1045, 1044, 1927, 2002, 2003, 2006, 2013: // too many connections, access denied, killed, gone away
			return &tether.Error{Code: tether.CodeUnavailable, Message: "mysql: " + se.Message, BackendCode: code, Err: err}
		case 1210, 1064:
			if strings.Contains(se.Message, "arguments") {
				return &tether.Error{Code: tether.CodeBadRequest, Message: se.Message, BackendCode: code, Err: err}
			}
		}
		return &tether.Error{Code: tether.CodeBackendError, Message: se.Message, BackendCode: code, Err: err}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		// A failed dial is safe to retry; a connection lost mid-statement is not.
		dial := oe != nil && oe.Op == "dial"
		return &tether.Error{Code: tether.CodeUnavailable, Message: "mysql: " + err.Error(), Retry: dial, Err: tether.ErrUnavailable}
	}
	if e := sqldb.ClassifyIOError("mysql", err); e != nil {
		return e
	}
	return &tether.Error{Code: tether.CodeUnavailable, Message: "mysql: " + err.Error(), Err: err}
}

// keySQL is the SQL the key API needs. A table name may be qualified with its
// database ("db.table"); an unqualified one is in the connection's database.
func keySQL() sqldb.KeySQL {
	q := sqldb.QuoteWith("`")
	return sqldb.KeySQL{
		Quote:       q,
		Placeholder: func(int) string { return "?" },
		Columns: func(table string) (string, []any) {
			// The third column is the table's name as the catalog has it,
			// quoted: information_schema compares names without case.
			const q = "SELECT c.COLUMN_NAME, COALESCE(k.ORDINAL_POSITION, 0), " +
				"CONCAT('`', REPLACE(c.TABLE_SCHEMA, '`', '``'), '`.`', REPLACE(c.TABLE_NAME, '`', '``'), '`') " +
				"FROM information_schema.COLUMNS c " +
				"LEFT JOIN information_schema.KEY_COLUMN_USAGE k " +
				"ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME " +
				"AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY' " +
				"WHERE c.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND c.TABLE_NAME = ? " +
				"ORDER BY c.ORDINAL_POSITION"
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

var (
	_ tether.Backend    = (*Backend)(nil)
	_ tether.Querier    = (*Backend)(nil)
	_ tether.Transactor = (*Backend)(nil)
	_ tether.KeyValue   = (*Backend)(nil)
	_ sqlpool.Driver    = (*driver)(nil)
)
