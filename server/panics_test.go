package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/admin"
	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/wire"
)

// The panic tests inject panics (internal/fault) into a fraction of the
// requests of a tetherd under load from many clients, on SQLite (worker
// goroutines, batches, transactions) and on the real MariaDB and PostgreSQL
// (a server connection's read on the event loop). Each request that panics
// must be answered internal; every bystander's request must succeed; the
// daemon must go on serving; a backend connection that panicked must be
// closed, never reused; the panics must be counted and logged with their
// stacks. Before tetherd recovered panics, the first one ended the test
// binary.

// boom marks the statements a test's fault hook panics on.
const boom = "/*boom*/"

// rawDo sends r on conn and reads its reply; unlike client.do it reports
// failures as errors, for goroutines other than the test's.
func rawDo(conn net.Conn, r wire.Request) (*wire.Reply, error) {
	b, start := wire.BeginFrame(nil)
	b = wire.EndFrame(wire.AppendRequest(b, &r), start)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(b); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	var h [4]byte
	if _, err := io.ReadFull(conn, h[:]); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(conn, p); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	rep, err := wire.DecodeReply(p)
	if err != nil {
		return nil, err
	}
	if rep.ID != r.ID {
		return nil, fmt.Errorf("reply id %d to request %d", rep.ID, r.ID)
	}
	return rep, nil
}

func codeOf(rep *wire.Reply) string {
	if e := rep.Error(); e != nil {
		return fmt.Sprint(e["code"])
	}
	return ""
}

// tally counts outcomes from many goroutines.
type tally struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	first      []string
}

func (t *tally) fail(format string, args ...any) {
	t.failed.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.first) < 5 {
		t.first = append(t.first, fmt.Sprintf(format, args...))
	}
}

// clients runs n clients at once, each calling fn with its connection and
// index, and waits for them.
func clients(t *testing.T, ts *testServer, n int, fn func(conn net.Conn, i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		conn, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			fn(conn, i)
		}()
	}
	wg.Wait()
}

// panicsOf sums tether.Panics for a backend, by op.
func panicsOf(backend string) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range tether.Panics() {
		if p.Backend == backend {
			out[p.Op] += p.Count
		}
	}
	return out
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// checkPanicsReported checks the panics' log lines (with a stack through the
// fault hook) and tether_panics_total in the admin API's metrics.
func checkPanicsReported(t *testing.T, ts *testServer, logs, backend, op string) {
	t.Helper()
	if !strings.Contains(logs, "panic recovered") || !strings.Contains(logs, "panics_test.go") || !strings.Contains(logs, "goroutine ") {
		t.Errorf("the log has no panic with its stack:\n%.2000s", logs)
	}
	rec := httptest.NewRecorder()
	admin.Handler(ts.Server).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := fmt.Sprintf("tether_panics_total{backend=%q,op=%q}", backend, op)
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics has no %s", want)
	}
}

// TestServer_PanicUnderLoad_SQLite: panics in backend calls on worker
// goroutines (a plain query, one operation of a batch, a statement of a
// transaction) among 16 bystander clients.
func TestServer_PanicUnderLoad_SQLite(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		bc := c.Backends["main"]
		bc.MaxConns = 4
		c.Backends["main"] = bc
	})
	setup := dial(t, ts)
	setup.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"})
	setup.ok(wire.Request{ID: 2, Op: wire.OpExec, SQL: "INSERT INTO t VALUES (1, 'one')"})
	var injected atomic.Int64
	restore := fault.Set(func(p fault.Point, detail string) {
		if (p == fault.WorkerCall || p == fault.BatchOp) && strings.Contains(detail, boom) {
			injected.Add(1)
			panic("injected by the test: " + detail)
		}
	})
	defer restore()
	before := panicsOf("main")

	const bystanders, perBystander, victims, rounds = 16, 200, 4, 10
	var by, vic tally
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		clients(t, ts, victims, func(conn net.Conn, i int) {
			id := uint32(0)
			next := func() uint32 { id++; return id }
			for j := 0; j < rounds; j++ {
				// A query that panics.
				rep, err := rawDo(conn, wire.Request{ID: next(), Op: wire.OpQuery, SQL: "SELECT v FROM t " + boom})
				if err != nil || codeOf(rep) != "internal" {
					vic.fail("query: %v %v", rep, err)
					return
				}
				// A batch with one operation that panics: the others stand.
				rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpBatch, Ops: []wire.Request{
					{Op: wire.OpQuery, SQL: "SELECT 1"}, {Op: wire.OpQuery, SQL: "SELECT 2 " + boom}, {Op: wire.OpQuery, SQL: "SELECT 3"}}})
				if err != nil || codeOf(rep) != "" {
					vic.fail("batch: %v %v", rep, err)
					return
				}
				res := rep.Fields["results"].([]any)
				code := func(k int) string {
					if e, ok := res[k].(map[string]any)["error"].(map[string]any); ok {
						return fmt.Sprint(e["code"])
					}
					return ""
				}
				if code(0) != "" || code(1) != "internal" || code(2) != "" {
					vic.fail("batch results: %v", res)
					return
				}
				// A transaction's statement that panics: the transaction is
				// given up (its connection discarded).
				rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpBegin})
				if err != nil || codeOf(rep) != "" {
					vic.fail("begin: %v %v", rep, err)
					return
				}
				tx := toUint(rep.Fields["tx"])
				rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpExec, Tx: tx, SQL: "UPDATE t SET v = 'x' " + boom})
				if err != nil || codeOf(rep) != "internal" {
					vic.fail("statement in tx: %v %v", rep, err)
					return
				}
				rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpQuery, Tx: tx, SQL: "SELECT v FROM t"})
				if err != nil || codeOf(rep) == "" {
					vic.fail("statement after the panic in tx: %v %v, want an error", rep, err)
					return
				}
				vic.ok.Add(1)
			}
		})
	}()
	clients(t, ts, bystanders, func(conn net.Conn, i int) {
		for j := 0; j < perBystander; j++ {
			var r wire.Request
			switch j % 4 {
			case 0:
				r = wire.Request{ID: uint32(j + 1), Op: wire.OpBatch, Ops: []wire.Request{
					{Op: wire.OpQuery, SQL: "SELECT v FROM t WHERE k = 1"}, {Op: wire.OpQuery, SQL: "SELECT ? AS n", Params: []any{int64(j)}}}}
			default:
				r = wire.Request{ID: uint32(j + 1), Op: wire.OpQuery, SQL: "SELECT v FROM t WHERE k = ?", Params: []any{int64(1)}}
			}
			rep, err := rawDo(conn, r)
			if err != nil || codeOf(rep) != "" {
				by.fail("bystander %d request %d: %v %v", i, j, rep, err)
				continue
			}
			if r.Op == wire.OpBatch {
				for _, res := range rep.Fields["results"].([]any) {
					if e, ok := res.(map[string]any)["error"]; ok {
						by.fail("bystander %d batch %d: %v", i, j, e)
					}
				}
			}
			by.ok.Add(1)
		}
	})
	wg.Wait()
	restore()

	t.Logf("SQLite: %d bystander requests ok, %d failed; %d victim rounds ok, %d failed; %d panics injected",
		by.ok.Load(), by.failed.Load(), vic.ok.Load(), vic.failed.Load(), injected.Load())
	if by.failed.Load() > 0 {
		t.Errorf("bystanders saw %d errors, want 0: %q", by.failed.Load(), by.first)
	}
	if vic.failed.Load() > 0 || vic.ok.Load() != victims*rounds {
		t.Errorf("victims: %d rounds as expected of %d; %q", vic.ok.Load(), victims*rounds, vic.first)
	}
	if want := int64(victims * rounds * 3); injected.Load() != want {
		t.Errorf("%d panics injected, want %d", injected.Load(), want)
	}
	after := panicsOf("main")
	if got := sum(after) - sum(before); got != uint64(injected.Load()) {
		t.Errorf("panics counted for backend main: %d (%v), want %d", got, after, injected.Load())
	}
	// The daemon serves on, and the connections of the transactions given
	// up were released: the pool (4) is not exhausted.
	c := dial(t, ts)
	for i := 0; i < 8; i++ {
		rep := c.ok(wire.Request{ID: uint32(100 + i), Op: wire.OpBegin})
		tx := toUint(rep.Fields["tx"])
		c.ok(wire.Request{ID: uint32(200 + i), Op: wire.OpExec, Tx: tx, SQL: "UPDATE t SET v = 'y' WHERE k = 1"})
		c.ok(wire.Request{ID: uint32(300 + i), Op: wire.OpCommit, Tx: tx})
	}
	checkPanicsReported(t, ts, ts.logs.String(), "main", "query")
}

// TestServer_PanicUnderLoad_LoopSQL: panics while a MariaDB or PostgreSQL
// server connection driven by the event loop reads its answer, among 16
// bystander clients: the request on that connection gets internal, the
// connection is closed (its server session ends) and never used again.
func TestServer_PanicUnderLoad_LoopSQL(t *testing.T) {
	dbs := loopDBs(t)
	for _, d := range dbs {
		t.Run(d.typ, func(t *testing.T) {
			// The pool logs through slog's default logger (tetherd makes it
			// the configured one).
			logs := &lockedBuffer{}
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
			defer slog.SetDefault(prev)
			ts := d.start(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 6, 2 })
			idSQL := map[string]string{"mysql": "SELECT CONNECTION_ID()", "postgres": "SELECT pg_backend_pid()"}[d.typ]
			var mu sync.Mutex
			panicked := map[int64]bool{} // server session ids of the connections that panicked
			var injected atomic.Int64
			restore := fault.Set(func(p fault.Point, detail string) {
				if p != fault.SQLConnRead || !strings.Contains(detail, boom) {
					return
				}
				f := strings.Fields(detail)
				id, err := strconv.ParseInt(f[len(f)-1], 10, 64)
				if err != nil {
					panic("test: no session id in " + detail)
				}
				mu.Lock()
				panicked[id] = true
				mu.Unlock()
				injected.Add(1)
				panic("injected by the test: " + detail)
			})
			defer restore()
			before := panicsOf("db")

			const bystanders, perBystander, victims, rounds = 16, 200, 4, 10
			var by, vic tally
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				clients(t, ts, victims, func(conn net.Conn, i int) {
					id := uint32(0)
					next := func() uint32 { id++; return id }
					for j := 0; j < rounds; j++ {
						rep, err := rawDo(conn, wire.Request{ID: next(), Op: wire.OpQuery, Backend: d.name, SQL: idSQL + " " + boom})
						if err != nil || codeOf(rep) != "internal" {
							vic.fail("query: %v %v", rep, err)
							return
						}
						if j%5 == 4 {
							// In a transaction: it is lost with its connection.
							rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpBegin, Backend: d.name})
							if err != nil || codeOf(rep) != "" {
								vic.fail("begin: %v %v", rep, err)
								return
							}
							tx := toUint(rep.Fields["tx"])
							rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpQuery, Backend: d.name, Tx: tx, SQL: "SELECT 1 " + boom})
							if err != nil || codeOf(rep) != "internal" {
								vic.fail("statement in tx: %v %v", rep, err)
								return
							}
							rep, err = rawDo(conn, wire.Request{ID: next(), Op: wire.OpQuery, Backend: d.name, Tx: tx, SQL: "SELECT 1"})
							if err != nil || codeOf(rep) != "tx_aborted" {
								vic.fail("statement after the panic in tx: %v %v, want tx_aborted", rep, err)
								return
							}
							rawDo(conn, wire.Request{ID: next(), Op: wire.OpRollback, Tx: tx})
						}
						vic.ok.Add(1)
					}
				})
			}()
			clients(t, ts, bystanders, func(conn net.Conn, i int) {
				for j := 0; j < perBystander; j++ {
					rep, err := rawDo(conn, wire.Request{ID: uint32(j + 1), Op: wire.OpQuery, Backend: d.name, SQL: idSQL})
					if err != nil || codeOf(rep) != "" {
						by.fail("bystander %d request %d: %v %v", i, j, rep, err)
						continue
					}
					by.ok.Add(1)
				}
			})
			wg.Wait()
			restore()
			t.Logf("%s: %d bystander requests ok, %d failed; %d victim rounds ok, %d failed; %d panics injected on %d connections",
				d.typ, by.ok.Load(), by.failed.Load(), vic.ok.Load(), vic.failed.Load(), injected.Load(), len(panicked))
			if by.failed.Load() > 0 {
				t.Errorf("bystanders saw %d errors, want 0: %q", by.failed.Load(), by.first)
			}
			if vic.failed.Load() > 0 || vic.ok.Load() != victims*rounds {
				t.Errorf("victims: %d rounds as expected of %d; %q", vic.ok.Load(), victims*rounds, vic.first)
			}
			wantInjected := int64(victims * (rounds + rounds/5))
			if injected.Load() != wantInjected || len(panicked) != int(wantInjected) {
				t.Errorf("%d panics injected on %d connections, want %d on as many", injected.Load(), len(panicked), wantInjected)
			}
			if got := panicsOf("db")["conn_read"] - before["conn_read"]; got != uint64(injected.Load()) {
				t.Errorf("panics counted for db conn_read: %d, want %d", got, injected.Load())
			}
			// Each connection that panicked was closed: its server session
			// ends.
			deadline := time.Now().Add(10 * time.Second)
			for {
				live, err := d.sessions(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				var still []int64
				for _, id := range live {
					if panicked[id] {
						still = append(still, id)
					}
				}
				if len(still) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server sessions of connections that panicked are still open after 10 s: %v", still)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// ... and never used again: no statement runs on one.
			var reused atomic.Int64
			clients(t, ts, 8, func(conn net.Conn, i int) {
				for j := 0; j < 50; j++ {
					rep, err := rawDo(conn, wire.Request{ID: uint32(j + 1), Op: wire.OpQuery, Backend: d.name, SQL: idSQL})
					if err != nil || codeOf(rep) != "" {
						by.fail("after: %v %v", rep, err)
						continue
					}
					if panicked[toInt64(rep.Fields["rows"].([]any)[0].([]any)[0])] {
						reused.Add(1)
					}
				}
			})
			if reused.Load() > 0 || by.failed.Load() > 0 {
				t.Errorf("after the load: %d statements ran on a connection that had panicked, %d failed", reused.Load(), by.failed.Load())
			}
			checkPanicsReported(t, ts, logs.String(), "db", "conn_read")
		})
	}
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case int32:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return -1
}
