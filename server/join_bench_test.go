package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/wire"
)

// BenchmarkJoin500 is seed E4's join returning 500 rows (users left join
// groups, ordered by group name), through a tetherd on MariaDB: the server's
// side of what bench/fanout measures end to end. It needs
// TETHER_TEST_MYSQL_DSN:
//
//	TETHER_TEST_MYSQL_DSN=... go test -run X -bench Join500 -benchmem -cpuprofile cpu.out .
func BenchmarkJoin500(b *testing.B) {
	dsn := os.Getenv("TETHER_TEST_MYSQL_DSN")
	if dsn == "" {
		b.Skip("TETHER_TEST_MYSQL_DSN not set")
	}
	bc := tether.DefaultBackendConfig("mysql", dsn)
	// The tables are made through a backend of their own: the server's is
	// opened by the server, on its event loop (one opened here first would
	// leave the server's joins waiting on a loop nobody runs).
	db, err := mysql.New(bc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := db.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	for _, sql := range []string{
		"DROP TABLE IF EXISTS bench_join_users", "DROP TABLE IF EXISTS bench_join_groups",
		"CREATE TABLE bench_join_groups (code VARCHAR(16) PRIMARY KEY, name VARCHAR(64), description VARCHAR(255))",
		"CREATE TABLE bench_join_users (id INT PRIMARY KEY, name VARCHAR(64), email VARCHAR(128), group_code VARCHAR(16), score DOUBLE, created DATETIME)",
	} {
		if _, err := db.Exec(ctx, tether.Statement{SQL: sql}); err != nil {
			b.Fatal(err)
		}
	}
	for g := 0; g < 20; g++ {
		db.Exec(ctx, tether.Statement{SQL: "INSERT INTO bench_join_groups VALUES (?, ?, 'a group')", Params: []any{fmt.Sprint("g", g), fmt.Sprint("Group ", 19-g)}})
	}
	for i := 1; i <= 1000; i++ {
		db.Exec(ctx, tether.Statement{SQL: "INSERT INTO bench_join_users VALUES (?, ?, ?, ?, ?, NOW())",
			Params: []any{int64(i), fmt.Sprint("user", i), fmt.Sprint("user", i, "@example.com"), fmt.Sprint("g", i%21), float64(i) / 3}})
	}
	served, err := mysql.New(bc)
	if err != nil {
		b.Fatal(err)
	}
	ts := startServerWith(b, func(cfg *tether.Config) { cfg.Backends["maria"] = bc }, map[string]tether.Backend{"maria": served})
	c := dial(b, ts)
	req := wire.Request{ID: 1, Op: wire.OpJoin, Left: &wire.Request{Op: wire.OpQuery, Backend: "maria",
		SQL: "SELECT * FROM bench_join_users WHERE id BETWEEN ? AND ? ORDER BY id", Params: []any{int64(1), int64(500)}},
		Right: &wire.Request{Backend: "maria", Table: "bench_join_groups", Columns: []string{"name"}},
		On:    []string{"group_code"}, OrderBy: []string{"bench_join_groups.name"}}
	if rep := c.do(req); toUint(rep.Fields["count"]) != 500 {
		b.Fatalf("join: %v", rep.Fields)
	}
	// The timed loop reads each reply's bytes without decoding them: the
	// allocations and CPU reported are the server's (and the frame's read).
	frame, start := wire.BeginFrame(nil)
	frame = wire.EndFrame(wire.AppendRequest(frame, &req), start)
	var head [4]byte
	var payload []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.sendRaw(frame)
		if _, err := io.ReadFull(c.conn, head[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(head[:]))
		payload = slices.Grow(payload[:0], n)[:n]
		if _, err := io.ReadFull(c.conn, payload); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if rep, err := wire.DecodeReply(payload); err != nil || toUint(rep.Fields["count"]) != 500 {
		b.Fatalf("last join: %v %v", rep, err)
	}
}
