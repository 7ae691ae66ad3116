package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// joinFixture is the seed's schema (users left join groups on the group
// code) on "main", and profiles keyed by user id on a second SQLite database
// "other", for joins across backends.
func joinFixture(t *testing.T, given map[string]tether.Backend) *client {
	t.Helper()
	ts := startServerWith(t, func(cfg *tether.Config) {
		cfg.Backends["other"] = tether.DefaultBackendConfig("sqlite", filepath.Join(t.TempDir(), "other.db"))
		cfg.Backends["down"] = tether.DefaultBackendConfig("sqlite", filepath.Join(t.TempDir(), "down.db"))
	}, given)
	c := dial(t, ts)
	for _, sql := range []string{
		"CREATE TABLE groups (code TEXT PRIMARY KEY, name TEXT NOT NULL)",
		"CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, group_code TEXT)",
		"CREATE TABLE empty_groups (code TEXT PRIMARY KEY, name TEXT)",
		"INSERT INTO groups VALUES ('adm', 'Admins'), ('dev', 'Developers'), ('ops', 'Operators')",
		// u5 has no group; u6's group does not exist.
		"INSERT INTO users VALUES (1, 'u1', 'dev'), (2, 'u2', 'adm'), (3, 'u3', 'ops'), (4, 'u4', 'dev'), (5, 'u5', NULL), (6, 'u6', 'zzz')",
	} {
		c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: sql})
	}
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "other", SQL: "CREATE TABLE profiles (user_id INTEGER PRIMARY KEY, bio TEXT, name TEXT)"})
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "other", SQL: "INSERT INTO profiles VALUES (1, 'b1', 'p1'), (3, 'b3', 'p3')"})
	return c
}

func usersLeft(lo, hi int64) *wire.Request {
	return &wire.Request{Op: wire.OpQuery, SQL: "SELECT id, name, group_code FROM users WHERE id BETWEEN ? AND ? ORDER BY id",
		Params: []any{lo, hi}}
}

// rowsOf turns a column-oriented reply back into rows, checking its shape.
func rowsOf(t *testing.T, rep *wire.Reply) (columns []any, rows [][]any) {
	t.Helper()
	columns, _ = rep.Fields["columns"].([]any)
	data, _ := rep.Fields["data"].([]any)
	n := int(toUint(rep.Fields["count"]))
	if len(data) != len(columns) {
		t.Fatalf("%d columns, %d data arrays: %v", len(columns), len(data), rep.Fields)
	}
	rows = make([][]any, n)
	for i := range rows {
		for c := range columns {
			col := data[c].([]any)
			if len(col) != n {
				t.Fatalf("column %v has %d values, count is %d", columns[c], len(col), n)
			}
			rows[i] = append(rows[i], col[i])
		}
	}
	return columns, rows
}

func TestServer_Join(t *testing.T) {
	c := joinFixture(t, nil)

	t.Run("LeftOrderedByRightColumn", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 2, Op: wire.OpJoin, Left: usersLeft(1, 6),
			Right: &wire.Request{Table: "groups"}, On: []string{"group_code"}, OrderBy: []string{"groups.name", "-id"}})
		cols, rows := rowsOf(t, rep)
		if got := fmt.Sprint(cols); got != "[id name group_code code groups.name]" {
			t.Fatalf("columns %s", got)
		}
		// nil first (u5: no code; u6: no such group, by id descending), then by group name.
		want := "[[6 u6 zzz <nil> <nil>] [5 u5 <nil> <nil> <nil>] [2 u2 adm adm Admins] [4 u4 dev dev Developers] [1 u1 dev dev Developers] [3 u3 ops ops Operators]]"
		if got := fmt.Sprint(rows); got != want {
			t.Fatalf("rows\n got %s\nwant %s", got, want)
		}
	})

	t.Run("OrderByMixedKinds", func(t *testing.T) {
		// nil first, numbers by value whatever their type, then strings; desc reverses it all.
		left := &wire.Request{Op: wire.OpQuery, SQL: "SELECT 1 AS k, 2.5 AS v UNION ALL SELECT 2, 1 UNION ALL SELECT 3, NULL " +
			"UNION ALL SELECT 4, 'a' UNION ALL SELECT 5, -7"}
		for order, want := range map[string]string{"v": "[3 5 2 1 4]", "-v": "[4 1 2 5 3]", "-k": "[5 4 3 2 1]"} {
			rep := c.ok(wire.Request{ID: 9, Op: wire.OpJoin, Left: left, Right: &wire.Request{Table: "groups"},
				On: []string{"k"}, OrderBy: []string{order}})
			_, rows := rowsOf(t, rep)
			var ks []any
			for _, r := range rows {
				ks = append(ks, r[0])
			}
			if got := fmt.Sprint(ks); got != want {
				t.Errorf("order by %s: %s, want %s", order, got, want)
			}
		}
	})

	t.Run("InnerKeepsLeftOrder", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 3, Op: wire.OpJoin, Kind: "inner", Left: usersLeft(1, 6),
			Right: &wire.Request{Table: "groups", Columns: []string{"name"}}, On: []string{"group_code"}})
		cols, rows := rowsOf(t, rep)
		want := "[id name group_code groups.name] [[1 u1 dev Developers] [2 u2 adm Admins] [3 u3 ops Operators] [4 u4 dev Developers]]"
		if got := fmt.Sprint(cols, " ", rows); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})

	t.Run("AcrossBackends", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 4, Op: wire.OpJoin, Left: usersLeft(1, 4),
			Right: &wire.Request{Backend: "other", Table: "profiles", Columns: []string{"bio", "name"}}, On: []string{"id"},
			OrderBy: []string{"-profiles.name"}})
		cols, rows := rowsOf(t, rep)
		want := "[id name group_code bio profiles.name] [[3 u3 ops b3 p3] [1 u1 dev b1 p1] [2 u2 adm <nil> <nil>] [4 u4 dev <nil> <nil>]]"
		if got := fmt.Sprint(cols, " ", rows); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})

	t.Run("LeftFromTheKeyAPI", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 5, Op: wire.OpJoin, Kind: "inner",
			Left:  &wire.Request{Op: wire.OpMultiGet, Table: "users", Keys: [][]any{{int64(4)}, {int64(99)}, {int64(2)}}},
			Right: &wire.Request{Table: "groups", Columns: []string{"name"}}, On: []string{"group_code"}})
		_, rows := rowsOf(t, rep)
		if got := fmt.Sprint(rows); got != "[[4 u4 dev Developers] [2 u2 adm Admins]]" {
			t.Fatalf("rows %s", got)
		}
	})

	t.Run("EmptySides", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 6, Op: wire.OpJoin, Left: usersLeft(1, 2),
			Right: &wire.Request{Table: "empty_groups"}, On: []string{"group_code"}})
		cols, rows := rowsOf(t, rep)
		if got := fmt.Sprint(cols, " ", rows); got != "[id name group_code code empty_groups.name] [[1 u1 dev <nil> <nil>] [2 u2 adm <nil> <nil>]]" {
			t.Fatalf("left join, empty right: %s", got)
		}
		rep = c.ok(wire.Request{ID: 7, Op: wire.OpJoin, Kind: "inner", Left: usersLeft(1, 2),
			Right: &wire.Request{Table: "empty_groups"}, On: []string{"group_code"}})
		if toUint(rep.Fields["count"]) != 0 {
			t.Fatalf("inner join, empty right: %v", rep.Fields)
		}
		rep = c.ok(wire.Request{ID: 8, Op: wire.OpJoin, Left: usersLeft(100, 200),
			Right: &wire.Request{Table: "groups"}, On: []string{"group_code"}})
		cols, rows = rowsOf(t, rep)
		if fmt.Sprint(cols) != "[id name group_code code groups.name]" || len(rows) != 0 {
			t.Fatalf("no left rows: %v", rep.Fields)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		right := &wire.Request{Table: "groups"}
		on := []string{"group_code"}
		// The right table is checked even when no left row points at it.
		errCode(t, c.do(wire.Request{ID: 10, Op: wire.OpJoin, Left: usersLeft(100, 200), Right: &wire.Request{Table: "nope"}, On: on}), tether.CodeUnknownTable)
		errCode(t, c.do(wire.Request{ID: 11, Op: wire.OpJoin, Left: usersLeft(1, 6), Right: &wire.Request{Backend: "nope", Table: "groups"}, On: on}), tether.CodeUnknownBackend)
		errCode(t, c.do(wire.Request{ID: 12, Op: wire.OpJoin, Left: usersLeft(1, 6), Right: right, On: []string{"nope"}}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 13, Op: wire.OpJoin, Left: usersLeft(1, 6), Right: right, On: on, Kind: "outer"}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 14, Op: wire.OpJoin, Left: usersLeft(1, 6), Right: right, On: on, OrderBy: []string{"nope"}}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 15, Op: wire.OpJoin, Left: &wire.Request{Op: wire.OpExec, SQL: "DELETE FROM users"}, Right: right, On: on}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 16, Op: wire.OpJoin, Right: right, On: on}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 17, Op: wire.OpJoin, Left: usersLeft(1, 6), On: on}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 18, Op: wire.OpJoin, Left: usersLeft(1, 6), Right: right}), tether.CodeBadRequest)
		errCode(t, c.do(wire.Request{ID: 19, Op: wire.OpJoin, Left: &wire.Request{Op: wire.OpQuery, SQL: "SELECT * FROM nowhere"}, Right: right, On: on}), tether.CodeBackendError)
		// A join side cannot hold a join.
		errCode(t, c.do(wire.Request{ID: 20, Op: wire.OpJoin, Right: right, On: on,
			Left: &wire.Request{Op: wire.OpJoin, Left: usersLeft(1, 2), Right: right, On: on}}), tether.CodeBadRequest)
		if fmt.Sprint(count(t, c, "users")) != "6" {
			t.Fatal("a rejected join changed the users table")
		}
	})

	t.Run("InABatch", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 30, Op: wire.OpBatch, Ops: []wire.Request{
			{Op: wire.OpJoin, Kind: "inner", Left: usersLeft(2, 2), Right: &wire.Request{Table: "groups", Columns: []string{"name"}}, On: []string{"group_code"}},
			{Op: wire.OpJoin, Left: usersLeft(1, 1), Right: &wire.Request{Table: "nope"}, On: []string{"group_code"}},
			{Op: wire.OpQuery, SQL: "SELECT id FROM users WHERE id < 3 ORDER BY id", Columnar: true},
		}})
		res := rep.Fields["results"].([]any)
		first := &wire.Reply{Fields: res[0].(map[string]any)}
		if _, rows := rowsOf(t, first); fmt.Sprint(rows) != "[[2 u2 adm Admins]]" {
			t.Fatalf("join in a batch: %v", res[0])
		}
		errCode(t, &wire.Reply{Fields: res[1].(map[string]any)}, tether.CodeUnknownTable)
		if _, rows := rowsOf(t, &wire.Reply{Fields: res[2].(map[string]any)}); fmt.Sprint(rows) != "[[1] [2]]" {
			t.Fatalf("columnar query in a batch: %v", res[2])
		}
	})
}

func TestServer_JoinRightBackendDown(t *testing.T) {
	c := joinFixture(t, map[string]tether.Backend{"down": downBackend{}})
	start := time.Now()
	rep := c.do(wire.Request{ID: 2, Op: wire.OpJoin, Left: usersLeft(1, 6),
		Right: &wire.Request{Backend: "down", Table: "groups"}, On: []string{"group_code"}})
	e := errCode(t, rep, tether.CodeUnavailable)
	if e["retry"] != true || time.Since(start) > 2*time.Second {
		t.Fatalf("down right side: %v after %s", e, time.Since(start))
	}
	// The server goes on serving joins on backends that are up.
	rep = c.ok(wire.Request{ID: 3, Op: wire.OpJoin, Kind: "inner", Left: usersLeft(2, 2),
		Right: &wire.Request{Table: "groups", Columns: []string{"name"}}, On: []string{"group_code"}})
	if _, rows := rowsOf(t, rep); fmt.Sprint(rows) != "[[2 u2 adm Admins]]" {
		t.Fatalf("after: %v", rows)
	}
}

func TestServer_Columnar(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB, n TEXT)"})
	c.ok(wire.Request{ID: 2, Op: wire.OpExec, SQL: "INSERT INTO t VALUES (1, x'00ff', NULL), (2, x'', 'b'), (3, NULL, 'c')"})
	rep := c.ok(wire.Request{ID: 3, Op: wire.OpQuery, SQL: "SELECT id, v, n FROM t ORDER BY id", Columnar: true})
	if fmt.Sprint(rep.Fields["data"]) != "[[1 2 3] [[0 255] [] <nil>] [<nil> b c]]" || toUint(rep.Fields["count"]) != 3 {
		t.Fatalf("columnar query: %v", rep.Fields)
	}
	if _, ok := rep.Fields["rows"]; ok {
		t.Fatal("a columnar reply has rows")
	}
	rep = c.ok(wire.Request{ID: 4, Op: wire.OpScan, Table: "t", Limit: 2, Columns: []string{"id"}, Columnar: true})
	if fmt.Sprint(rep.Fields["data"]) != "[[1 2]]" || rep.Fields["cursor"] == nil {
		t.Fatalf("columnar scan: %v", rep.Fields)
	}
	errCode(t, c.do(wire.Request{ID: 5, Op: wire.OpMultiGet, Table: "t", Keys: [][]any{{int64(1)}}, Columnar: true}), tether.CodeBadRequest)
}

// downBackend is a backend whose store cannot be reached: fault injection for
// the right side of a join.
type downBackend struct{}

func (downBackend) Open(context.Context) error  { return nil }
func (downBackend) Stats() tether.PoolStats     { return tether.PoolStats{} }
func (downBackend) Close(context.Context) error { return nil }
func (downBackend) unavailable() error {
	return &tether.Error{Code: tether.CodeUnavailable, Message: "down: connection refused", Retry: true}
}
func (d downBackend) Get(context.Context, tether.KeyRequest) (*tether.Result, error) {
	return nil, d.unavailable()
}
func (d downBackend) MultiGet(context.Context, tether.KeyRequest) (*tether.Result, error) {
	return nil, d.unavailable()
}
func (d downBackend) Scan(context.Context, tether.KeyRequest) (*tether.Result, error) {
	return nil, d.unavailable()
}
func (d downBackend) Put(context.Context, tether.KeyRequest) (*tether.Result, error) {
	return nil, d.unavailable()
}
func (d downBackend) Delete(context.Context, tether.KeyRequest) (*tether.Result, error) {
	return nil, d.unavailable()
}

// TestServer_JoinOnLoop is a join whose left query runs on a loop-driven
// pool (MariaDB, PostgreSQL), decoded into the join's own row sink, against
// the same join written in SQL: every value of every type, in the same
// order, across more rows than one slab of the sink holds and with a text
// longer than one slab of its text arena, ordered by a right column, by a
// left one descending, and not at all.
func TestServer_JoinOnLoop(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, nil)
			c := dial(t, ts)
			dt, bin, nullsFirst, nullsLast := "DATETIME", "VARBINARY(16)", "", ""
			if d.typ == "postgres" {
				dt, bin, nullsFirst, nullsLast = "TIMESTAMP", "BYTEA", " NULLS FIRST", " NULLS LAST"
			}
			for _, sql := range []string{
				"DROP TABLE IF EXISTS jl_users", "DROP TABLE IF EXISTS jl_groups",
				"CREATE TABLE jl_groups (code VARCHAR(8) PRIMARY KEY, name VARCHAR(64), rank_ INT)",
				"CREATE TABLE jl_users (id INT PRIMARY KEY, name TEXT, group_code VARCHAR(8), score DOUBLE PRECISION, big BIGINT, created " + dt + ", data " + bin + ")",
			} {
				c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: sql})
			}
			t.Cleanup(func() {
				c.do(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS jl_users"})
				c.do(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS jl_groups"})
			})
			for g := 0; g < 7; g++ {
				c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO jl_groups VALUES (" + d.p(1) + ", " + d.p(2) + ", " + d.p(3) + ")",
					Params: []any{fmt.Sprint("g", g), fmt.Sprintf("%c group", 'A'+(g*3)%7), int64(g % 3)}})
			}
			const n = 300
			for i := 1; i <= n; i++ {
				var code, score, big, data any = fmt.Sprint("g", i%8), float64(i%13) / 4, int64(i) << 40, []byte{byte(i), 0, 255}
				switch {
				case i%11 == 0:
					code, score, big, data = nil, nil, nil, nil // no group, and NULLs of every type
				case i%17 == 0:
					code = "zz" // a group that does not exist
				}
				name := fmt.Sprint("user ", i)
				if i == 150 {
					name = strings.Repeat("long ", 2000) // longer than a slab of the text arena
				}
				c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db",
					SQL:    fmt.Sprintf("INSERT INTO jl_users VALUES (%s, %s, %s, %s, %s, '2026-11-27 10:%02d:%02d', %s)", d.p(1), d.p(2), d.p(3), d.p(4), d.p(5), i%60, i%60, d.p(6)),
					Params: []any{int64(i), name, code, score, big, data}})
			}
			left := &wire.Request{Op: wire.OpQuery, Backend: "db", SQL: "SELECT * FROM jl_users WHERE id BETWEEN " + d.p(1) + " AND " + d.p(2) + " ORDER BY id",
				Params: []any{int64(1), int64(n)}}
			sqlJoin := "SELECT u.*, g.name, g.rank_ FROM jl_users u %s JOIN jl_groups g ON g.code = u.group_code WHERE u.id BETWEEN 1 AND 300 ORDER BY %s"
			for _, tc := range []struct {
				kind    string
				orderBy []string
				sql     string
			}{
				{"left", []string{"jl_groups.name"}, fmt.Sprintf(sqlJoin, "LEFT", "g.name"+nullsFirst+", u.id")},
				{"left", []string{"-rank_", "-score"}, fmt.Sprintf(sqlJoin, "LEFT", "g.rank_ DESC"+nullsLast+", u.score DESC"+nullsLast+", u.id")},
				{"inner", []string{"-score", "jl_groups.name"}, fmt.Sprintf(sqlJoin, "INNER", "u.score DESC"+nullsLast+", g.name, u.id")},
				{"left", nil, fmt.Sprintf(sqlJoin, "LEFT", "u.id")},
			} {
				rep := c.ok(wire.Request{ID: 2, Op: wire.OpJoin, Kind: tc.kind, Left: left,
					Right: &wire.Request{Backend: "db", Table: "jl_groups", Columns: []string{"name", "rank_"}},
					On:    []string{"group_code"}, OrderBy: tc.orderBy})
				cols, got := rowsOf(t, rep)
				if fmt.Sprint(cols) != "[id name group_code score big created data jl_groups.name rank_]" {
					t.Fatalf("columns %v", cols)
				}
				want := c.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "db", SQL: tc.sql, Columnar: true})
				_, wantRows := rowsOf(t, want)
				if len(got) != len(wantRows) {
					t.Fatalf("%s join by %v: %d rows, the SQL join %d", tc.kind, tc.orderBy, len(got), len(wantRows))
				}
				for i := range got {
					if g, w := fmt.Sprintf("%#v", got[i]), fmt.Sprintf("%#v", wantRows[i]); g != w {
						t.Fatalf("%s join by %v, row %d:\n got %s\nwant %s", tc.kind, tc.orderBy, i, g, w)
					}
				}
			}
			// Every right column (none named): more than the sink left room
			// for, so the rows are copied, not glued in place.
			rep := c.ok(wire.Request{ID: 4, Op: wire.OpJoin, Left: left, Right: &wire.Request{Backend: "db", Table: "jl_groups"},
				On: []string{"group_code"}})
			_, got := rowsOf(t, rep)
			_, want := rowsOf(t, c.ok(wire.Request{ID: 5, Op: wire.OpQuery, Backend: "db", Columnar: true,
				SQL: "SELECT u.*, g.code, g.name, g.rank_ FROM jl_users u LEFT JOIN jl_groups g ON g.code = u.group_code WHERE u.id BETWEEN 1 AND 300 ORDER BY u.id"}))
			if g, w := fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", want); g != w {
				t.Fatalf("join on every right column:\n got %.300s\nwant %.300s", g, w)
			}
		})
	}
}
