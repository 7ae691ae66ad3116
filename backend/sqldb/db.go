package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/semaphore"

	tether "github.com/tether-php/tether"
)

// DB is a SQL backend on database/sql. It implements tether.Backend.
//
// Pool: database/sql keeps the connections (MaxOpenConns = max_conns, idle ones
// closed after idle_timeout, broken ones discarded and redialled). In front of
// it a semaphore of max_conns slots bounds the wait for a connection: a
// statement or transaction that gets no slot within acquire_timeout fails with
// busy, so database/sql itself never queues.
//
// Statements are prepared once per backend connection and reused by every
// client: the cache maps SQL text to a *sql.Stmt, which database/sql prepares
// lazily on each connection it runs on and keeps there.
type DB struct {
	dialect Dialect
	cfg     tether.BackendConfig
	open    Opener

	db    *sql.DB
	slots *semaphore.Weighted
	stmts *lru.Cache[string, *sql.Stmt] // never holds a statement that ChangesSession
	mu    sync.Mutex                    // serialises the first preparation of a statement
	*KeyValue

	stop chan struct{}
	done chan struct{}
}

// New returns a DB for the dialect; open is called by Open.
func New(d Dialect, cfg tether.BackendConfig, open Opener) *DB {
	db := &DB{dialect: d, cfg: cfg, open: open}
	db.KeyValue = NewKeyValue(d.Name(), d.KeySQL(), db)
	return db
}

// Open implements tether.Backend: it opens the pool and connects min_conns
// connections (at least one, to verify the backend can be reached).
func (d *DB) Open(ctx context.Context) error {
	db, err := d.open()
	if err != nil {
		return fmt.Errorf("open %s: %w", d.dialect.Name(), err)
	}
	db.SetMaxOpenConns(d.cfg.MaxConns)
	db.SetMaxIdleConns(d.cfg.MaxConns)
	db.SetConnMaxIdleTime(time.Duration(d.cfg.IdleTimeout))
	d.db = db
	d.slots = semaphore.NewWeighted(int64(d.cfg.MaxConns))
	d.stmts, _ = lru.NewWithEvict(d.cfg.StmtCacheSize, func(_ string, st *sql.Stmt) {
		// Close waits for the statement's in-flight users; do not block the
		// request that evicted it.
		go st.Close()
	})
	cctx, cancel := context.WithTimeout(ctx, time.Duration(d.cfg.ConnectTimeout))
	defer cancel()
	if err := d.warm(cctx, max(d.cfg.MinConns, 1)); err != nil {
		db.Close()
		return unavailable(d.dialect.Name(), err)
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.keepMinConns()
	return nil
}

// unavailable wraps a failure to connect as an unavailable error, keeping the
// backend's code when it gave one (bad credentials, too many connections).
func unavailable(name string, err error) error {
	e := &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: err, Message: fmt.Sprintf("connect %s: %v", name, err)}
	var te *tether.Error
	if errors.As(err, &te) {
		e.BackendCode = te.BackendCode
	}
	return e
}

// warm makes sure at least n connections are open, dialling them in parallel.
func (d *DB) warm(ctx context.Context, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := d.db.Conn(ctx)
		if err == nil {
			err = c.PingContext(ctx)
		}
		if err != nil {
			if c != nil {
				c.Close()
			}
			return d.wrap(err)
		}
		conns = append(conns, c)
	}
	return nil
}

// keepMinConns tops the pool back up to min_conns after idle connections were
// closed, so the first request after a quiet spell does not pay a connect.
func (d *DB) keepMinConns() {
	defer close(d.done)
	if d.cfg.MinConns == 0 {
		<-d.stop
		return
	}
	period := max(time.Duration(d.cfg.IdleTimeout)/2, time.Second)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if open := d.db.Stats().OpenConnections; open < d.cfg.MinConns {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(d.cfg.ConnectTimeout))
				d.warm(ctx, d.cfg.MinConns)
				cancel()
			}
		}
	}
}

// Close implements tether.Backend.
func (d *DB) Close(ctx context.Context) error {
	if d.db == nil {
		return nil
	}
	if d.stop != nil {
		close(d.stop)
		<-d.done
	}
	// Wait, within ctx, for borrowed connections: take every slot.
	if err := d.slots.Acquire(ctx, int64(d.cfg.MaxConns)); err == nil {
		defer d.slots.Release(int64(d.cfg.MaxConns))
	}
	d.stmts.Purge()
	return d.db.Close()
}

// Stats implements tether.Backend.
func (d *DB) Stats() tether.PoolStats {
	s := d.db.Stats()
	return tether.PoolStats{Open: s.OpenConnections, InUse: s.InUse, Idle: s.Idle, Waiting: s.WaitCount}
}

// DB returns the underlying pool, for tests and the backend's own use.
func (d *DB) DB() *sql.DB { return d.db }

// acquire takes a pool slot, waiting at most acquire_timeout (and never past
// ctx). It returns an error wrapping tether.ErrBusy when none came free.
func (d *DB) acquire(ctx context.Context) error {
	if d.slots.TryAcquire(1) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(d.cfg.AcquireTimeout))
	defer cancel()
	if err := d.slots.Acquire(wctx, 1); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &tether.Error{Code: tether.CodeBusy, Retry: true, Err: tether.ErrBusy,
			Message: fmt.Sprintf("%s: all %d connections busy for %s (acquire_timeout)", d.dialect.Name(), d.cfg.MaxConns, d.cfg.AcquireTimeout)}
	}
	return nil
}

func (d *DB) release() { d.slots.Release(1) }

// stmt returns the cached prepared statement for query, preparing it once.
func (d *DB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := d.stmts.Get(query); ok {
		return st, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, ok := d.stmts.Get(query); ok {
		return st, nil
	}
	st, err := d.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	d.stmts.Add(query, st)
	return st, nil
}

// Query implements tether.Backend.
func (d *DB) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	return d.run(ctx, s, false)
}

// Exec implements tether.Backend.
func (d *DB) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	return d.run(ctx, s, true)
}

func (d *DB) run(ctx context.Context, s tether.Statement, exec bool) (*tether.Result, error) {
	if e := tether.RefusePaging(d.dialect.Name(), s.PageSize, s.Cursor); e != nil {
		return nil, e
	}
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	defer d.release()
	// A cached statement is known to leave session state alone; only a new
	// one is looked at (the lexing and case folding cost each request).
	st, cached := d.stmts.Get(s.SQL)
	if !cached {
		if d.dialect.ChangesSession(s.SQL) {
			return d.runIsolated(ctx, s, exec)
		}
		var err error
		if st, err = d.stmt(ctx, s.SQL); err != nil {
			return nil, d.wrap(err)
		}
	}
	res, err := d.runStmt(ctx, st, s, exec)
	return res, d.wrap(err)
}

// runIsolated runs a statement that changes session state on a connection of
// its own, which is then closed rather than returned to the pool.
func (d *DB) runIsolated(ctx context.Context, s tether.Statement, exec bool) (*tether.Result, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer discard(c)
	st, err := c.PrepareContext(ctx, s.SQL)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer st.Close()
	res, err := d.runStmt(ctx, st, s, exec)
	return res, d.wrap(err)
}

// discard closes c's underlying connection instead of returning it to the pool.
func discard(c *sql.Conn) {
	c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
}

func (d *DB) runStmt(ctx context.Context, st *sql.Stmt, s tether.Statement, exec bool) (*tether.Result, error) {
	if pb, ok := d.dialect.(ParamBinder); ok {
		s.Params = pb.BindParams(s.Params)
	}
	if exec {
		r, err := st.ExecContext(ctx, s.Params...)
		if err != nil {
			return nil, err
		}
		res := &tether.Result{}
		res.Affected, _ = r.RowsAffected()
		res.InsertID, _ = r.LastInsertId() // PostgreSQL has none: 0
		return res, nil
	}
	rows, err := st.QueryContext(ctx, s.Params...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return d.readRows(rows, s.MaxBytes)
}

// ErrResultTooLarge is returned when a result passes Statement.MaxBytes.
var ErrResultTooLarge = errors.New("result too large")

func (d *DB) readRows(rows *sql.Rows, maxBytes int) (*tether.Result, error) {
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &tether.Result{Columns: make([]string, len(types)), Rows: [][]any{}}
	cells := make([]cell, len(types))
	ptrs := make([]any, len(types))
	for i, t := range types {
		res.Columns[i] = t.Name()
		cells[i] = cell{dialect: d.dialect, dbType: t.DatabaseTypeName()}
		ptrs[i] = &cells[i]
	}
	size := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(cells))
		for i := range cells {
			row[i] = cells[i].v
			size += tether.ValueSize(row[i])
			cells[i].v = nil
		}
		if maxBytes > 0 && size > maxBytes {
			return nil, &tether.Error{Code: tether.CodeTooLarge, Err: ErrResultTooLarge,
				Message: fmt.Sprintf("result is over max_result_bytes (%d) after %d rows", maxBytes, len(res.Rows))}
		}
		res.Rows = append(res.Rows, row)
	}
	return res, rows.Err()
}

// cell scans one column straight into its protocol value. database/sql hands
// a Scanner the driver's own value (text as a []byte in the driver's buffer),
// which Convert copies once into its final form. Scanning into an *any
// instead would clone the bytes and Convert copy them again: two allocations
// per text value where one does, on the path that reads every row.
type cell struct {
	dialect Dialect
	dbType  string
	v       any
}

// Scan implements sql.Scanner.
func (c *cell) Scan(src any) error {
	c.v = c.dialect.Convert(c.dbType, src)
	return nil
}

// Begin implements tether.Backend: it takes a slot and a connection of its own
// for the transaction; both are held until Commit or Rollback.
func (d *DB) Begin(ctx context.Context) (tether.Tx, error) {
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	c, err := d.db.Conn(ctx)
	if err != nil {
		d.release()
		return nil, d.wrap(err)
	}
	// The transaction outlives this request: it must not be canceled with it.
	tx, err := c.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		discard(c)
		d.release()
		return nil, d.wrap(err)
	}
	return &Tx{db: d, conn: c, tx: tx}, nil
}

// wrap classifies a driver error for the wire. A DriverPanic is panicked
// again, now that database/sql has let go of its connection (discarded, not
// reused), for the caller's recover to answer internal and, in a
// transaction, give it up (Tx.Discard).
func (d *DB) wrap(err error) error {
	if err == nil {
		return nil
	}
	var dp *DriverPanic
	if errors.As(err, &dp) {
		panic(dp)
	}
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%s: %w", d.dialect.Name(), tether.ErrTxDone)
	}
	if e := d.dialect.ClassifyError(err); e != nil {
		if e.Err == nil {
			e.Err = err
		}
		return e
	}
	msg := err.Error()
	// database/sql checks the parameter count itself, before the driver.
	if strings.HasPrefix(msg, "sql: expected ") && strings.Contains(msg, " arguments, got ") {
		return &tether.Error{Code: tether.CodeBadRequest, Message: strings.TrimPrefix(msg, "sql: "), Err: err}
	}
	if errors.Is(err, driver.ErrBadConn) {
		return &tether.Error{Code: tether.CodeUnavailable, Message: d.dialect.Name() + ": connection lost", Err: err}
	}
	return &tether.Error{Code: tether.CodeBackendError, Message: msg, Err: err}
}

var (
	_ tether.Backend    = (*DB)(nil)
	_ tether.Querier    = (*DB)(nil)
	_ tether.Transactor = (*DB)(nil)
)
