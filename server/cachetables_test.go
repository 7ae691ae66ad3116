package server_test

import (
	"context"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// TestCache_InvalidatesByTable: with the backend's catalog read, a write
// through tetherd drops the cached results that read the tables it writes and
// keeps the others (shown by a change made behind tetherd's back to a table
// not written: still the cached value); and what the text of a write does not
// show, the catalog does: a view's read is dropped by a write to its base
// table, a trigger's writes and a cascading foreign key's deletes are seen,
// a sequence is never cached, a transaction drops what it wrote at commit.
func TestCache_InvalidatesByTable(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			ctx := context.Background()
			c := dial(t, ts)
			id := uint32(0)
			exec := func(sql string) {
				t.Helper()
				id++
				c.ok(wire.Request{ID: id, Op: wire.OpExec, Backend: "db", SQL: sql})
			}
			behind := func(sql string) {
				t.Helper()
				if _, err := d.watch.ExecContext(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			read := func(sql string) string {
				t.Helper()
				id++
				return firstValue(t, c.do(wire.Request{ID: id, Op: wire.OpQuery, Backend: "db", SQL: sql, CacheTTLMS: 60000}))
			}
			expect := func(what, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s: read %s, want %s", what, got, want)
				}
			}
			drop := []string{"DROP VIEW IF EXISTS bt_v", "DROP VIEW IF EXISTS bt_v2", "DROP FUNCTION IF EXISTS bt_bump", "DROP TABLE IF EXISTS bt_child", "DROP TABLE IF EXISTS bt_parent",
				"DROP TABLE IF EXISTS bt_trig", "DROP TABLE IF EXISTS bt_a", "DROP TABLE IF EXISTS bt_b", "DROP SEQUENCE IF EXISTS bt_seq"}
			for _, s := range drop {
				exec(s)
			}
			t.Cleanup(func() {
				for _, s := range drop {
					d.watch.ExecContext(ctx, s)
				}
				if d.typ == "postgres" {
					d.watch.ExecContext(ctx, "DROP FUNCTION IF EXISTS bt_trig_fn()")
				}
			})
			exec("CREATE TABLE bt_a (id INT PRIMARY KEY, v INT)")
			exec("CREATE TABLE bt_b (id INT PRIMARY KEY, v INT)")
			exec("CREATE VIEW bt_v AS SELECT id, v FROM bt_a")
			exec("CREATE TABLE bt_parent (id INT PRIMARY KEY)")
			exec("CREATE TABLE bt_child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES bt_parent (id) ON DELETE CASCADE)")
			exec("CREATE TABLE bt_trig (id INT PRIMARY KEY)")
			if d.typ == "mysql" {
				exec("CREATE TRIGGER bt_trig_ai AFTER INSERT ON bt_trig FOR EACH ROW UPDATE bt_b SET v = v + 100")
				exec("CREATE SEQUENCE bt_seq NOCACHE")
			} else {
				exec("CREATE OR REPLACE FUNCTION bt_trig_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE bt_b SET v = v + 100; RETURN NEW; END $$")
				exec("CREATE TRIGGER bt_trig_ai AFTER INSERT ON bt_trig FOR EACH ROW EXECUTE FUNCTION bt_trig_fn()")
				exec("CREATE SEQUENCE bt_seq")
			}
			exec("INSERT INTO bt_a VALUES (1, 1)")
			exec("INSERT INTO bt_b VALUES (1, 1)")
			exec("INSERT INTO bt_parent VALUES (1)")
			exec("INSERT INTO bt_child VALUES (1, 1)")
			// The first cached read makes tetherd read the catalog again (the
			// DDL before it was not looked at).
			read("SELECT COUNT(*) FROM bt_a")
			waitByTable := func() {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); !ts.CacheByTable("db"); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the catalog was not read within 10 s; log:\n%s", ts.logs)
					}
				}
			}
			waitByTable()

			// A write drops what read its table, and nothing else.
			expect("a", read("SELECT v FROM bt_a WHERE id = 1"), "1")
			expect("b", read("SELECT v FROM bt_b WHERE id = 1"), "1")
			behind("UPDATE bt_b SET v = 2 WHERE id = 1")
			exec("UPDATE bt_a SET v = 3 WHERE id = 1")
			expect("a after its write", read("SELECT v FROM bt_a WHERE id = 1"), "3")
			expect("b after a write to a: still cached", read("SELECT v FROM bt_b WHERE id = 1"), "1")
			exec("UPDATE bt_b SET v = v WHERE id = 1")
			expect("b after its own write", read("SELECT v FROM bt_b WHERE id = 1"), "2")

			// A view: dropped by a write to its base table.
			expect("view", read("SELECT v FROM bt_v WHERE id = 1"), "3")
			behind("UPDATE bt_a SET v = 4 WHERE id = 1")
			exec("UPDATE bt_a SET v = v WHERE id = 99")
			expect("view after a write to its base table", read("SELECT v FROM bt_v WHERE id = 1"), "4")

			// A trigger on bt_trig writes bt_b.
			expect("b before the trigger", read("SELECT v FROM bt_b WHERE id = 1"), "2")
			exec("INSERT INTO bt_trig VALUES (1)")
			expect("b after the trigger wrote it", read("SELECT v FROM bt_b WHERE id = 1"), "102")

			// A cascading foreign key: deleting the parent deletes the child.
			expect("child", read("SELECT COUNT(*) FROM bt_child"), "1")
			exec("DELETE FROM bt_parent WHERE id = 1")
			expect("child after its parent's delete", read("SELECT COUNT(*) FROM bt_child"), "0")

			// A transaction's writes drop what they touch at commit, and only that.
			expect("a", read("SELECT v FROM bt_a WHERE id = 1"), "4")
			expect("b", read("SELECT v FROM bt_b WHERE id = 1"), "102")
			behind("UPDATE bt_b SET v = 5 WHERE id = 1")
			id++
			tx := toUint(c.ok(wire.Request{ID: id, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			id++
			c.ok(wire.Request{ID: id, Op: wire.OpExec, Tx: tx, SQL: "UPDATE bt_a SET v = 6 WHERE id = 1"})
			expect("a while the transaction is open", read("SELECT v FROM bt_a WHERE id = 1"), "4")
			id++
			c.ok(wire.Request{ID: id, Op: wire.OpCommit, Tx: tx})
			expect("a after the commit", read("SELECT v FROM bt_a WHERE id = 1"), "6")
			expect("b after a transaction that wrote a: still cached", read("SELECT v FROM bt_b WHERE id = 1"), "102")

			// An exec of a SELECT that calls a function that writes: the
			// function's tables are not known, so everything goes.
			if d.typ == "mysql" {
				exec("CREATE FUNCTION bt_bump() RETURNS INT MODIFIES SQL DATA BEGIN UPDATE bt_b SET v = v + 1; RETURN 1; END")
			} else {
				exec("CREATE OR REPLACE FUNCTION bt_bump() RETURNS int LANGUAGE plpgsql AS $$ BEGIN UPDATE bt_b SET v = v + 1; RETURN 1; END $$")
			}
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP FUNCTION IF EXISTS bt_bump") })
			waitByTable()
			expect("b", read("SELECT v FROM bt_b WHERE id = 1"), "5")
			exec("SELECT bt_bump()")
			expect("b after an exec that called a function writing it", read("SELECT v FROM bt_b WHERE id = 1"), "6")

			// DDL inside a transaction (PostgreSQL's is seen at commit): the
			// catalog is read again after the commit, and the new view's reads
			// are dropped by writes to its base table.
			id++
			tx = toUint(c.ok(wire.Request{ID: id, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			id++
			c.ok(wire.Request{ID: id, Op: wire.OpExec, Tx: tx, SQL: "CREATE VIEW bt_v2 AS SELECT id, v FROM bt_a"})
			id++
			if d.typ == "mysql" { // MySQL's DDL committed the transaction itself: the commit is refused
				errCode(t, c.do(wire.Request{ID: id, Op: wire.OpCommit, Tx: tx}), tether.CodeBadRequest)
			} else {
				c.ok(wire.Request{ID: id, Op: wire.OpCommit, Tx: tx})
			}
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP VIEW IF EXISTS bt_v2") })
			waitByTable()
			expect("new view", read("SELECT v FROM bt_v2 WHERE id = 1"), "6")
			behind("UPDATE bt_a SET v = 7 WHERE id = 1")
			exec("UPDATE bt_a SET v = v WHERE id = 99")
			expect("new view after a write to its base table", read("SELECT v FROM bt_v2 WHERE id = 1"), "7")

			// A sequence changes without a write: never cached.
			seqRead, next := "SELECT last_value FROM bt_seq", "SELECT nextval('bt_seq')"
			if d.typ == "mysql" {
				seqRead, next = "SELECT next_not_cached_value FROM bt_seq", "SELECT NEXTVAL(bt_seq)"
			}
			behind(next) // PostgreSQL's first nextval leaves last_value as it was
			first := read(seqRead)
			behind(next)
			if again := read(seqRead); again == first {
				t.Errorf("a sequence's read was answered from the cache: %s twice", first)
			}
		})
	}
}
