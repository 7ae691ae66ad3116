package server_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/internal/shmversions"
	"github.com/tether-php/tether/wire"
	"golang.org/x/sys/unix"
)

// attachVersions attaches ts's versions segment read-only, as a PHP worker
// does, and removes the segment when the test ends.
func attachVersions(t *testing.T, ts *testServer) []byte {
	t.Helper()
	seg := ts.VersionsSegment()
	if seg == nil {
		t.Fatalf("no versions segment; logs: %s", ts.logs.String())
	}
	id, err := unix.SysvShmGet(seg.ShmKey(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.SysvShmDetach(mem)
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	})
	return mem
}

func slotValue(mem []byte, slot uint64) uint64 {
	return binary.LittleEndian.Uint64(mem[shmversions.HeaderBytes+8*int(slot):])
}

// localOf returns a reply's "versions" map, or nil.
func localOf(rep *wire.Reply) map[string]any {
	v, _ := rep.Fields["versions"].(map[string]any)
	return v
}

// TestCacheLocal_Publishes: with cache.local, a cacheable read that asks for
// versions gets the slots its result depends on and their versions read
// before it ran, and is never answered from tetherd's own cache; a write
// through tetherd bumps its table's slot before its client is answered; a
// request that does not ask sees no change; a reload bumps the reset
// counter; a shutdown zeroes the generation and a new tetherd on the same socket writes a new one.
func TestCacheLocal_Publishes(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			local := func(c *tether.Config) { c.Cache.Local = true }
			ts := d.startWith(t, nil, local)
			mem := attachVersions(t, ts)
			gen := binary.LittleEndian.Uint64(mem[shmversions.OffGeneration:])
			if gen == 0 || gen != ts.VersionsSegment().Generation() {
				t.Fatalf("generation in the segment %d, want %d", gen, ts.VersionsSegment().Generation())
			}
			ctx := context.Background()
			c := dial(t, ts)
			c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS local_t"})
			c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE local_t (id INT PRIMARY KEY, v INT)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS local_t") })
			c.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO local_t VALUES (1, 10)"})
			read := func(sql string, versions bool) *wire.Reply {
				t.Helper()
				return c.ok(wire.Request{ID: 4, Op: wire.OpQuery, Backend: "db", SQL: sql, Params: []any{int64(1)},
					CacheTTLMS: 60000, Versions: versions})
			}
			q := "SELECT v FROM local_t WHERE id = " + d.p(1)
			if v := localOf(read(q, false)); v != nil {
				t.Errorf("versions sent unasked: %v", v)
			}
			// Wait until the catalog is known: then a read names its table's slot.
			deadline := time.Now().Add(10 * time.Second)
			for !ts.CacheByTable("db") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			q2 := "SELECT v, id FROM local_t WHERE id = " + d.p(1)
			rep := read(q2, true)
			v := localOf(rep)
			if v == nil || firstValue(t, rep) != "10" {
				t.Fatalf("a read that asked: %v", rep.Fields)
			}
			slots, _ := v["slots"].([]any)
			values, _ := v["values"].([]any)
			if toUint(v["generation"]) != gen || len(slots) != 1 || len(values) != 1 || v["profile"] != "" {
				t.Fatalf("versions: %v (generation %d)", v, gen)
			}
			seg := ts.VersionsSegment()
			if toUint(slots[0]) != uint64(seg.TableSlot("db", "local_t")) {
				t.Errorf("slots %v, want local_t's %d", slots, seg.TableSlot("db", "local_t"))
			}
			table := toUint(slots[0])
			if slotValue(mem, table) != toUint(values[0]) {
				t.Errorf("slot %d is %d, the reply says %v", table, slotValue(mem, table), values[0])
			}
			// A read asking for versions is never answered from tetherd's own
			// cache (when that result was read is not known): a write behind
			// tetherd's back is seen.
			if _, err := d.watch.ExecContext(ctx, "UPDATE local_t SET v = 20 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			if rep := read(q2, true); localOf(rep)["slots"] == nil || firstValue(t, rep) != "20" {
				t.Errorf("a second read asking for versions: %v, want 20 with versions", rep.Fields)
			}
			if got := firstValue(t, read(q, false)); got != "10" {
				t.Errorf("a read without versions: %s, want 10 from tetherd's cache", got)
			}

			// A write through tetherd: the slot is new once its client has its reply.
			before := slotValue(mem, table)
			c.ok(wire.Request{ID: 5, Op: wire.OpExec, Backend: "db", SQL: "UPDATE local_t SET v = 11 WHERE id = 1"})
			if after := slotValue(mem, table); after == before {
				t.Errorf("slot %d still %d after an UPDATE was answered", table, after)
			}
			// A committed transaction too.
			before = slotValue(mem, table)
			tx := toUint(c.ok(wire.Request{ID: 6, Op: wire.OpBegin, Backend: "db"}).Fields["tx"])
			c.ok(wire.Request{ID: 7, Op: wire.OpExec, Tx: tx, SQL: "UPDATE local_t SET v = 12 WHERE id = 1"})
			if slotValue(mem, table) != before {
				t.Errorf("slot bumped before the commit")
			}
			c.ok(wire.Request{ID: 8, Op: wire.OpCommit, Tx: tx})
			if slotValue(mem, table) == before {
				t.Errorf("slot %d not bumped by a commit", table)
			}

			// A drop of the backend's whole cache (DDL) bumps the slots handed out.
			before = slotValue(mem, table)
			c.ok(wire.Request{ID: 9, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE local_ddl (id INT)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS local_ddl") })
			if slotValue(mem, table) == before {
				t.Errorf("slot %d not bumped by a DDL statement", table)
			}
			// A write to another table leaves it (unless the two share a slot),
			// once the catalog the DDL made doubtful is known again.
			for deadline := time.Now().Add(10 * time.Second); !ts.CacheByTable("db") && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if seg.TableSlot("db", "local_ddl") != uint32(table) {
				before = slotValue(mem, table)
				c.ok(wire.Request{ID: 10, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO local_ddl VALUES (1)"})
				if slotValue(mem, table) != before {
					t.Errorf("slot %d bumped by a write to another table", table)
				}
			}

			// A reload voids everything published (the reset counter).
			reset := binary.LittleEndian.Uint64(mem[shmversions.OffReset:])
			cfg := ts.cfg
			cfg.Backends = map[string]tether.BackendConfig{}
			for name, bc := range ts.cfg.Backends {
				cfg.Backends[name] = bc
			}
			bc := cfg.Backends["db"]
			bc.MaxConns++
			cfg.Backends["db"] = bc
			reload(t, ts, cfg)
			if r := binary.LittleEndian.Uint64(mem[shmversions.OffReset:]); r == reset {
				t.Errorf("reset counter still %d after a reload", r)
			}

			// A shutdown closes the generation; a new tetherd on the socket opens a new one.
			ts.shutdown(t, 5*time.Second)
			if g := binary.LittleEndian.Uint64(mem[shmversions.OffGeneration:]); g != 0 {
				t.Errorf("generation %d after shutdown, want 0", g)
			}
			ts2 := d.startWith(t, nil, func(c *tether.Config) { local(c); c.Server.Socket = ts.socket })
			if g := binary.LittleEndian.Uint64(mem[shmversions.OffGeneration:]); g == 0 || g == gen || g != ts2.VersionsSegment().Generation() {
				t.Errorf("generation after a restart: %d (before %d)", g, gen)
			}
		})
	}
}

// TestCacheLocal_ChangeStream: a write behind tetherd's back, seen in the
// change stream, bumps its table's slot.
func TestCacheLocal_ChangeStream(t *testing.T) {
	env := map[string][2]string{
		"mysql":    {"TETHER_TEST_MYSQL_BINLOG", "TETHER_TEST_MYSQL_DSN"},
		"postgres": {"TETHER_TEST_POSTGRES_LOGICAL", "TETHER_TEST_POSTGRES_DSN"},
	}
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			backendtest.RequireEnv(t, env[d.typ][0])
			dsn := backendtest.RequireEnv(t, env[d.typ][1])
			ts := d.startWith(t, func(b *tether.BackendConfig) { b.ChangeStream, b.DSN = true, dsn }, func(c *tether.Config) { c.Cache.Local = true })
			mem := attachVersions(t, ts)
			ctx := context.Background()
			c := dial(t, ts)
			c.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS local_cs"})
			c.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE local_cs (id INT PRIMARY KEY, v INT)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS local_cs") })
			c.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: "INSERT INTO local_cs VALUES (1, 10)"})
			seg := ts.VersionsSegment()
			c.ok(wire.Request{ID: 4, Op: wire.OpQuery, Backend: "db", SQL: "SELECT v FROM local_cs", CacheTTLMS: 60000, Versions: true})
			slot := uint64(seg.TableSlot("db", "local_cs"))
			anySlot := uint64(seg.AnySlot("db"))
			before, beforeAny := slotValue(mem, slot), slotValue(mem, anySlot)
			if _, err := d.watch.ExecContext(ctx, "UPDATE local_cs SET v = 11 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for slotValue(mem, slot) == before && slotValue(mem, anySlot) == beforeAny {
				if time.Now().After(deadline) {
					t.Fatalf("no slot bumped 10 s after a write behind tetherd's back (slot %d, any %d)", slot, anySlot)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
