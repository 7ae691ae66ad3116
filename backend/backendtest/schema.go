package backendtest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// SchemaSuite runs a migration under load against a SQL backend whose
// statements are prepared once per pooled connection: the schema of a table
// changes (ALTER TYPE, ADD COLUMN, DROP COLUMN, RENAME COLUMN, DROP and
// CREATE) while clients run statements on it, and every statement that
// starts after a change has committed must work and see the new schema.
type SchemaSuite struct {
	// New returns an unopened backend with the given pool settings.
	New    func(t *testing.T, cfg tether.BackendConfig) SQLBackend
	Config func(t *testing.T) tether.BackendConfig
	// Direct opens an independent connection to the same database, through
	// the driver's own library, not tetherd: another client, as a deploy's
	// migration would be.
	Direct      func(t *testing.T) *sql.DB
	Placeholder func(n int) string
	// AlterType changes column v of {table} from an integer to a text type.
	AlterType string
	// TextType is a text column type ("TEXT", "VARCHAR(64)").
	TextType string
	// TxSchemaError: a statement prepared before another client changed its
	// table fails inside a transaction with tx_aborted naming the schema
	// change (PostgreSQL: the transaction cannot go on), rather than
	// running against the new schema (MariaDB prepares it again itself).
	TxSchemaError bool
	// TransactionalDDL: DDL in a transaction is undone by its rollback
	// (PostgreSQL), rather than committing it (MySQL/MariaDB).
	TransactionalDDL bool
}

// schemaStep is one migration step and the schema after it.
type schemaStep struct {
	name  string
	ddl   []string
	cols  []string // what SELECT * returns after it
	vText bool     // column v holds text after it
}

func (s *SchemaSuite) steps() []schemaStep {
	rows := make([]string, 20)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d, %d, 'z%d')", i+1, i, i+1)
	}
	return []schemaStep{
		{name: "AlterType", ddl: []string{s.AlterType}, cols: []string{"id", "k", "v"}, vText: true},
		{name: "AddColumn", ddl: []string{"ALTER TABLE {table} ADD COLUMN w INT"}, cols: []string{"id", "k", "v", "w"}, vText: true},
		{name: "DropColumn", ddl: []string{"ALTER TABLE {table} DROP COLUMN v"}, cols: []string{"id", "k", "w"}},
		{name: "RenameColumn", ddl: []string{"ALTER TABLE {table} RENAME COLUMN w TO w2"}, cols: []string{"id", "k", "w2"}},
		{name: "DropAndCreate", ddl: []string{"DROP TABLE {table}", "CREATE TABLE {table} (id INT PRIMARY KEY, k INT, z " + s.TextType + ")",
			"INSERT INTO {table} (id, k, z) VALUES " + strings.Join(rows, ", ")}, cols: []string{"id", "k", "z"}},
	}
}

// createSchemaTable creates {table} (id, k, v INT) with 20 rows through db.
func createSchemaTable(t *testing.T, db *sql.DB, tbl string) {
	t.Helper()
	rows := make([]string, 20)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d, %d, %d)", i+1, i, 10*(i+1))
	}
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + tbl,
		"CREATE TABLE " + tbl + " (id INT PRIMARY KEY, k INT, v INT)",
		"INSERT INTO " + tbl + " (id, k, v) VALUES " + strings.Join(rows, ", "),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + tbl) })
}

// RunSchemaChanges runs the migration under load with the DDL sent by
// another client and through tetherd, then the transaction cases.
func RunSchemaChanges(t *testing.T, s *SchemaSuite) {
	direct := s.Direct(t)
	t.Cleanup(func() { direct.Close() })
	open := func(t *testing.T, conns int) SQLBackend {
		cfg := s.Config(t)
		cfg.MaxConns, cfg.MinConns = conns, conns
		b := s.New(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Open(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b.Close(ctx)
		})
		return b
	}
	p := s.Placeholder
	selStar := func(tbl string) string { return "SELECT * FROM " + tbl + " WHERE id = " + p(1) }

	for _, via := range []string{"FromAnotherClient", "ThroughTetherd"} {
		t.Run("MigrationUnderLoad"+via, func(t *testing.T) {
			tbl := table("schema")
			createSchemaTable(t, direct, tbl)
			b := open(t, 4)
			ddl := func(q string) error {
				q = strings.ReplaceAll(q, "{table}", tbl)
				if via == "ThroughTetherd" {
					_, err := b.Exec(ctx(t), tether.Statement{SQL: q})
					return err
				}
				_, err := direct.Exec(q)
				return err
			}
			s.migrateUnderLoad(t, b, tbl, ddl)
		})
	}

	t.Run("InTransactionAfterAnotherClientsDDL", func(t *testing.T) {
		tbl := table("schema")
		createSchemaTable(t, direct, tbl)
		b := open(t, 1) // the transaction gets the connection the statement is prepared on
		sel := selStar(tbl)
		if r := mustQuery(t, b, sel, int64(1)); !slices.Equal(r.Columns, []string{"id", "k", "v"}) {
			t.Fatalf("before: columns %v", r.Columns)
		}
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Exec("ALTER TABLE " + tbl + " ADD COLUMN w INT"); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{int64(1)}})
		switch {
		case s.TxSchemaError && err == nil:
			t.Fatalf("in the transaction: no error, columns %v", r.Columns)
		case s.TxSchemaError:
			te := tether.AsError(err)
			if te.Code != tether.CodeTxAborted || !te.Retry || !strings.Contains(te.Message, "schema changed") {
				t.Fatalf("in the transaction: %v (code %s, retry %v), want tx_aborted, retry, naming the schema change", err, te.Code, te.Retry)
			}
			t.Logf("in the transaction: %v", err)
		case err != nil:
			t.Fatalf("in the transaction: %v", err)
		case !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}):
			t.Fatalf("in the transaction: columns %v, want the new schema's", r.Columns)
		}
		if err := tx.Rollback(ctx(t)); err != nil {
			t.Fatal(err)
		}
		// The next transaction on the same connection runs the statement
		// afresh, as does the next statement outside one.
		tx, err = b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		r, err = tx.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{int64(1)}})
		if err != nil || !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}) {
			t.Fatalf("next transaction: %v, columns %v", err, r)
		}
		if err := tx.Commit(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if r := mustQuery(t, b, sel, int64(1)); !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}) {
			t.Fatalf("after: columns %v", r.Columns)
		}
	})

	t.Run("DDLInTransactionThroughTetherd", func(t *testing.T) {
		tbl := table("schema")
		createSchemaTable(t, direct, tbl)
		b := open(t, 1)
		sel := selStar(tbl)
		mustQuery(t, b, sel, int64(1))
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx(t))
		if _, err := tx.Exec(ctx(t), tether.Statement{SQL: "ALTER TABLE " + tbl + " ADD COLUMN w INT"}); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{int64(1)}})
		if err != nil || !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}) {
			t.Fatalf("after the ALTER in the same transaction: %v, %v", err, r)
		}
		tx.Commit(ctx(t))
		if r := mustQuery(t, b, sel, int64(1)); !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}) {
			t.Fatalf("after: columns %v", r.Columns)
		}
	})

	t.Run("DDLInTransactionThroughTetherdRolledBack", func(t *testing.T) {
		if !s.TransactionalDDL {
			t.Skip("DDL commits implicitly here: there is no rollback of it")
		}
		tbl := table("schema")
		createSchemaTable(t, direct, tbl)
		b := open(t, 1)
		sel := selStar(tbl)
		mustQuery(t, b, sel, int64(1))
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "ALTER TABLE "+tbl+" ADD COLUMN w INT")
		mustQuery(t, tx, sel, int64(1)) // prepared for the schema the rollback undoes
		if err := tx.Rollback(ctx(t)); err != nil {
			t.Fatal(err)
		}
		// The schema is the old one again: in the next transaction on the
		// same connection the statement runs against it.
		tx, err = b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx(t))
		r, err := tx.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{int64(1)}})
		if err != nil || !slices.Equal(r.Columns, []string{"id", "k", "v"}) {
			t.Fatalf("after the rollback: %v, %v", err, r)
		}
	})

	t.Run("DDLThroughTetherdRetiresOnEveryConnection", func(t *testing.T) {
		tbl := table("schema")
		createSchemaTable(t, direct, tbl)
		b := open(t, 2)
		sel := selStar(tbl)
		// The statement prepared on both connections: one pinned by a
		// transaction, the other running it outside.
		tx, err := b.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		mustQuery(t, b, sel, int64(1))
		mustQuery(t, tx, sel, int64(1))
		tx.Rollback(ctx(t))
		mustExec(t, b, "ALTER TABLE "+tbl+" ADD COLUMN w INT")
		// Two transactions at once hold both connections: on each, the
		// statement runs against the new schema, without an error that
		// would abort the transaction.
		var txs []tether.Tx
		for i := 0; i < 2; i++ {
			tx, err := b.Begin(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx(t))
			txs = append(txs, tx)
		}
		for i, tx := range txs {
			r, err := tx.Query(ctx(t), tether.Statement{SQL: sel, Params: []any{int64(1)}})
			if err != nil || !slices.Equal(r.Columns, []string{"id", "k", "v", "w"}) {
				t.Fatalf("transaction %d: %v, %v", i, err, r)
			}
		}
	})
}

// migrateUnderLoad runs the steps with ddl while workers run statements on
// tbl through b, and checks every statement that started after a step had
// committed (and finished before the next began): it works and answers the
// new schema. A statement that overlapped a step may answer either schema,
// but must not fail either, but between a DROP TABLE and its CREATE.
func (s *SchemaSuite) migrateUnderLoad(t *testing.T, b SQLBackend, tbl string, ddl func(string) error) {
	const workers = 6
	const perStep = 60 // statements checked after each step, at least
	type phase struct {
		step    *schemaStep // nil: a step is running
		gap     bool        // the step running leaves a moment without the table
		checked atomic.Int64
		enough  chan struct{}
		once    sync.Once
	}
	newPhase := func(st *schemaStep) *phase { return &phase{step: st, enough: make(chan struct{})} }
	var cur atomic.Pointer[phase]
	cur.Store(newPhase(&schemaStep{name: "Start", cols: []string{"id", "k", "v"}}))

	var mu sync.Mutex
	var failures []string
	failed := map[string]int{}
	fail := func(step, what string) {
		mu.Lock()
		defer mu.Unlock()
		failed[step]++
		if len(failures) < 20 {
			failures = append(failures, step+": "+what)
		}
	}
	p := s.Placeholder
	stmts := []string{
		"SELECT * FROM " + tbl + " WHERE id = " + p(1),
		"UPDATE " + tbl + " SET k = k + 1 WHERE id = " + p(1),
		"SELECT k, id FROM " + tbl + " WHERE id = " + p(1),
		"SELECT COUNT(*) FROM " + tbl + " WHERE k >= " + p(1),
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ph := cur.Load()
				q := stmts[(w+i)%len(stmts)]
				id := int64(1 + (w*7+i)%20)
				c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var r *tether.Result
				var err error
				if strings.HasPrefix(q, "UPDATE") {
					r, err = b.Exec(c, tether.Statement{SQL: q, Params: []any{id}})
				} else {
					r, err = b.Query(c, tether.Statement{SQL: q, Params: []any{id}})
				}
				cancel()
				if end := cur.Load(); ph.step == nil || end != ph {
					// A step ran meanwhile: either schema may answer.
					if err != nil && !ph.gap && !end.gap {
						fail("while a step ran", fmt.Sprintf("%s: %v", q, err))
					}
					continue
				}
				if msg := checkSchemaResult(ph.step, q, r, err); msg != "" {
					fail(ph.step.name, msg)
				}
				if ph.checked.Add(1) >= perStep {
					ph.once.Do(func() { close(ph.enough) })
				}
			}
		}()
	}
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	defer halt()
	waitFor := func(ph *phase) {
		select {
		case <-ph.enough:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: only %d statements checked in 30 s", ph.step.name, ph.checked.Load())
		}
	}
	waitFor(cur.Load())
	steps := s.steps()
	for i := range steps {
		st := &steps[i]
		cur.Store(&phase{gap: len(st.ddl) > 1})
		for _, q := range st.ddl {
			if err := ddl(q); err != nil {
				t.Fatalf("%s: %s: %v", st.name, q, err)
			}
		}
		ph := newPhase(st)
		cur.Store(ph)
		waitFor(ph)
		t.Logf("%s: %d statements checked after it committed", st.name, ph.checked.Load())
	}
	halt()
	if len(failed) > 0 {
		t.Errorf("statements that failed or answered the old schema after a step committed: %v; first ones:\n%s", failed, strings.Join(failures, "\n"))
	}
}

// checkSchemaResult returns what is wrong with a statement's answer after
// step, or "".
func checkSchemaResult(step *schemaStep, q string, r *tether.Result, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: %v", q, err)
	}
	switch {
	case strings.HasPrefix(q, "SELECT *"):
		if !slices.Equal(r.Columns, step.cols) {
			return fmt.Sprintf("%s: columns %v, want %v", q, r.Columns, step.cols)
		}
		if len(r.Rows) != 1 || len(r.Rows[0]) != len(step.cols) {
			return fmt.Sprintf("%s: rows %v", q, r.Rows)
		}
		if i := slices.Index(step.cols, "v"); i >= 0 {
			switch r.Rows[0][i].(type) {
			case string, []byte:
				if !step.vText {
					return fmt.Sprintf("%s: v is %T, want an integer", q, r.Rows[0][i])
				}
			default:
				if step.vText {
					return fmt.Sprintf("%s: v is %T, want text", q, r.Rows[0][i])
				}
			}
		}
	case strings.HasPrefix(q, "SELECT k"):
		if !slices.Equal(r.Columns, []string{"k", "id"}) || len(r.Rows) != 1 {
			return fmt.Sprintf("%s: %v %v", q, r.Columns, r.Rows)
		}
	case strings.HasPrefix(q, "SELECT COUNT"):
		if len(r.Rows) != 1 {
			return fmt.Sprintf("%s: %v", q, r.Rows)
		}
	}
	return ""
}
