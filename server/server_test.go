package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlite"
	"github.com/tether-php/tether/internal/fault"
	"github.com/tether-php/tether/server"
	"github.com/tether-php/tether/wire"
)

// slowSQL takes seconds on SQLite and honours cancellation.
const slowSQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c"

// reaching returns a channel that is closed when a statement with this SQL
// reaches the database driver (fault.DriverCall), that is, once the server
// has admitted it and runs it: the event a test waits for before it acts on a
// request in flight. The hook is removed when the test ends.
func reaching(t testing.TB, sql string) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	restore := fault.Set(func(p fault.Point, detail string) {
		if p == fault.DriverCall && detail == sql {
			once.Do(func() { close(ch) })
		}
	})
	t.Cleanup(restore)
	return ch
}

// await waits for ch to be closed, failing the test after 10 s.
func await(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// eventually polls cond until it holds, failing the test after 10 s. Only
// for a state the server signals no event for (a count in its Snapshot).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type testServer struct {
	*server.Server
	cfg    tether.Config
	socket string
	dbPath string
	served chan error
	once   sync.Once
	logs   *lockedBuffer // what the server logged (warnings and up)
}

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines and the
// test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServer runs a tetherd with a SQLite backend "main" on a temp socket.
// tweak may add backends: each is a SQLite database.
func startServer(t *testing.T, tweak func(*tether.Config)) *testServer {
	t.Helper()
	return startServerWith(t, tweak, nil)
}

// startServerWith is startServer with some backends given as they are
// (fault injection): their configs only name them.
func startServerWith(t testing.TB, tweak func(*tether.Config), given map[string]tether.Backend) *testServer {
	t.Helper()
	dir := t.TempDir()
	cfg := tether.DefaultConfig()
	cfg.Server.Socket = filepath.Join(dir, "t.sock")
	dbPath := filepath.Join(dir, "t.db")
	cfg.Backends = map[string]tether.BackendConfig{"main": tether.DefaultBackendConfig("sqlite", dbPath)}
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	backends := map[string]tether.Backend{}
	for name, bc := range cfg.Backends {
		if b, ok := given[name]; ok {
			backends[name] = b
			continue
		}
		b, err := sqlite.New(bc)
		if err != nil {
			t.Fatal(err)
		}
		backends[name] = b
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := server.New(cfg, backends, log)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Open(ctx); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, cfg: cfg, socket: cfg.Server.Socket, dbPath: dbPath, served: make(chan error, 1), logs: logs}
	go func() { ts.served <- srv.Serve() }()
	t.Cleanup(func() { ts.shutdown(t, 5*time.Second) })
	return ts
}

func (ts *testServer) shutdown(t testing.TB, grace time.Duration) {
	ts.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := ts.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-ts.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// client is a raw protocol client.
type client struct {
	t    testing.TB
	conn net.Conn
}

func dial(t testing.TB, ts *testServer) *client {
	t.Helper()
	c, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, conn: c}
}

// dialInGoroutine is dial for a goroutine other than the test's: it reports
// a failure with t.Error and returns nil. The caller closes the connection.
func dialInGoroutine(t testing.TB, ts *testServer) *client {
	c, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Error(err)
		return nil
	}
	return &client{t: t, conn: c}
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) send(r wire.Request) {
	c.t.Helper()
	b, start := wire.BeginFrame(nil)
	b = wire.EndFrame(wire.AppendRequest(b, &r), start)
	c.sendRaw(b)
}

// recv reads one reply, or returns nil at EOF.
func (c *client) recv() *wire.Reply {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var h [4]byte
	if _, err := io.ReadFull(c.conn, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
			return nil
		}
		c.t.Fatalf("read header: %v", err)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(c.conn, p); err != nil {
		c.t.Fatalf("read payload: %v", err)
	}
	r, err := wire.DecodeReply(p)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c *client) do(r wire.Request) *wire.Reply {
	c.t.Helper()
	c.send(r)
	rep := c.recv()
	if rep == nil {
		c.t.Fatalf("connection closed instead of a reply to %s", r.Op)
	}
	if rep.ID != r.ID {
		c.t.Fatalf("reply id %d to request %d", rep.ID, r.ID)
	}
	return rep
}

func (c *client) ok(r wire.Request) *wire.Reply {
	c.t.Helper()
	rep := c.do(r)
	if e := rep.Error(); e != nil {
		c.t.Fatalf("%s %q: %v", r.Op, r.SQL, e)
	}
	return rep
}

func (c *client) expectClosed() {
	c.t.Helper()
	if rep := c.recv(); rep != nil {
		c.t.Fatalf("expected the connection to be closed, got %v", rep.Fields)
	}
}

func errCode(t *testing.T, rep *wire.Reply, want tether.Code) map[string]any {
	t.Helper()
	e := rep.Error()
	if e == nil || e["code"] != string(want) {
		t.Fatalf("want error %s, got %v", want, rep.Fields)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error %s without a message", want)
	}
	return e
}

func count(t *testing.T, c *client, table string) any {
	t.Helper()
	rep := c.ok(wire.Request{ID: 900, Op: wire.OpQuery, SQL: "SELECT COUNT(*) FROM " + table})
	return rep.Fields["rows"].([]any)[0].([]any)[0]
}

func TestServer_Ping(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	t.Run("Pipelined", func(t *testing.T) {
		var b []byte
		for i := 1; i <= 200; i++ {
			var start int
			b, start = wire.BeginFrame(b)
			b = wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: uint32(i), Op: wire.OpPing}), start)
		}
		c.sendRaw(b)
		seen := map[uint32]bool{}
		for i := 0; i < 200; i++ {
			rep := c.recv()
			if rep == nil || rep.Error() != nil {
				t.Fatalf("reply %d: %v", i, rep)
			}
			seen[rep.ID] = true
		}
		if len(seen) != 200 {
			t.Fatalf("%d distinct ids", len(seen))
		}
	})
	t.Run("FrameSplitAcrossWrites", func(t *testing.T) {
		b, start := wire.BeginFrame(nil)
		b = wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: 7, Op: wire.OpPing}), start)
		for i := range b {
			c.sendRaw(b[i : i+1])
			time.Sleep(time.Millisecond)
		}
		if rep := c.recv(); rep == nil || rep.ID != 7 {
			t.Fatalf("reply %v", rep)
		}
	})
	t.Run("Hello", func(t *testing.T) {
		rep := c.ok(wire.Request{ID: 8, Op: wire.OpHello})
		if rep.Fields["server"] != "tetherd" || fmt.Sprint(rep.Fields["protocol"]) != "1" {
			t.Fatalf("hello %v", rep.Fields)
		}
	})
}

func TestServer_Statements(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"})
	rep := c.ok(wire.Request{ID: 2, Op: wire.OpExec, SQL: "INSERT INTO users (name) VALUES (?), (?)", Params: []any{"ada", "bob"}})
	if fmt.Sprint(rep.Fields["affected"]) != "2" || fmt.Sprint(rep.Fields["insert_id"]) != "2" {
		t.Fatalf("exec reply %v", rep.Fields)
	}
	rep = c.ok(wire.Request{ID: 3, Op: wire.OpQuery, Backend: "main", SQL: "SELECT id, name FROM users WHERE id = ?", Params: []any{int64(2)}})
	if fmt.Sprint(rep.Fields["columns"]) != "[id name]" || fmt.Sprint(rep.Fields["rows"]) != "[[2 bob]]" {
		t.Fatalf("query reply %v", rep.Fields)
	}
}

func TestServer_BadInput(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		c.Server.MaxFrameBytes = 4096
		c.Server.MaxResultBytes = 2048
	})
	// A bystander connection that must be served throughout.
	bystander := dial(t, ts)
	bystander.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"})
	stillServed := func(t *testing.T) {
		t.Helper()
		bystander.ok(wire.Request{ID: 2, Op: wire.OpPing})
		bystander.ok(wire.Request{ID: 3, Op: wire.OpQuery, SQL: "SELECT 1"})
	}

	closing := []struct {
		name  string
		bytes []byte
		code  tether.Code
	}{
		{"MalformedFrame", []byte{0, 0, 0, 3, 0xc1, 0xc1, 0xc1}, tether.CodeBadFrame},
		{"NotAMap", []byte{0, 0, 0, 1, 0x01}, tether.CodeBadFrame},
		{"TrailingBytes", []byte{0, 0, 0, 2, 0x80, 0x80}, tether.CodeBadFrame},
		{"EmptyFrame", []byte{0, 0, 0, 0}, tether.CodeBadFrame},
		{"OverLimit", []byte{0x7f, 0xff, 0xff, 0xff}, tether.CodeTooLarge},
		{"JustOverLimit", binary.BigEndian.AppendUint32(nil, 4097), tether.CodeTooLarge},
	}
	for _, tc := range closing {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts)
			c.sendRaw(tc.bytes)
			rep := c.recv()
			if rep == nil {
				t.Fatal("closed without an error reply")
			}
			if rep.ID != 0 {
				t.Fatalf("frame error with id %d", rep.ID)
			}
			errCode(t, rep, tc.code)
			c.expectClosed()
			stillServed(t)
		})
	}

	t.Run("TruncatedFrameThenClose", func(t *testing.T) {
		c := dial(t, ts)
		c.sendRaw([]byte{0, 0, 0, 100, 0x85, 0xa2})
		c.conn.Close()
		stillServed(t)
	})

	open := []struct {
		name string
		req  wire.Request
		raw  []byte
		code tether.Code
		id   uint32
	}{
		{name: "WrongFieldType", raw: mapPayload(map[string]any{"id": 10, "op": "query", "sql": 5}), code: tether.CodeBadRequest, id: 10},
		{name: "MissingID", raw: mapPayload(map[string]any{"op": "ping"}), code: tether.CodeBadRequest, id: 0},
		{name: "UnknownField", raw: mapPayload(map[string]any{"id": 11, "op": "ping", "sqll": "x"}), code: tether.CodeBadRequest, id: 11},
		{name: "UnknownOp", req: wire.Request{ID: 12, OpName: "frobnicate"}, code: tether.CodeUnknownOp, id: 12},
		{name: "UnknownBackend", req: wire.Request{ID: 13, Op: wire.OpQuery, Backend: "nope", SQL: "SELECT 1"}, code: tether.CodeUnknownBackend, id: 13},
		{name: "MissingSQL", req: wire.Request{ID: 14, Op: wire.OpQuery}, code: tether.CodeBadRequest, id: 14},
		{name: "TooManyParams", req: wire.Request{ID: 15, Op: wire.OpQuery, SQL: "SELECT ?", Params: []any{int64(1), int64(2)}}, code: tether.CodeBadRequest, id: 15},
		{name: "TooFewParams", req: wire.Request{ID: 16, Op: wire.OpExec, SQL: "INSERT INTO t (id, v) VALUES (?, ?)", Params: []any{int64(1)}}, code: tether.CodeBadRequest, id: 16},
		{name: "SQLError", req: wire.Request{ID: 17, Op: wire.OpQuery, SQL: "SELECT * FROM nowhere"}, code: tether.CodeBackendError, id: 17},
		{name: "ConstraintViolation", req: wire.Request{ID: 18, Op: wire.OpExec, SQL: "INSERT INTO t (id, v) VALUES (1, 'a'), (1, 'b')"}, code: tether.CodeBackendError, id: 18},
		{name: "UnknownTx", req: wire.Request{ID: 19, Op: wire.OpCommit, Tx: 999}, code: tether.CodeUnknownTx, id: 19},
		{name: "CommitWithoutTx", req: wire.Request{ID: 20, Op: wire.OpCommit}, code: tether.CodeBadRequest, id: 20},
		{name: "ResultTooLarge", req: wire.Request{ID: 21, Op: wire.OpQuery, SQL: "SELECT ?", Params: []any{strings.Repeat("x", 3000)}}, code: tether.CodeTooLarge, id: 21},
		{name: "BatchWithoutOps", req: wire.Request{ID: 22, Op: wire.OpBatch}, code: tether.CodeBadRequest, id: 22},
		// docs/protocol.md promises bad_request, connection kept, for these too.
		{name: "JoinSideNotAMap", raw: mapPayload(map[string]any{"id": 23, "op": "join", "left": "users"}), code: tether.CodeBadRequest, id: 23},
		{name: "BatchOpNotAMap", raw: msgp.AppendString(msgp.AppendArrayHeader(msgp.AppendString(msgp.AppendString(msgp.AppendString(
			msgp.AppendInt(msgp.AppendString(msgp.AppendMapHeader(nil, 3), "id"), 24), "op"), "batch"), "ops"), 1), "ping"), code: tether.CodeBadRequest, id: 24},
	}
	c := dial(t, ts)
	for _, tc := range open {
		t.Run(tc.name, func(t *testing.T) {
			if tc.raw != nil {
				b, start := wire.BeginFrame(nil)
				c.sendRaw(wire.EndFrame(append(b, tc.raw...), start))
			} else {
				c.send(tc.req)
			}
			rep := c.recv()
			if rep == nil {
				t.Fatal("connection closed")
			}
			if rep.ID != tc.id {
				t.Fatalf("reply id %d, want %d", rep.ID, tc.id)
			}
			e := errCode(t, rep, tc.code)
			if tc.code == tether.CodeBackendError && e["backend_code"] == nil {
				t.Fatalf("backend error without backend_code: %v", e)
			}
			// The same connection goes on working.
			c.ok(wire.Request{ID: 99, Op: wire.OpPing})
			stillServed(t)
		})
	}
	if got := count(t, c, "t"); fmt.Sprint(got) != "0" {
		t.Fatalf("a failed statement left %v rows", got)
	}
}

// mapPayload encodes a request map by hand, for requests AppendRequest cannot
// express (wrong types, missing fields).
func mapPayload(m map[string]any) []byte {
	b := []byte{0x80 | byte(len(m))}
	for k, v := range m {
		b = append(b, 0xa0|byte(len(k)))
		b = append(b, k...)
		switch x := v.(type) {
		case int:
			b = append(b, byte(x))
		case string:
			b = append(b, 0xa0|byte(len(x)))
			b = append(b, x...)
		}
	}
	return b
}

func TestServer_Transactions(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		c.Server.TxIdleTimeout = tether.Duration(300 * time.Millisecond)
		bc := c.Backends["main"]
		bc.MaxConns, bc.MinConns = 2, 1
		bc.AcquireTimeout = tether.Duration(3 * time.Second)
		c.Backends["main"] = bc
	})
	setup := dial(t, ts)
	setup.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE acct (id INTEGER PRIMARY KEY, v TEXT)"})

	begin := func(c *client) uint64 {
		t.Helper()
		rep := c.ok(wire.Request{ID: 2, Op: wire.OpBegin})
		return toUint(rep.Fields["tx"])
	}

	t.Run("CommitAndRollback", func(t *testing.T) {
		c := dial(t, ts)
		tx := begin(c)
		c.ok(wire.Request{ID: 3, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO acct (v) VALUES ('kept')"})
		c.ok(wire.Request{ID: 4, Op: wire.OpCommit, Tx: tx})
		errCode(t, c.do(wire.Request{ID: 5, Op: wire.OpCommit, Tx: tx}), tether.CodeUnknownTx)
		tx = begin(c)
		c.ok(wire.Request{ID: 6, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO acct (v) VALUES ('dropped')"})
		c.ok(wire.Request{ID: 7, Op: wire.OpRollback, Tx: tx})
		if got := count(t, c, "acct"); fmt.Sprint(got) != "1" {
			t.Fatalf("%v rows", got)
		}
	})

	t.Run("PipelinedInOrder", func(t *testing.T) {
		c := dial(t, ts)
		tx := begin(c)
		for i := 0; i < 20; i++ {
			c.send(wire.Request{ID: uint32(100 + i), Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO acct (v) VALUES (?)", Params: []any{fmt.Sprint(i)}})
		}
		c.send(wire.Request{ID: 200, Op: wire.OpRollback, Tx: tx})
		for i := 0; i <= 20; i++ {
			rep := c.recv()
			if rep.Error() != nil || rep.ID != uint32(100+i) && !(i == 20 && rep.ID == 200) {
				t.Fatalf("reply %d: id %d %v", i, rep.ID, rep.Fields)
			}
		}
	})

	t.Run("HandleBelongsToItsConnection", func(t *testing.T) {
		a, b := dial(t, ts), dial(t, ts)
		tx := begin(a)
		errCode(t, b.do(wire.Request{ID: 8, Op: wire.OpExec, Tx: tx, SQL: "DELETE FROM acct"}), tether.CodeUnknownTx)
		a.ok(wire.Request{ID: 9, Op: wire.OpRollback, Tx: tx})
	})

	t.Run("ClientDisconnectsMidTransaction", func(t *testing.T) {
		before := count(t, setup, "acct")
		for i := 0; i < 3; i++ { // more times than the pool has connections
			c := dial(t, ts)
			tx := begin(c)
			c.ok(wire.Request{ID: 10, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO acct (v) VALUES ('orphan')"})
			c.conn.Close()
		}
		// Each orphan's connection was rolled back and returned: a new
		// transaction can still begin, and none of the rows is there.
		c := dial(t, ts)
		tx := begin(c)
		c.ok(wire.Request{ID: 11, Op: wire.OpRollback, Tx: tx})
		if got := count(t, c, "acct"); got != before {
			t.Fatalf("orphaned transactions left rows: %v, before %v", got, before)
		}
	})

	t.Run("IdleTimeout", func(t *testing.T) {
		c := dial(t, ts)
		reaped := ts.Snapshot().Rollbacks["idle_timeout"]
		tx := begin(c)
		c.ok(wire.Request{ID: 12, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO acct (v) VALUES ('idle')"})
		// The reaper signals no event: its count of rollbacks says.
		eventually(t, "the idle transaction to be rolled back", func() bool { return ts.Snapshot().Rollbacks["idle_timeout"] > reaped })
		e := errCode(t, c.do(wire.Request{ID: 13, Op: wire.OpCommit, Tx: tx}), tether.CodeTxAborted)
		if e["retry"] != true {
			t.Fatalf("tx_aborted should be retryable: %v", e)
		}
		if got := count(t, c, "acct"); fmt.Sprint(got) != "1" {
			t.Fatalf("an aborted transaction's row is visible: %v rows", got)
		}
	})
}

func toUint(v any) uint64 {
	switch x := v.(type) {
	case uint64:
		return x
	case int64:
		return uint64(x)
	}
	return 0
}

func TestServer_DisconnectMidRequest(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		bc := c.Backends["main"]
		bc.MaxConns = 1
		bc.AcquireTimeout = tether.Duration(5 * time.Second)
		c.Backends["main"] = bc
	})
	a := dial(t, ts)
	running := reaching(t, slowSQL)
	a.send(wire.Request{ID: 1, Op: wire.OpQuery, SQL: slowSQL})
	await(t, running, "the slow query to reach SQLite")
	a.conn.Close()
	// The abandoned query is canceled, freeing the only connection.
	b := dial(t, ts)
	start := time.Now()
	b.ok(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT 1"})
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("the abandoned query held the connection for %s", el)
	}
}

func TestServer_PoolExhausted(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		bc := c.Backends["main"]
		bc.MaxConns, bc.MinConns = 1, 1
		bc.AcquireTimeout = tether.Duration(100 * time.Millisecond)
		c.Backends["main"] = bc
	})
	a, b := dial(t, ts), dial(t, ts)
	tx := toUint(a.ok(wire.Request{ID: 1, Op: wire.OpBegin}).Fields["tx"])
	e := errCode(t, b.do(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT 1"}), tether.CodeBusy)
	if e["retry"] != true {
		t.Fatalf("busy should be retryable: %v", e)
	}
	b.ok(wire.Request{ID: 3, Op: wire.OpPing}) // answered without a backend
	a.ok(wire.Request{ID: 4, Op: wire.OpCommit, Tx: tx})
	b.ok(wire.Request{ID: 5, Op: wire.OpQuery, SQL: "SELECT 1"})
}

func TestServer_Deadlines(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	start := time.Now()
	errCode(t, c.do(wire.Request{ID: 1, Op: wire.OpQuery, SQL: slowSQL, TimeoutMS: 200}), tether.CodeTimeout)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("timeout after %s", el)
	}
	c.ok(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT 1"})
}

func TestServer_Batch(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	rep := c.ok(wire.Request{ID: 1, Op: wire.OpBatch, Ops: []wire.Request{
		{Op: wire.OpPing},
		{Op: wire.OpQuery, SQL: "SELECT ? AS n", Params: []any{int64(5)}},
		{Op: wire.OpQuery, SQL: "SELECT * FROM nowhere"},
		{Op: wire.OpQuery, Backend: "nope", SQL: "SELECT 1"},
		{Op: wire.OpBegin},
		{Op: wire.OpExec, SQL: "CREATE TABLE b (x INTEGER)"},
		{Op: wire.OpQuery, SQL: slowSQL, TimeoutMS: 150},
	}})
	results := rep.Fields["results"].([]any)
	if len(results) != 7 {
		t.Fatalf("%d results", len(results))
	}
	r := func(i int) map[string]any { return results[i].(map[string]any) }
	codeOf := func(i int) any {
		if e, ok := r(i)["error"].(map[string]any); ok {
			return e["code"]
		}
		return nil
	}
	if r(0)["ok"] != true {
		t.Errorf("ping: %v", r(0))
	}
	if fmt.Sprint(r(1)["rows"]) != "[[5]]" {
		t.Errorf("query: %v", r(1))
	}
	for i, want := range map[int]string{2: "backend_error", 3: "unknown_backend", 4: "bad_request", 6: "timeout"} {
		if codeOf(i) != want {
			t.Errorf("result %d: %v, want %s", i, r(i), want)
		}
	}
	if _, ok := r(5)["affected"]; !ok {
		t.Errorf("exec: %v", r(5))
	}

	t.Run("BatchDeadline", func(t *testing.T) {
		start := time.Now()
		rep := c.ok(wire.Request{ID: 2, Op: wire.OpBatch, TimeoutMS: 200, Ops: []wire.Request{
			{Op: wire.OpQuery, SQL: slowSQL}, {Op: wire.OpQuery, SQL: "SELECT 1"},
		}})
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("batch deadline honoured after %s", el)
		}
		res := rep.Fields["results"].([]any)
		if e := res[0].(map[string]any)["error"].(map[string]any); e["code"] != "timeout" {
			t.Fatalf("slow op: %v", res[0])
		}
		if _, ok := res[1].(map[string]any)["rows"]; !ok {
			t.Fatalf("fast op: %v", res[1])
		}
	})
}

func TestServer_TCP(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		c.Server.TCPListen = "127.0.0.1:0"
		c.Server.TCPToken = "s3cret"
	})
	dialTCP := func() *client {
		conn, err := net.Dial("tcp", ts.TCPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return &client{t: t, conn: conn}
	}
	t.Run("NoHello", func(t *testing.T) {
		c := dialTCP()
		errCode(t, c.do(wire.Request{ID: 1, Op: wire.OpPing}), tether.CodeUnauthorized)
		c.expectClosed()
	})
	t.Run("WrongToken", func(t *testing.T) {
		c := dialTCP()
		errCode(t, c.do(wire.Request{ID: 1, Op: wire.OpHello, Token: "guess"}), tether.CodeUnauthorized)
		c.expectClosed()
	})
	t.Run("Token", func(t *testing.T) {
		c := dialTCP()
		c.ok(wire.Request{ID: 1, Op: wire.OpHello, Token: "s3cret"})
		c.ok(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT 1"})
	})
	t.Run("UnixNeedsNoHello", func(t *testing.T) {
		dial(t, ts).ok(wire.Request{ID: 1, Op: wire.OpPing})
	})
	t.Run("InvalidFrameBeforeHelloCloses", func(t *testing.T) {
		// Not answered bad_request and kept open: closed at the first frame
		// that is not a valid hello.
		c := dialTCP()
		c.sendRaw(frame(msgp.AppendString(nil, "not a map")))
		errCode(t, c.recv(), tether.CodeUnauthorized)
		c.expectClosed()
		c = dialTCP()
		c.sendRaw(frame(mapPayload(map[string]any{"id": 1, "op": "hello", "token": 7})))
		errCode(t, c.recv(), tether.CodeUnauthorized)
		c.expectClosed()
	})
	t.Run("LargeFrameBeforeHelloCloses", func(t *testing.T) {
		c := dialTCP()
		c.sendRaw(binary.BigEndian.AppendUint32(nil, 1<<20)) // announces 1 MiB: refused from its prefix
		errCode(t, c.recv(), tether.CodeTooLarge)
		c.expectClosed()
	})
}

// frame prefixes a payload with its length.
func frame(p []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...) }

func TestServer_Shutdown(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.TxIdleTimeout = tether.Duration(time.Minute) })
	setup := dial(t, ts)
	setup.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE s (v TEXT)"})

	inTx := dial(t, ts)
	tx := toUint(inTx.ok(wire.Request{ID: 2, Op: wire.OpBegin}).Fields["tx"])
	inTx.ok(wire.Request{ID: 3, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO s VALUES ('uncommitted')"})

	slow := dial(t, ts)
	// In flight when the shutdown starts; it must be allowed to finish.
	const slowCount = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) SELECT count(*) FROM c"
	running := reaching(t, slowCount)
	slow.send(wire.Request{ID: 4, Op: wire.OpQuery, SQL: slowCount})
	await(t, running, "the query to reach SQLite")

	const grace = 500 * time.Millisecond
	start := time.Now()
	done := make(chan struct{})
	go func() { ts.shutdown(t, grace); close(done) }()

	rep := slow.recv()
	if rep == nil || rep.Error() != nil || fmt.Sprint(rep.Fields["rows"]) != "[[300000]]" {
		t.Fatalf("in-flight request during drain: %v", rep)
	}
	// A new client is refused at once, not left waiting in a backlog.
	dialStart := time.Now()
	if c, err := net.DialTimeout("unix", ts.socket, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("a new client was accepted while draining")
	}
	if el := time.Since(dialStart); el > 100*time.Millisecond {
		t.Fatalf("a new client waited %s to be refused", el)
	}
	<-done
	if el := time.Since(start); el < grace-50*time.Millisecond {
		t.Fatalf("shutdown took %s: it did not give the open transaction its grace period (%s)", el, grace)
	}
	// The open transaction was rolled back: reopen the database and look.
	if n := sqliteCount(t, ts.dbPath, "s"); n != 0 {
		t.Fatalf("after shutdown: %d rows, want the transaction rolled back", n)
	}
}

// TestServer_ShutdownLetsTransactionsCommit: a transaction open at SIGTERM,
// with nothing in flight, may still commit within the grace period, and the
// shutdown does not wait longer than it has to.
func TestServer_ShutdownLetsTransactionsCommit(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE s (v TEXT)"})
	tx := toUint(c.ok(wire.Request{ID: 2, Op: wire.OpBegin}).Fields["tx"])
	c.ok(wire.Request{ID: 3, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO s VALUES ('committed while draining')"})
	start := time.Now()
	done := make(chan struct{})
	go func() { ts.shutdown(t, 10*time.Second); close(done) }()
	// The server signals no event when it starts draining: its snapshot says.
	eventually(t, "the server to drain", func() bool { return ts.Snapshot().Draining })
	if rep := c.do(wire.Request{ID: 4, Op: wire.OpBegin}); rep.Error() == nil {
		t.Fatal("a new transaction began while draining")
	}
	c.ok(wire.Request{ID: 5, Op: wire.OpCommit, Tx: tx})
	<-done
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("shutdown took %s after the last transaction committed", el)
	}
	if n := sqliteCount(t, ts.dbPath, "s"); n != 1 {
		t.Fatalf("after shutdown: %d rows, want the commit kept", n)
	}
}

// openSQLite opens the SQLite database at path directly, as another program
// would (Tether does not see what it does), until the test ends.
func openSQLite(t *testing.T, path string) *sqlite.Backend {
	t.Helper()
	b, _ := sqlite.New(tether.DefaultBackendConfig("sqlite", path))
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func sqliteCount(t *testing.T, path, table string) int64 {
	t.Helper()
	r, err := openSQLite(t, path).Query(context.Background(), tether.Statement{SQL: "SELECT COUNT(*) FROM " + table})
	if err != nil {
		t.Fatal(err)
	}
	return r.Rows[0][0].(int64)
}

func TestServer_KeyAPI(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT)"})
	for i := 1; i <= 5; i++ {
		rep := c.ok(wire.Request{ID: 2, Op: wire.OpPut, Table: "users", Row: map[string]any{"id": int64(i), "name": fmt.Sprint("u", i)}})
		if fmt.Sprint(rep.Fields["affected"]) != "1" {
			t.Fatalf("put: %v", rep.Fields)
		}
	}
	rep := c.ok(wire.Request{ID: 3, Op: wire.OpGet, Table: "users", Key: []any{int64(3)}, Columns: []string{"name"}})
	if fmt.Sprint(rep.Fields["columns"], rep.Fields["rows"]) != "[name] [[u3]]" {
		t.Fatalf("get: %v", rep.Fields)
	}
	rep = c.ok(wire.Request{ID: 4, Op: wire.OpMultiGet, Table: "users", Keys: [][]any{{int64(5)}, {int64(9)}, {"1"}}, Columns: []string{"name"}})
	if fmt.Sprint(rep.Fields["rows"]) != "[[u5] <nil> [u1]]" {
		t.Fatalf("multi_get: %v", rep.Fields)
	}
	rep = c.ok(wire.Request{ID: 5, Op: wire.OpScan, Table: "users", Limit: 2, Columns: []string{"id"}})
	cursor, _ := rep.Fields["cursor"].([]byte)
	if fmt.Sprint(rep.Fields["rows"]) != "[[1] [2]]" || cursor == nil {
		t.Fatalf("scan: %v", rep.Fields)
	}
	rep = c.ok(wire.Request{ID: 6, Op: wire.OpScan, Table: "users", Limit: 10, Cursor: cursor, Columns: []string{"id"}})
	if fmt.Sprint(rep.Fields["rows"]) != "[[3] [4] [5]]" || rep.Fields["cursor"] != nil {
		t.Fatalf("scan from the cursor: %v", rep.Fields)
	}
	rep = c.ok(wire.Request{ID: 7, Op: wire.OpDelete, Table: "users", Key: []any{int64(2)}})
	if fmt.Sprint(rep.Fields["affected"]) != "1" {
		t.Fatalf("delete: %v", rep.Fields)
	}

	errCode(t, c.do(wire.Request{ID: 8, Op: wire.OpGet, Table: "nope", Key: []any{int64(1)}}), tether.CodeUnknownTable)
	errCode(t, c.do(wire.Request{ID: 9, Op: wire.OpGet, Key: []any{int64(1)}}), tether.CodeBadRequest)
	errCode(t, c.do(wire.Request{ID: 10, Op: wire.OpGet, Table: "users"}), tether.CodeBadRequest)
	errCode(t, c.do(wire.Request{ID: 11, Op: wire.OpReadRows, Table: "users", Prefix: []any{"x"}}), tether.CodeUnsupported)
	errCode(t, c.do(wire.Request{ID: 12, Op: wire.OpQuery, SQL: "SELECT 1", Limit: 10}), tether.CodeUnsupported)

	// A batch mixes the key API with SQL, in request order.
	rep = c.ok(wire.Request{ID: 13, Op: wire.OpBatch, Ops: []wire.Request{
		{Op: wire.OpGet, Table: "users", Key: []any{int64(1)}, Columns: []string{"name"}},
		{Op: wire.OpQuery, SQL: "SELECT COUNT(*) FROM users WHERE id <= 5"}, // ops run concurrently: not the put below
		{Op: wire.OpPut, Table: "users", Row: map[string]any{"id": int64(6), "name": "u6"}},
		{Op: wire.OpGet, Table: "nope", Key: []any{int64(1)}},
	}})
	res := rep.Fields["results"].([]any)
	if fmt.Sprint(res[0].(map[string]any)["rows"]) != "[[u1]]" || fmt.Sprint(res[1].(map[string]any)["rows"]) != "[[4]]" ||
		fmt.Sprint(res[2].(map[string]any)["affected"]) != "1" || res[3].(map[string]any)["error"].(map[string]any)["code"] != "unknown_table" {
		t.Fatalf("batch: %v", res)
	}
}
