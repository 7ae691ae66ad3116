package sqldb

import (
	"context"
	"database/sql"
	"sync"

	tether "github.com/tether-php/tether"
)

// Tx is a transaction on a connection taken from the pool for it alone.
type Tx struct {
	db   *DB
	conn *sql.Conn
	tx   *sql.Tx

	once  sync.Once
	dirty bool // a statement may have changed session state
}

// Query implements tether.Tx.
func (t *Tx) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	return t.run(ctx, s, false)
}

// Exec implements tether.Tx.
func (t *Tx) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	return t.run(ctx, s, true)
}

func (t *Tx) run(ctx context.Context, s tether.Statement, exec bool) (*tether.Result, error) {
	// A cached statement is reused if it is already prepared on this
	// connection, and prepared there (for later reuse) if not. A statement not
	// in the cache is prepared on the transaction's own connection: preparing
	// it for the cache would need a second connection, which a full pool may
	// not have.
	var txst *sql.Stmt
	if st, ok := t.db.stmts.Get(s.SQL); ok {
		txst = t.tx.StmtContext(ctx, st)
	} else {
		// Only a statement not in the cache can change session state.
		if t.db.dialect.ChangesSession(s.SQL) {
			t.dirty = true
		}
		var err error
		if txst, err = t.tx.PrepareContext(ctx, s.SQL); err != nil {
			return nil, t.db.wrap(err)
		}
	}
	defer txst.Close()
	res, err := t.db.runStmt(ctx, txst, s, exec)
	return res, t.db.wrap(err)
}

// Commit implements tether.Tx.
func (t *Tx) Commit(ctx context.Context) error {
	err := t.tx.Commit()
	t.finish(err != nil)
	return t.db.wrap(err)
}

// Rollback implements tether.Tx.
func (t *Tx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback()
	t.finish(err != nil)
	return t.db.wrap(err)
}

// finish returns the connection: to the pool if it is clean, closed if its
// session state may have changed or its transaction did not end cleanly.
func (t *Tx) finish(failed bool) {
	t.once.Do(func() {
		if t.dirty || failed {
			discard(t.conn)
		} else {
			t.conn.Close()
		}
		t.db.release()
	})
}

// Discard implements tether.Discarder: the transaction is rolled back
// (database/sql lets its connection go only then) and the connection closed,
// not reused, whatever the rollback answered: a panic left it in an unknown
// state.
func (t *Tx) Discard() {
	t.once.Do(func() {
		t.tx.Rollback()
		discard(t.conn)
		t.db.release()
	})
}

var (
	_ tether.Tx        = (*Tx)(nil)
	_ tether.Discarder = (*Tx)(nil)
)
