package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// behind runs sql on the SQLite database at path directly, as another
// program would: Tether does not see the write.
func behind(t *testing.T, path, sql string) {
	t.Helper()
	if _, err := openSQLite(t, path).Exec(context.Background(), tether.Statement{SQL: sql}); err != nil {
		t.Fatal(err)
	}
}

// TestCache_KeyAPIAndJoins: the key API's reads and joins with cache_ttl_ms
// are served from the cache (a write behind Tether's back stays unseen within
// the TTL), and a write through Tether that could change them drops them: a
// statement on their table, a key-API write on their backend, and for a
// join any write to its right backend.
func TestCache_KeyAPIAndJoins(t *testing.T) {
	otherPath := filepath.Join(t.TempDir(), "other.db")
	ts := startServer(t, func(c *tether.Config) {
		c.Backends["other"] = tether.DefaultBackendConfig("sqlite", otherPath)
	})
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"})
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "INSERT INTO users VALUES (1, 'ada'), (2, 'grace')"})
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "other", SQL: "CREATE TABLE profiles (user_id INTEGER PRIMARY KEY, bio TEXT)"})
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "other", SQL: "INSERT INTO profiles VALUES (1, 'b1'), (2, 'b2')"})
	const ttl = 60000
	get := func() string {
		rep := c.ok(wire.Request{ID: 2, Op: wire.OpGet, Table: "users", Key: []any{int64(1)}, Columns: []string{"name"}, CacheTTLMS: ttl})
		return fmt.Sprint(rep.Fields["rows"])
	}
	scan := func() string {
		rep := c.ok(wire.Request{ID: 3, Op: wire.OpMultiGet, Table: "users", Keys: [][]any{{int64(1)}, {int64(2)}}, Columns: []string{"name"}, CacheTTLMS: ttl})
		return fmt.Sprint(rep.Fields["rows"])
	}
	join := func() string {
		rep := c.ok(wire.Request{ID: 4, Op: wire.OpJoin, CacheTTLMS: ttl,
			Left:  &wire.Request{Op: wire.OpQuery, SQL: "SELECT id, name FROM users ORDER BY id"},
			Right: &wire.Request{Backend: "other", Table: "profiles", Columns: []string{"bio"}},
			On:    []string{"id"}})
		_, rows := rowsOf(t, rep)
		return fmt.Sprint(rows)
	}
	step := func(what string, want map[string]string) {
		t.Helper()
		for name, f := range map[string]func() string{"get": get, "multi_get": scan, "join": join} {
			if got := f(); got != want[name] {
				t.Errorf("%s: %s = %s, want %s", what, name, got, want[name])
			}
		}
	}
	start := map[string]string{"get": "[[ada]]", "multi_get": "[[ada] [grace]]", "join": "[[1 ada b1] [2 grace b2]]"}
	step("first reads", start)
	hits := ts.CacheStats().Hits
	behind(t, ts.dbPath, "UPDATE users SET name = 'ADA' WHERE id = 1")
	behind(t, otherPath, "UPDATE profiles SET bio = 'B1' WHERE user_id = 1")
	step("after writes behind Tether's back (cached)", start)
	if got := ts.CacheStats().Hits - hits; got != 3 {
		t.Fatalf("%d cache hits for the three reads, want 3", got)
	}

	// A statement through Tether on users: the reads of users go.
	c.ok(wire.Request{ID: 5, Op: wire.OpExec, SQL: "UPDATE users SET name = 'Ada' WHERE id = 1"})
	step("after an UPDATE of users", map[string]string{"get": "[[Ada]]", "multi_get": "[[Ada] [grace]]", "join": "[[1 Ada B1] [2 grace b2]]"})

	// A key-API write on the right backend of the join: the join goes, the
	// reads of users stay.
	behind(t, ts.dbPath, "UPDATE users SET name = 'x' WHERE id = 2") // unseen: proves what stays cached
	c.ok(wire.Request{ID: 6, Op: wire.OpPut, Backend: "other", Table: "profiles", Row: map[string]any{"user_id": int64(2), "bio": "bee"}})
	step("after a put on the join's right backend", map[string]string{"get": "[[Ada]]", "multi_get": "[[Ada] [grace]]", "join": "[[1 Ada B1] [2 x bee]]"})

	// A key-API write on users' backend: everything of it goes.
	c.ok(wire.Request{ID: 7, Op: wire.OpDelete, Table: "users", Key: []any{int64(1)}})
	step("after a delete of a user", map[string]string{"get": "[]", "multi_get": "[<nil> [x]]", "join": "[[2 x bee]]"})

	// Inside a transaction nothing comes from the cache.
	tx := toUint(c.ok(wire.Request{ID: 8, Op: wire.OpBegin}).Fields["tx"])
	c.ok(wire.Request{ID: 9, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO users VALUES (1, 'new')"})
	c.ok(wire.Request{ID: 10, Op: wire.OpRollback, Tx: tx})
	step("after a rolled back transaction", map[string]string{"get": "[]", "multi_get": "[<nil> [x]]", "join": "[[2 x bee]]"})
}

// TestCache_JoinOnOneBackend: a cached join whose two sides are on one
// MySQL or PostgreSQL backend is dropped by a write to its right table
// through tetherd (it is tagged with both tables), and stays cached across a
// write behind tetherd's back.
func TestCache_JoinOnOneBackend(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			c := dial(t, ts)
			exec := func(sql string) { c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: sql}) }
			exec("DROP TABLE IF EXISTS jb_notes")
			exec("DROP TABLE IF EXISTS jb_users")
			exec("CREATE TABLE jb_users (id INT PRIMARY KEY, name VARCHAR(20))")
			exec("CREATE TABLE jb_notes (user_id INT PRIMARY KEY, note VARCHAR(20))")
			exec("INSERT INTO jb_users VALUES (1, 'ada')")
			exec("INSERT INTO jb_notes VALUES (1, 'n1')")
			join := func() string {
				rep := c.ok(wire.Request{ID: 2, Op: wire.OpJoin, CacheTTLMS: 60000,
					Left:  &wire.Request{Op: wire.OpQuery, Backend: "db", SQL: "SELECT id, name FROM jb_users ORDER BY id"},
					Right: &wire.Request{Backend: "db", Table: "jb_notes", Columns: []string{"note"}},
					On:    []string{"id"}})
				_, rows := rowsOf(t, rep)
				return fmt.Sprint(rows)
			}
			join() // the first use of the cache has the catalog read
			for deadline := time.Now().Add(10 * time.Second); !ts.CacheByTable("db"); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the catalog was not read within 10 s; log:\n%s", ts.logs)
				}
			}
			exec("UPDATE jb_users SET name = 'ada' WHERE id = 1") // a fresh entry, tagged by table
			if got := join(); got != "[[1 ada n1]]" {
				t.Fatalf("join: %s", got)
			}
			if _, err := d.watch.Exec("UPDATE jb_notes SET note = 'behind' WHERE user_id = 1"); err != nil {
				t.Fatal(err)
			}
			if got := join(); got != "[[1 ada n1]]" {
				t.Fatalf("after a write behind tetherd's back the join is %s: it was not cached", got)
			}
			exec("UPDATE jb_notes SET note = 'n2' WHERE user_id = 1")
			if got := join(); got != "[[1 ada n2]]" {
				t.Fatalf("after a write to its right table through tetherd the join is %s, want [[1 ada n2]]", got)
			}
		})
	}
}
