// Package postgres is the PostgreSQL backend. Its server connections are
// dialled and authenticated by pgx's pgconn (SCRAM, MD5, every method pgx
// knows), then taken over (pgconn's Hijack) and driven by tetherd's event loop
// in the extended protocol (conn.go): a statement goes from a client's frame
// to the server's socket and back without a goroutine hand-off. Messages are
// encoded and decoded with pgx's pgproto3, except on the per-statement path
// (Bind, DataRow), written here to go from the frame to the reply without a
// value per cell. The pool (backend/sqlpool) keeps the connections; the
// server's own reports decide when one must be reset (session.go).
package postgres

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlconn"
	"github.com/tether-php/tether/backend/sqldb"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
)

// Backend is a PostgreSQL server behind a pool of loop-driven connections.
// It implements tether.Backend, Querier, Transactor, KeyValue and the loop
// API of sqlpool.
type Backend struct {
	*sqlpool.Pool
	*sqldb.KeyValue
	d *driver
}

// New returns a backend for cfg.DSN, a libpq connection string
// ("host=/var/run/postgresql dbname=app user=app") or URL, parsed by pgx. The
// connect timeout comes from connect_timeout. TLS is libpq's: sslmode
// (disable, allow, prefer, require, verify-ca, verify-full), sslrootcert,
// sslcert, sslkey, sslpassword, sslsni; the loop-driven connections run it
// in user space (sqlconn.Socket), the side connections in pgx. It connects
// nothing.
func New(cfg tether.BackendConfig) (*Backend, error) {
	pc, err := pgconn.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: dsn: %w", err)
	}
	pc.ConnectTimeout = time.Duration(cfg.ConnectTimeout)
	sessions := tls.NewLRUClientSessionCache(0)
	withTLSDefaults(pc, sessions)
	side, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: dsn: %w", err)
	}
	side.ConnectTimeout = pc.ConnectTimeout
	withTLSDefaults(&side.Config, sessions)
	// The pool's connections are dialled through a Socket when they may
	// use TLS, so that a TLS session pgconn starts over it can go on over
	// the loop's fd (Dial).
	loopCfg := pc
	if mayUseTLS(pc) {
		loopCfg = pc.Copy()
		dial := pc.DialFunc
		loopCfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return sqlconn.NewSocket(nc), nil
		}
	}
	d := &driver{cfg: pc, loopCfg: loopCfg, sideCfg: side, stmtCacheSize: cfg.StmtCacheSize, pooled: map[string]bool{}}
	for _, v := range pooledVariables {
		d.pooled[v] = true
	}
	p := sqlpool.New(d, cfg)
	d.pool = p
	b := &Backend{Pool: p, d: d}
	b.KeyValue = sqldb.NewKeyValue("postgres", keySQL(), p)
	return b, nil
}

// mayUseTLS reports whether pc may connect with TLS (sslmode other than
// disable).
func mayUseTLS(pc *pgconn.Config) bool {
	if pc.TLSConfig != nil {
		return true
	}
	for _, f := range pc.Fallbacks {
		if f.TLSConfig != nil {
			return true
		}
	}
	return false
}

// withTLSDefaults sets, on each TLS config pc may connect with, TLS 1.2 at
// least and the backend's session cache, so that a reconnect resumes a TLS
// session (fewer round trips, no certificate check).
func withTLSDefaults(pc *pgconn.Config, sessions tls.ClientSessionCache) {
	set := func(tc *tls.Config) {
		if tc != nil {
			tc.MinVersion = max(tc.MinVersion, tls.VersionTLS12)
			tc.ClientSessionCache = sessions
		}
	}
	set(pc.TLSConfig)
	for _, f := range pc.Fallbacks {
		set(f.TLSConfig)
	}
}

// driver is the PostgreSQL protocol as the pool uses it (sqlpool.Driver).
type driver struct {
	cfg           *pgconn.Config  // as parsed: the change stream's
	loopCfg       *pgconn.Config  // the pool's: dials through a sqlconn.Socket
	sideCfg       *pgx.ConnConfig // the side connection's (pgx wants its own parse)
	stmtCacheSize int
	pooled        map[string]bool
	pool          *sqlpool.Pool
	schema        schemaGens // loop goroutine only

	sideMu     sync.Mutex
	sideClosed bool      // Close ran: no side connection opens again
	side       *pgx.Conn // for pg_terminate_backend: opened on first use
}

func (d *driver) loop() *evloop.Loop { return d.pool.Loop() }

// Name implements sqlpool.Driver.
func (d *driver) Name() string { return "postgres" }

// Dial implements sqlpool.Driver: pgconn connects and authenticates, then
// hands its socket over.
func (d *driver) Dial(ctx context.Context) (sqlpool.ServerConn, error) {
	pc, err := pgconn.ConnectConfig(ctx, d.loopCfg)
	if err != nil {
		return nil, d.classify(err)
	}
	// pgconn starts a background reader when a write of the startup is slow
	// (a loaded host): still blocked in a read of the socket, it would take
	// what the loop should read, or fail the shared tls.Conn for good ("use
	// of closed network connection", seen under CI load). SyncConn waits for
	// it to stop and drains what it read, as pgconn asks before a Hijack.
	if err := pc.SyncConn(ctx); err != nil {
		pc.Close(ctx)
		return nil, d.classify(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		pc.Close(ctx)
		return nil, d.classify(err)
	}
	c := &conn{drv: d, pid: hj.PID, secret: hj.SecretKey, addr: hj.Conn.RemoteAddr(), tlsCfg: hj.TLSConfig}
	switch nc := hj.Conn.(type) {
	case *tls.Conn:
		if err := c.AdoptTLS(nc); err != nil {
			nc.NetConn().Close()
			return nil, d.classify(err)
		}
		return c, nil
	case *sqlconn.Socket:
		hj.Conn = nc.NetConn() // no TLS (sslmode disable, or prefer to a server without)
	}
	defer hj.Conn.Close() // the loop works on a duplicate
	fd, err := evloop.TakeFd(hj.Conn)
	if err != nil {
		return nil, err
	}
	c.Adopt(fd)
	return c, nil
}

// reportParameter records a ParameterStatus on the request that caused it.
func (d *driver) reportParameter(r *sqlpool.Request, name, value string) {
	lname := strings.ToLower(name)
	if d.pooled[lname] {
		if r.Report == nil {
			r.Report = &sqlpool.Report{}
		}
		r.Report.Settings = append(r.Report.Settings, sqlpool.Setting{Name: lname, Value: value})
		return
	}
	switch lname {
	case "in_hot_standby", "server_version", "server_encoding", "integer_datetimes":
		return // the server's, not the session's
	}
	r.AddUnpooled("session variable " + name + " (not pooled)")
}

// Cancel implements sqlpool.Driver: a CancelRequest on a connection of its
// own, to the address the session's connection went to, over TLS if the
// session is (its secret key is not sent in clear); it returns when the
// server closed it, after signalling the session.
func (d *driver) Cancel(ctx context.Context, sc sqlpool.ServerConn) error {
	c := sc.(*conn)
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, c.addr.Network(), c.addr.String())
	if err != nil {
		return fmt.Errorf("dial for cancel: %w", err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	if c.tlsCfg != nil {
		if nc, err = startTLS(ctx, nc, c.tlsCfg); err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(12+len(c.secret)))
	msg = binary.BigEndian.AppendUint32(msg, 80877102)
	msg = binary.BigEndian.AppendUint32(msg, c.pid)
	msg = append(msg, c.secret...)
	if _, err := nc.Write(msg); err != nil {
		return fmt.Errorf("send cancel: %w", err)
	}
	if _, err := io.Copy(io.Discard, nc); err != nil {
		return fmt.Errorf("wait for the cancel to be taken: %w", err)
	}
	return nil
}

// startTLS asks the server for TLS on nc (an SSLRequest) and runs the
// handshake with cfg.
func startTLS(ctx context.Context, nc net.Conn, cfg *tls.Config) (net.Conn, error) {
	if _, err := nc.Write([]byte{0, 0, 0, 8, 4, 210, 22, 47}); err != nil { // length 8, code 80877103
		return nil, fmt.Errorf("send ssl request: %w", err)
	}
	var resp [1]byte
	if _, err := io.ReadFull(nc, resp[:]); err != nil {
		return nil, fmt.Errorf("read ssl response: %w", err)
	}
	if resp[0] != 'S' {
		return nil, errors.New("the server refused TLS")
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

// Terminate implements sqlpool.Driver: pg_terminate_backend on the side
// connection, which waits until the session has ended.
func (d *driver) Terminate(ctx context.Context, sc sqlpool.ServerConn) error {
	c := sc.(*conn)
	d.sideMu.Lock()
	defer d.sideMu.Unlock()
	if d.sideClosed {
		return errors.New("postgres: backend closed: no side connection")
	}
	if d.side == nil || d.side.IsClosed() {
		side, err := pgx.ConnectConfig(ctx, d.sideCfg)
		if err != nil {
			return fmt.Errorf("open side connection: %w", err)
		}
		d.side = side
	}
	var gone bool
	if err := d.side.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1) OR pg_terminate_backend($1, 5000)", int64(c.pid)).Scan(&gone); err != nil {
		return err
	}
	if !gone {
		return fmt.Errorf("session %d did not end within 5 s", c.pid)
	}
	return nil
}

// Close implements sqlpool.Driver.
func (d *driver) Close() error {
	d.sideMu.Lock()
	defer d.sideMu.Unlock()
	d.sideClosed = true
	if d.side != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := d.side.Close(ctx)
		d.side = nil
		return err
	}
	return nil
}

// parseError decodes an ErrorResponse.
func parseError(body []byte) *pgconn.PgError {
	var er pgproto3.ErrorResponse
	if er.Decode(body) != nil {
		return &pgconn.PgError{Severity: "ERROR", Message: "malformed error message"}
	}
	return pgconn.ErrorResponseToPgError(&er)
}

// classify maps an error to the typed error sent to the client: the backend
// code is the SQLSTATE.
func (d *driver) classify(err error) error {
	if err == nil {
		return nil
	}
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization failure, deadlock
			return &tether.Error{Code: tether.CodeBackendError, Message: pe.Message, BackendCode: pe.Code, Retry: true, Err: err}
		case "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006", "28P01", "28000", "3D000":
			return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + pe.Message, BackendCode: pe.Code, Err: err}
		case "08P01", "42P18": // protocol violation (wrong parameter count), indeterminate parameter type
			return &tether.Error{Code: tether.CodeBadRequest, Message: pe.Message, BackendCode: pe.Code, Err: err}
		}
		return &tether.Error{Code: tether.CodeBackendError, Message: pe.Message, BackendCode: pe.Code, Err: err}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + ce.Error(), Retry: true, Err: tether.ErrUnavailable}
	}
	if e := sqldb.ClassifyIOError("postgres", err); e != nil {
		return e
	}
	return &tether.Error{Code: tether.CodeUnavailable, Message: "postgres: " + err.Error(), Err: err}
}

// keySQL is the SQL the key API needs. A table name may be schema-qualified;
// an unqualified one is looked up on the search_path.
func keySQL() sqldb.KeySQL {
	q := sqldb.QuoteWith(`"`)
	return sqldb.KeySQL{
		Quote:       q,
		Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		Columns: func(table string) (string, []any) {
			// indkey is an int2vector, whose subscripts start at 0: rebuild it
			// as an ordinary array to get 1-based key positions.
			return `SELECT a.attname::text, COALESCE(array_position(string_to_array(i.indkey::text, ' ')::int2[], a.attnum), 0),
				       a.attrelid::regclass::text
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

var (
	_ tether.Backend    = (*Backend)(nil)
	_ tether.Querier    = (*Backend)(nil)
	_ tether.Transactor = (*Backend)(nil)
	_ tether.KeyValue   = (*Backend)(nil)
	_ sqlpool.Driver    = (*driver)(nil)
)
