package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"sync/atomic"

	"github.com/tether-php/tether/internal/fault"
)

// A panic in a database/sql driver cannot be recovered above database/sql:
// by then database/sql has unwound without releasing what the call held (the
// connection stays counted in use, a Conn's or Tx's close lock stays held),
// so every such panic would use up a slot of the pool for good, and closing
// the Conn or rolling back the Tx would deadlock. Hence the guard sits below
// database/sql, around the driver: each driver call that panics returns a
// *DriverPanic error instead and marks its connection bad, so that
// database/sql releases everything as after any error and then discards the
// connection (driver.Validator) rather than reuse it. DB and Tx turn a
// DriverPanic back into a panic once database/sql has returned (see
// DB.wrap), for the server to answer internal and log it, as any panic.

// DriverPanic is a panic recovered in a driver call: Value is what was
// passed to panic, Stack the panicking goroutine's stack.
type DriverPanic struct {
	Value any
	Stack []byte
}

func (p *DriverPanic) Error() string {
	return fmt.Sprintf("database driver panicked: %v\n%s", p.Value, p.Stack)
}

// ErrConnPanicked is returned by every call on a connection after a driver
// call on it panicked, until database/sql discards it.
var ErrConnPanicked = errors.New("connection discarded after a driver panic")

// Open returns a pool (database/sql) over drv and dsn whose driver calls are
// guarded against panics (see DriverPanic). It connects nothing.
func Open(drv driver.Driver, dsn string) (*sql.DB, error) {
	var inner driver.Connector = dsnConnector{drv, dsn}
	if dc, ok := drv.(driver.DriverContext); ok {
		c, err := dc.OpenConnector(dsn)
		if err != nil {
			return nil, err
		}
		inner = c
	}
	return sql.OpenDB(guardConnector{inner}), nil
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type guardConnector struct{ c driver.Connector }

func (g guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	ci, err := g.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &guardConn{ci: ci}, nil
}

func (g guardConnector) Driver() driver.Driver { return g.c.Driver() }

// guardConn is a driver connection whose calls are guarded.
type guardConn struct {
	ci  driver.Conn
	bad atomic.Bool // a call panicked: the connection's state is unknown
}

// recover, deferred by a guarded call with the address of its error, turns a
// panic into a *DriverPanic and marks the connection bad.
func (c *guardConn) recover(err *error) {
	if v := recover(); v != nil {
		c.bad.Store(true)
		*err = &DriverPanic{Value: v, Stack: debug.Stack()}
	}
}

func (c *guardConn) check() error {
	if c.bad.Load() {
		return ErrConnPanicked
	}
	return nil
}

func inject(query string) {
	if fault.Enabled() {
		fault.Inject(fault.DriverCall, query)
	}
}

func (c *guardConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *guardConn) PrepareContext(ctx context.Context, query string) (_ driver.Stmt, err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	defer c.recover(&err)
	var si driver.Stmt
	if pc, ok := c.ci.(driver.ConnPrepareContext); ok {
		si, err = pc.PrepareContext(ctx, query)
	} else {
		si, err = c.ci.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &guardStmt{c: c, si: si, query: query}, nil
}

func (c *guardConn) Close() (err error) {
	defer c.recover(&err)
	return c.ci.Close()
}

func (c *guardConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *guardConn) BeginTx(ctx context.Context, opts driver.TxOptions) (_ driver.Tx, err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	defer c.recover(&err)
	var ti driver.Tx
	if bc, ok := c.ci.(driver.ConnBeginTx); ok {
		ti, err = bc.BeginTx(ctx, opts)
	} else {
		ti, err = c.ci.Begin() //nolint:staticcheck // the driver has nothing newer
	}
	if err != nil {
		return nil, err
	}
	return &guardTx{c: c, ti: ti}, nil
}

func (c *guardConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (_ driver.Result, err error) {
	ec, ok := c.ci.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip // database/sql prepares it instead
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	defer c.recover(&err)
	inject(query)
	return ec.ExecContext(ctx, query, args)
}

func (c *guardConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (_ driver.Rows, err error) {
	qc, ok := c.ci.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	defer c.recover(&err)
	inject(query)
	ri, err := qc.QueryContext(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return &guardRows{c: c, ri: ri}, nil
}

func (c *guardConn) Ping(ctx context.Context) (err error) {
	if err := c.check(); err != nil {
		return driver.ErrBadConn
	}
	defer c.recover(&err)
	if p, ok := c.ci.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *guardConn) ResetSession(ctx context.Context) (err error) {
	if c.bad.Load() {
		return driver.ErrBadConn
	}
	defer c.recover(&err)
	if r, ok := c.ci.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements driver.Validator: database/sql asks it as it takes a
// connection back, and closes the connection on false.
func (c *guardConn) IsValid() bool {
	if c.bad.Load() {
		return false
	}
	if v, ok := c.ci.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *guardConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.ci.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type guardTx struct {
	c  *guardConn
	ti driver.Tx
}

func (t *guardTx) Commit() (err error) {
	if err := t.c.check(); err != nil {
		return err
	}
	defer t.c.recover(&err)
	return t.ti.Commit()
}

func (t *guardTx) Rollback() (err error) {
	if err := t.c.check(); err != nil {
		return err
	}
	defer t.c.recover(&err)
	return t.ti.Rollback()
}

type guardStmt struct {
	c     *guardConn
	si    driver.Stmt
	query string
}

func (s *guardStmt) Close() (err error) {
	defer s.c.recover(&err)
	return s.si.Close()
}

func (s *guardStmt) NumInput() int { return s.si.NumInput() }

func (s *guardStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *guardStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *guardStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (_ driver.Result, err error) {
	if err := s.c.check(); err != nil {
		return nil, err
	}
	defer s.c.recover(&err)
	inject(s.query)
	if ec, ok := s.si.(driver.StmtExecContext); ok {
		return ec.ExecContext(ctx, args)
	}
	vs, err := values(args)
	if err != nil {
		return nil, err
	}
	return s.si.Exec(vs) //nolint:staticcheck // the driver has nothing newer
}

func (s *guardStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (_ driver.Rows, err error) {
	if err := s.c.check(); err != nil {
		return nil, err
	}
	defer s.c.recover(&err)
	inject(s.query)
	var ri driver.Rows
	if qc, ok := s.si.(driver.StmtQueryContext); ok {
		ri, err = qc.QueryContext(ctx, args)
	} else {
		var vs []driver.Value
		if vs, err = values(args); err == nil {
			ri, err = s.si.Query(vs) //nolint:staticcheck // the driver has nothing newer
		}
	}
	if err != nil {
		return nil, err
	}
	return &guardRows{c: s.c, ri: ri}, nil
}

func (s *guardStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.si.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv) // database/sql asks the connection only when the statement has no checker
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vs := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, fmt.Errorf("driver does not support named parameter %s", a.Name)
		}
		vs[i] = a.Value
	}
	return vs, nil
}

// guardRows guards a result's calls; the optional column type interfaces
// answer what database/sql answers for a driver without them.
type guardRows struct {
	c  *guardConn
	ri driver.Rows
}

func (r *guardRows) Columns() []string { return r.ri.Columns() }

func (r *guardRows) Close() (err error) {
	defer r.c.recover(&err)
	return r.ri.Close()
}

func (r *guardRows) Next(dest []driver.Value) (err error) {
	defer r.c.recover(&err)
	return r.ri.Next(dest)
}

func (r *guardRows) HasNextResultSet() bool {
	if n, ok := r.ri.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *guardRows) NextResultSet() (err error) {
	n, ok := r.ri.(driver.RowsNextResultSet)
	if !ok {
		return io.EOF
	}
	defer r.c.recover(&err)
	return n.NextResultSet()
}

func (r *guardRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.ri.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *guardRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.ri.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *guardRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.ri.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *guardRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.ri.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *guardRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.ri.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

var (
	_ driver.Connector          = guardConnector{}
	_ driver.ConnPrepareContext = (*guardConn)(nil)
	_ driver.ConnBeginTx        = (*guardConn)(nil)
	_ driver.ExecerContext      = (*guardConn)(nil)
	_ driver.QueryerContext     = (*guardConn)(nil)
	_ driver.Pinger             = (*guardConn)(nil)
	_ driver.SessionResetter    = (*guardConn)(nil)
	_ driver.Validator          = (*guardConn)(nil)
	_ driver.NamedValueChecker  = (*guardConn)(nil)
	_ driver.StmtExecContext    = (*guardStmt)(nil)
	_ driver.StmtQueryContext   = (*guardStmt)(nil)
	_ driver.NamedValueChecker  = (*guardStmt)(nil)
	_ driver.RowsNextResultSet  = (*guardRows)(nil)
)
