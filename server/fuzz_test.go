package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/wire"
)

// FuzzServeFrame feeds arbitrary payloads through a running Server's request
// handling (its event loop, OnData, serveFrame and all they hand work to),
// over a real socket, with in-process fake backends (fault injection: small
// results, errors, slowness, as the request's own text asks).
//
// The input is a mode and one frame's payload. Mode bit 0: before the frame,
// the connection begins transaction 1 on "main" (driven by the loop, as
// MySQL and PostgreSQL are) and 2 on "kv" (run by goroutines); bit 1: the
// connection is TCP, and the frame is its first (the hello check) unless bit
// 0 sent a hello first.
//
// The property: no panic; the frame gets exactly one reply, with the id the
// protocol says, and the connection is closed after it exactly when the
// protocol says; no reply is internal; the server answers a ping afterwards;
// once the connection is closed nothing stays in flight and no transaction
// stays open, in the server or in a backend.
func FuzzServeFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.mode, s.payload)
	}
	fs := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, mode uint8, payload []byte) {
		fs.serve(t, mode, payload)
	})
}

const (
	fuzzToken    = "fuzz-token"
	fuzzMaxFrame = 16 << 10
	fuzzWait     = 10 * time.Second // for a reply, a close, a quiet server: longer is a lock-up
	fuzzPingID   = math.MaxUint32
)

// fuzzServer is a Server on a Unix socket and a TCP port, with backends
// "main" (fakeLoopBackend), "kv" (fakeBackend) and "none" (no capability).
type fuzzServer struct {
	s          *Server
	socket     string
	tcp        string
	main       *fakeLoopBackend
	kv         *fakeBackend
	goroutines int // after start, with the server idle
}

func startFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	cfg := tether.DefaultConfig()
	cfg.Server.Socket = filepath.Join(tb.TempDir(), "f.sock")
	cfg.Server.TCPListen, cfg.Server.TCPToken = "127.0.0.1:0", fuzzToken
	cfg.Server.MaxFrameBytes = fuzzMaxFrame
	cfg.Server.MaxResultBytes = 16 << 10
	cfg.Server.DefaultTimeout = tether.Duration(2 * time.Second)
	cfg.Backends = map[string]tether.BackendConfig{
		"main": tether.DefaultBackendConfig("mysql", "fake"),
		"kv":   tether.DefaultBackendConfig("sqlite", "fake"),
		"none": tether.DefaultBackendConfig("sqlite", "fake"),
	}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	fs := &fuzzServer{socket: cfg.Server.Socket, main: newFakeLoopBackend(), kv: &fakeBackend{}}
	backends := map[string]tether.Backend{"main": fs.main, "kv": fs.kv, "none": bareBackend{}}
	fs.s = New(cfg, backends, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fs.s.Open(ctx); err != nil {
		tb.Fatal(err)
	}
	fs.tcp = fs.s.TCPAddr()
	served := make(chan error, 1)
	go func() { served <- fs.s.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := fs.s.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			tb.Errorf("serve: %v", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			tb.Errorf("shutdown of an idle server took %s", took)
		}
	})
	fs.goroutines = runtime.NumGoroutine()
	return fs
}

// serve runs one input; see FuzzServeFrame.
func (fs *fuzzServer) serve(t *testing.T, mode uint8, payload []byte) {
	fs.quiesce(t) // after an input that failed
	tcp, setup := mode&2 != 0, mode&1 != 0
	c := fs.dial(t, tcp)
	defer func() { c.close() }() // c is replaced after a close
	if setup {
		if tcp {
			c.roundTrip(t, wire.Request{ID: 1, Op: wire.OpHello, Token: fuzzToken})
		}
		// Transaction ids are the server's count: with none open, it may
		// start again, so that inputs can name transactions 1 and 2.
		fs.s.nextTx.Store(0)
		for i, backend := range []string{"main", "kv"} {
			rep := c.roundTrip(t, wire.Request{ID: uint32(10 + i), Op: wire.OpBegin, Backend: backend})
			if tx := rep.Fields["tx"]; fmt.Sprint(tx) != fmt.Sprint(i+1) {
				t.Fatalf("begin on %s: got %v, want tx %d", backend, rep.Fields, i+1)
			}
		}
	}
	want := expectReply(payload, tcp && !setup)

	b, st := wire.BeginFrame(nil)
	b = wire.EndFrame(append(b, payload...), st)
	if err := c.write(b); err != nil && !want.closes {
		t.Fatalf("write the frame: %v", err)
	}
	rep, err := c.read()
	switch {
	case err == nil:
		want.check(t, rep)
	case want.closes && tcp && !isTimeout(err):
		// The server closed a TCP connection with input unread: the reset
		// may discard its last reply on the way.
	default:
		t.Fatalf("no reply to the frame (want id %d%s): %v", want.id, want.closesText(), err)
	}
	if want.closes {
		if rep, err := c.read(); err == nil {
			t.Fatalf("the connection stays open after a frame that closes it; then got reply %d %v", rep.ID, rep.Fields)
		} else if isTimeout(err) {
			t.Fatalf("the connection was not closed after a frame that closes it: %v", err)
		}
		c.close()
		c = fs.dial(t, false)
	}
	rep = c.roundTrip(t, wire.Request{ID: fuzzPingID, Op: wire.OpPing})
	if len(rep.Fields) != 0 {
		t.Fatalf("ping after the frame: %v", rep.Fields)
	}
	c.close()
	fs.quiesce(t) // here, so that an input that leaves something behind is the one that fails
}

// quiesce waits until the connections of earlier inputs are fully gone:
// nothing in flight, no transaction open in the server or the backends, no
// goroutines piling up.
func (fs *fuzzServer) quiesce(t *testing.T) {
	deadline := time.Now().Add(fuzzWait)
	for i := 0; ; i++ {
		inflight, txs := fs.s.inflight.n.Load(), fs.s.openTxs()
		mainTxs, kvTxs := fs.main.openTxs.Load(), fs.kv.openTxs.Load()
		g, sessions := runtime.NumGoroutine(), fs.sessions()
		if sessions == 0 && inflight == 0 && txs == 0 && mainTxs == 0 && kvTxs == 0 && g < fs.goroutines+150 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the last client closed: %d sessions, %d requests in flight, %d transactions open in the server, %d on main, %d on kv, %d goroutines (%d at start)",
				fuzzWait, sessions, inflight, txs, mainTxs, kvTxs, g, fs.goroutines)
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// sessions returns how many client connections the server counts.
func (fs *fuzzServer) sessions() int {
	n := make(chan int, 1)
	fs.s.loop.Post(func() { n <- len(fs.s.sessions) })
	return <-n
}

// expectation is what the protocol says a frame gets.
type expectation struct {
	id     uint32
	code   string // the reply's error code; "" for any reply but an internal error
	closes bool   // the connection is closed after the reply
}

func (w expectation) closesText() string {
	if w.closes {
		return ", then a close"
	}
	return ""
}

// expectReply reads payload as serveFrame does (docs/protocol.md, Frames),
// preAuth for the first frame of a TCP client.
func expectReply(payload []byte, preAuth bool) expectation {
	limit := fuzzMaxFrame
	if preAuth {
		limit = preAuthMaxFrame
	}
	switch {
	case len(payload) == 0:
		return expectation{code: string(tether.CodeBadFrame), closes: true}
	case len(payload) > limit:
		return expectation{code: string(tether.CodeTooLarge), closes: true}
	}
	var r wire.Request
	err := wire.DecodeRequest(payload, &r)
	var re *wire.RequestError
	isRE := errors.As(err, &re)
	if preAuth {
		switch {
		case err == nil && r.Op == wire.OpHello && r.HasID && r.Token == fuzzToken:
			return expectation{id: r.ID}
		case err == nil:
			return expectation{id: r.ID, code: string(tether.CodeUnauthorized), closes: true}
		case isRE:
			return expectation{id: re.ID, code: string(tether.CodeUnauthorized), closes: true}
		}
		return expectation{code: string(tether.CodeUnauthorized), closes: true}
	}
	switch {
	case isRE && !re.Fatal:
		return expectation{id: re.ID, code: string(tether.CodeBadRequest)}
	case err != nil:
		return expectation{code: string(tether.CodeBadFrame), closes: true}
	case !r.HasID:
		return expectation{code: string(tether.CodeBadRequest)}
	}
	return expectation{id: r.ID}
}

// fuzzCodes are the error codes of docs/protocol.md but internal ("a bug in
// tetherd").
var fuzzCodes = map[string]bool{
	"bad_frame": true, "too_large": true, "bad_request": true, "unknown_op": true, "unknown_backend": true,
	"unknown_tx": true, "unknown_table": true, "unsupported": true, "unauthorized": true, "backend_error": true,
	"unavailable": true, "busy": true, "timeout": true, "tx_aborted": true,
}

func (w expectation) check(t *testing.T, rep *wire.Reply) {
	t.Helper()
	if rep.ID != w.id {
		t.Fatalf("reply id %d, want %d: %v", rep.ID, w.id, rep.Fields)
	}
	e := rep.Error()
	if _, has := rep.Fields["error"]; has && e == nil {
		t.Fatalf("reply error is not a map: %v", rep.Fields)
	}
	code, _ := e["code"].(string)
	switch {
	case w.code != "" && code != w.code:
		t.Fatalf("reply %v, want error %s", rep.Fields, w.code)
	case e != nil && !fuzzCodes[code]:
		t.Fatalf("reply error code %q: %v", code, e)
	}
}

// fuzzConn is a raw protocol client.
type fuzzConn struct{ net.Conn }

func (fs *fuzzServer) dial(t *testing.T, tcp bool) *fuzzConn {
	network, addr := "unix", fs.socket
	if tcp {
		network, addr = "tcp", fs.tcp
	}
	c, err := net.DialTimeout(network, addr, fuzzWait)
	if err != nil {
		t.Fatalf("dial %s: %v", network, err)
	}
	return &fuzzConn{c}
}

func (c *fuzzConn) close() { c.Conn.Close() }

func (c *fuzzConn) write(b []byte) error {
	c.SetWriteDeadline(time.Now().Add(fuzzWait))
	_, err := c.Write(b)
	return err
}

// read reads one reply.
func (c *fuzzConn) read() (*wire.Reply, error) {
	c.SetReadDeadline(time.Now().Add(fuzzWait))
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(c, p); err != nil {
		return nil, fmt.Errorf("read a reply's payload: %w", err)
	}
	rep, err := wire.DecodeReply(p)
	if err != nil {
		return nil, fmt.Errorf("the server sent an undecodable reply %x: %w", p, err)
	}
	return rep, nil
}

// roundTrip sends r and returns its reply, which must be a success.
func (c *fuzzConn) roundTrip(t *testing.T, r wire.Request) *wire.Reply {
	t.Helper()
	b, st := wire.BeginFrame(nil)
	if err := c.write(wire.EndFrame(wire.AppendRequest(b, &r), st)); err != nil {
		t.Fatalf("%s: write: %v", r.Op, err)
	}
	rep, err := c.read()
	if err != nil {
		t.Fatalf("%s: no reply: %v", r.Op, err)
	}
	if rep.ID != r.ID || rep.Error() != nil {
		t.Fatalf("%s %d: reply %d %v", r.Op, r.ID, rep.ID, rep.Fields)
	}
	return rep
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

type fuzzSeed struct {
	mode    uint8
	payload []byte
}

// fuzzSeeds are valid frames of every op, on every kind of backend and with
// every fault the fakes know, and a few broken ones.
func fuzzSeeds() []fuzzSeed {
	enc := func(r wire.Request) []byte { return wire.AppendRequest(nil, &r) }
	params := []any{int64(1), "a", nil, true, 1.5, []byte{0, 1}, uint64(math.MaxUint64), int64(-3)}
	left := wire.Request{Op: wire.OpQuery, Backend: "main", SQL: "SELECT n, v FROM users WHERE id IN (?, ?)", Params: []any{int64(2), "b"}}
	scanLeft := wire.Request{Op: wire.OpScan, Backend: "kv", Table: "users", Prefix: []any{int64(1)}}
	right := wire.Request{Backend: "kv", Table: "profiles", Columns: []string{"id", "bio"}}
	var seeds []fuzzSeed
	add := func(mode uint8, rs ...wire.Request) {
		for _, r := range rs {
			seeds = append(seeds, fuzzSeed{mode, enc(r)})
		}
	}
	add(0,
		wire.Request{ID: 1, Op: wire.OpPing},
		wire.Request{ID: 2, Op: wire.OpHello, Token: "ignored on a Unix socket"},
		wire.Request{ID: 3, Op: wire.OpQuery, SQL: "SELECT ?", Params: params},
		wire.Request{ID: 4, Op: wire.OpQuery, Backend: "main", SQL: "SELECT 1", Columnar: true},
		wire.Request{ID: 5, Op: wire.OpQuery, SQL: "SELECT slow"},
		wire.Request{ID: 6, Op: wire.OpQuery, SQL: "SELECT slow", TimeoutMS: 1},
		wire.Request{ID: 7, Op: wire.OpQuery, SQL: "SELECT error"},
		wire.Request{ID: 8, Op: wire.OpExec, SQL: "UPDATE busy"},
		wire.Request{ID: 9, Op: wire.OpQuery, SQL: "SELECT down"},
		wire.Request{ID: 10, Op: wire.OpQuery, SQL: "SELECT big"},
		wire.Request{ID: 11, Op: wire.OpQuery, SQL: "SELECT 1", Limit: 10, Cursor: []byte("c")},
		wire.Request{ID: 12, Op: wire.OpExec, Backend: "main", SQL: "INSERT ?", Params: params},
		wire.Request{ID: 13, Op: wire.OpQuery, Backend: "kv", SQL: "SELECT ?", Params: params, Columnar: true},
		wire.Request{ID: 14, Op: wire.OpExec, Backend: "kv", SQL: "UPDATE slow", TimeoutMS: 1},
		wire.Request{ID: 15, Op: wire.OpQuery, Backend: "kv", SQL: "SELECT big"},
		wire.Request{ID: 16, Op: wire.OpQuery, Backend: "none", SQL: "SELECT 1"},
		wire.Request{ID: 17, Op: wire.OpQuery, Backend: "nosuch", SQL: "SELECT 1"},
		wire.Request{ID: 18, Op: wire.OpQuery},
		wire.Request{ID: 20, Op: wire.OpBegin},
		wire.Request{ID: 21, Op: wire.OpBegin, Backend: "kv"},
		wire.Request{ID: 22, Op: wire.OpBegin, Backend: "none"},
		wire.Request{ID: 23, Op: wire.OpCommit},
		wire.Request{ID: 24, Op: wire.OpRollback, Tx: 9},
		wire.Request{ID: 30, Op: wire.OpBatch, TimeoutMS: 1000, Ops: []wire.Request{
			{Op: wire.OpPing},
			{Op: wire.OpQuery, SQL: "SELECT ?", Params: params},
			{Op: wire.OpExec, SQL: "UPDATE slow", TimeoutMS: 1},
			{Op: wire.OpQuery, Backend: "kv", SQL: "SELECT error"},
			{Op: wire.OpGet, Backend: "kv", Table: "users", Key: []any{int64(1)}},
			{Op: wire.OpHTTP, Backend: "kv", Path: "/x"},
			{Op: wire.OpJoin, Left: &left, Right: &right, On: []string{"n"}},
			{Op: wire.OpBegin},
			{OpName: "nope"},
			{Op: wire.OpQuery, Backend: "none", SQL: "SELECT 1"},
			{Op: wire.OpQuery, SQL: "SELECT 1", Limit: 1},
			{Op: wire.OpMultiGet, Backend: "kv", Table: "t", Keys: [][]any{{int64(1)}}, Columnar: true},
		}},
		wire.Request{ID: 31, Op: wire.OpBatch, TimeoutMS: 5, Ops: []wire.Request{
			{Op: wire.OpQuery, SQL: "SELECT slow"}, {Op: wire.OpQuery, Backend: "kv", SQL: "SELECT slow"}, {Op: wire.OpQuery, SQL: "SELECT big"},
		}},
		wire.Request{ID: 32, Op: wire.OpBatch, Ops: []wire.Request{}},
		wire.Request{ID: 40, Op: wire.OpJoin, Left: &left, Right: &right, On: []string{"n"}, Kind: "inner", OrderBy: []string{"-v", "n"}},
		wire.Request{ID: 41, Op: wire.OpJoin, Left: &scanLeft, Right: &wire.Request{Backend: "main", Table: "users"}, On: []string{"id"}, OrderBy: []string{"v"}},
		wire.Request{ID: 42, Op: wire.OpJoin, Left: &scanLeft, Right: &wire.Request{Backend: "none", Table: "users"}, On: []string{"id"}},
		wire.Request{ID: 43, Op: wire.OpJoin, Left: &wire.Request{Op: wire.OpGet, Backend: "kv", Table: "error", Key: []any{int64(1)}}, Right: &right, On: []string{"nosuch"}},
		wire.Request{ID: 50, Op: wire.OpHTTP, Backend: "kv", Path: "/x?y=1"},
		wire.Request{ID: 51, Op: wire.OpHTTP, Backend: "kv", Method: "POST", Path: "/slow", Headers: map[string]string{"X-A": "b"}, Body: []byte("body"), TimeoutMS: 1},
		wire.Request{ID: 52, Op: wire.OpHTTP, Backend: "main", Path: "/x"},
		wire.Request{ID: 53, Op: wire.OpHTTP, Backend: "kv"},
		wire.Request{ID: 60, Op: wire.OpGet, Backend: "kv", Table: "users", Key: []any{int64(42)}, Columns: []string{"id", "v"}},
		wire.Request{ID: 61, Op: wire.OpMultiGet, Backend: "kv", Table: "users", Keys: [][]any{{int64(1)}, {nil}, {"missing"}}},
		wire.Request{ID: 62, Op: wire.OpScan, Backend: "kv", Table: "users", Prefix: []any{"a"}, Limit: 2, Columnar: true},
		wire.Request{ID: 63, Op: wire.OpScan, Backend: "main", Table: "users", Start: []any{int64(1)}, End: []any{int64(9)}, Cursor: []byte("c")},
		wire.Request{ID: 64, Op: wire.OpPut, Backend: "kv", Table: "users", Row: map[string]any{"id": int64(1), "v": "x"}},
		wire.Request{ID: 65, Op: wire.OpDelete, Backend: "main", Table: "slow", Key: []any{int64(1)}},
		wire.Request{ID: 66, Op: wire.OpGet, Backend: "none", Table: "users", Key: []any{int64(1)}},
		wire.Request{ID: 67, Op: wire.OpMultiGet, Backend: "kv", Table: "users", Keys: [][]any{{int64(1)}}, Columnar: true},
		wire.Request{ID: 70, Op: wire.OpReadRows, Backend: "kv", Table: "rows", Keys: [][]any{{"a"}, {"b"}}, Families: []string{"f"}, Latest: true},
		wire.Request{ID: 71, Op: wire.OpReadRows, Backend: "kv", Table: "rows", Prefix: []any{"a"}, Start: []any{"a", "b"}},
		wire.Request{ID: 72, Op: wire.OpMutateRow, Backend: "kv", Table: "rows", Key: []any{"a"}, Mutations: []wire.Mutation{
			{Op: "set", Family: "f", Qualifier: "q", Value: "v", Timestamp: 5}, {Op: "delete_row"}, {Op: "bogus"}}},
		wire.Request{ID: 73, Op: wire.OpIncrement, Backend: "kv", Table: "rows", Key: []any{"a"}, Family: "f", Qualifier: "n", Delta: -2},
		wire.Request{ID: 74, Op: wire.OpCheckAndMutate, Backend: "kv", Table: "rows", Key: []any{int64(7)}, Family: "f", Value: int64(1),
			IfTrue: []wire.Mutation{{Op: "delete_cells", Family: "f", Qualifier: "q"}}, IfFalse: []wire.Mutation{{Op: "set", Value: []byte{1}}}},
		wire.Request{ID: 75, Op: wire.OpMutateRow, Backend: "main", Table: "rows", Key: []any{"a"}},
		wire.Request{ID: 80, OpName: "nope"},
	)
	// On the transactions the mode begins: 1 on main, 2 on kv.
	add(1,
		wire.Request{ID: 100, Op: wire.OpQuery, Tx: 1, SQL: "SELECT ?", Params: params},
		wire.Request{ID: 101, Op: wire.OpExec, Tx: 2, SQL: "UPDATE x"},
		wire.Request{ID: 102, Op: wire.OpCommit, Tx: 1},
		wire.Request{ID: 103, Op: wire.OpRollback, Tx: 2},
		wire.Request{ID: 104, Op: wire.OpCommit, Tx: 2},
		wire.Request{ID: 105, Op: wire.OpRollback, Tx: 1},
		wire.Request{ID: 106, Op: wire.OpQuery, Tx: 1, SQL: "SELECT slow", TimeoutMS: 1},
		wire.Request{ID: 107, Op: wire.OpQuery, Tx: 2, SQL: "SELECT big", Columnar: true},
		wire.Request{ID: 108, Op: wire.OpQuery, Tx: 1, SQL: "SELECT error", Limit: 3},
		wire.Request{ID: 109, Op: wire.OpCommit, Tx: 3},
		wire.Request{ID: 110, Op: wire.OpBegin, Backend: "kv"},
		wire.Request{ID: 111, Op: wire.OpBatch, Ops: []wire.Request{{Op: wire.OpQuery, Tx: 1, SQL: "SELECT 1"}}},
	)
	// TCP: the first frame must be a hello with the token (mode 2); after one (mode 3).
	add(2,
		wire.Request{ID: 200, Op: wire.OpHello, Token: fuzzToken},
		wire.Request{ID: 201, Op: wire.OpHello, Token: "wrong"},
		wire.Request{ID: 202, Op: wire.OpPing},
	)
	add(3, wire.Request{ID: 300, Op: wire.OpQuery, Tx: 1, SQL: "SELECT 1"})
	// Broken frames.
	mapOf := func(kv ...string) []byte {
		b := msgp.AppendMapHeader(nil, uint32(len(kv)/2))
		for _, s := range kv {
			b = msgp.AppendString(b, s)
		}
		return b
	}
	for _, p := range [][]byte{
		{},
		{0x80},
		{0xc1},
		msgp.AppendString(nil, "ping"),
		mapOf("op", "ping"),
		append(enc(wire.Request{ID: 1, Op: wire.OpPing}), 0xc0),
		enc(wire.Request{ID: 1, Op: wire.OpPing})[:4],
		msgp.AppendInt(msgp.AppendString(msgp.AppendMapHeader(nil, 1), "id"), 0),
		msgp.AppendInt(msgp.AppendString(msgp.AppendMapHeader(nil, 2), "id"), 1),
		append(msgp.AppendUint(msgp.AppendString(msgp.AppendMapHeader(nil, 3), "id"), 5), mapOf("op", "ping", "colour", "red")[1:]...),
		bytes.Repeat([]byte{0x80}, fuzzMaxFrame+1),
	} {
		seeds = append(seeds, fuzzSeed{0, p})
	}
	seeds = append(seeds, fuzzSeed{2, bytes.Repeat([]byte{0x80}, preAuthMaxFrame+1)})
	return seeds
}

// The fakes. What a request's text (its SQL, table or path) contains picks
// its fault: "error" a backend_error, "down" unavailable, "busy" busy, "slow"
// fakeSlow (or until the deadline), "big" a result over max_result_bytes.

const fakeSlow = 20 * time.Millisecond

// fakeFault returns the error text asks for, after the delay it asks for.
func fakeFault(ctx context.Context, text string) error {
	switch {
	case strings.Contains(text, "error"):
		return &tether.Error{Code: tether.CodeBackendError, Message: "fake: the error asked for", BackendCode: "1064"}
	case strings.Contains(text, "down"):
		return fmt.Errorf("fake: %w", tether.ErrUnavailable)
	case strings.Contains(text, "busy"):
		return fmt.Errorf("fake: %w", tether.ErrBusy)
	case strings.Contains(text, "slow"):
		t := time.NewTimer(fakeSlow)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// fakeRows is a query's result: a row per parameter, [n, the parameter], or
// rows over max_result_bytes for "big".
func fakeRows(sql string, params []any) (columns []string, rows [][]any) {
	columns = []string{"n", "v"}
	switch {
	case strings.Contains(sql, "big"):
		for i := range 400 {
			rows = append(rows, []any{int64(i), strings.Repeat("x", 64)})
		}
	case len(params) == 0:
		rows = [][]any{{int64(1), "one"}}
	default:
		for i, p := range params {
			rows = append(rows, []any{int64(i), p})
		}
	}
	return columns, rows
}

// fakeBackend offers every capability, run on the server's goroutines.
type fakeBackend struct {
	openTxs atomic.Int64 // begun and not ended
}

func (*fakeBackend) Open(context.Context) error  { return nil }
func (*fakeBackend) Stats() tether.PoolStats     { return tether.PoolStats{} }
func (*fakeBackend) Close(context.Context) error { return nil }

func (f *fakeBackend) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if err := fakeFault(ctx, s.SQL); err != nil {
		return nil, err
	}
	columns, rows := fakeRows(s.SQL, s.Params)
	return &tether.Result{Columns: columns, Rows: rows}, nil
}

func (f *fakeBackend) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if err := fakeFault(ctx, s.SQL); err != nil {
		return nil, err
	}
	return &tether.Result{Affected: int64(len(s.Params)), InsertID: 7}, nil
}

func (f *fakeBackend) Begin(ctx context.Context) (tether.Tx, error) {
	f.openTxs.Add(1)
	return &fakeTx{b: f}, nil
}

// fakeTx is a fakeBackend's transaction.
type fakeTx struct {
	b    *fakeBackend
	done atomic.Bool
}

func (t *fakeTx) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if t.done.Load() {
		return nil, &tether.Error{Code: tether.CodeTxAborted, Message: "fake: transaction over", Retry: true}
	}
	return t.b.Query(ctx, s)
}

func (t *fakeTx) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if t.done.Load() {
		return nil, &tether.Error{Code: tether.CodeTxAborted, Message: "fake: transaction over", Retry: true}
	}
	return t.b.Exec(ctx, s)
}

func (t *fakeTx) Commit(ctx context.Context) error   { return t.end() }
func (t *fakeTx) Rollback(ctx context.Context) error { return t.end() }

func (t *fakeTx) end() error {
	if t.done.Swap(true) {
		return tether.ErrTxDone
	}
	t.b.openTxs.Add(-1)
	return nil
}

// keyRow is a key-API row: the key's values, then "v" for the other columns.
func keyRow(columns []string, key []any) []any {
	row := make([]any, len(columns))
	for i := range row {
		row[i] = "v"
		if i < len(key) {
			row[i] = key[i]
		}
	}
	return row
}

func keyColumns(k tether.KeyRequest) []string {
	if len(k.Columns) > 0 {
		return k.Columns
	}
	return []string{"id", "v"}
}

func (f *fakeBackend) Get(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, k.Table); err != nil {
		return nil, err
	}
	cols := keyColumns(k)
	return &tether.Result{Columns: cols, Rows: [][]any{keyRow(cols, k.Key)}}, nil
}

func (f *fakeBackend) MultiGet(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, k.Table); err != nil {
		return nil, err
	}
	cols := keyColumns(k)
	rows := make([][]any, len(k.Keys))
	for i, key := range k.Keys {
		if len(key) > 0 && key[0] != nil && key[0] != "missing" {
			rows[i] = keyRow(cols, key)
		}
	}
	return &tether.Result{Columns: cols, Rows: rows}, nil
}

func (f *fakeBackend) Scan(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, k.Table); err != nil {
		return nil, err
	}
	cols := keyColumns(k)
	res := &tether.Result{Columns: cols}
	for i := range 3 {
		res.Rows = append(res.Rows, keyRow(cols, append(append([]any{}, k.Prefix...), int64(i))))
	}
	if k.Limit > 0 && k.Limit < len(res.Rows) {
		res.Rows, res.Cursor = res.Rows[:k.Limit], []byte("next")
	}
	return res, nil
}

func (f *fakeBackend) Put(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, k.Table); err != nil {
		return nil, err
	}
	return &tether.Result{Affected: 1}, nil
}

func (f *fakeBackend) Delete(ctx context.Context, k tether.KeyRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, k.Table); err != nil {
		return nil, err
	}
	return &tether.Result{Affected: 1}, nil
}

// WideColumn answers as Bigtable would, without checking the values: row
// keys and cells are the backend's to map (backend/bigtable tests that).
func (f *fakeBackend) WideColumn(ctx context.Context, r tether.WideColumnRequest) (*tether.Result, error) {
	if err := fakeFault(ctx, r.Table); err != nil {
		return nil, err
	}
	switch r.Op {
	case tether.OpReadRows:
		res := &tether.Result{Columns: []string{"key", "family", "qualifier", "timestamp", "value"}}
		for _, k := range append(r.Keys, r.Prefix) {
			res.Rows = append(res.Rows, []any{fmt.Sprint(k), "f", "q", int64(1), []byte("v")})
		}
		return res, nil
	case tether.OpIncrement:
		return &tether.Result{Columns: []string{"key", "family", "qualifier", "value"}, Rows: [][]any{{fmt.Sprint(r.Key), r.Family, r.Qualifier, r.Delta}}}, nil
	case tether.OpCheckAndMutate:
		if r.Value == nil {
			return &tether.Result{Affected: 1}, nil
		}
		return &tether.Result{}, nil
	}
	return &tether.Result{Affected: 1}, nil
}

func (f *fakeBackend) Call(ctx context.Context, r tether.HTTPRequest) (*tether.HTTPResponse, error) {
	if err := fakeFault(ctx, r.Path); err != nil {
		return nil, err
	}
	return &tether.HTTPResponse{Status: 200, Header: map[string][]string{"content-type": {"text/plain"}}, Body: []byte("fake " + r.Path)}, nil
}

// fakeLoopBackend is a backend the event loop drives, as MySQL and
// PostgreSQL are: it answers its requests on the loop, after the delay they
// ask for or at their deadline, and gives them up when their client goes or
// their transaction is aborted. As a Querier and KeyValue (the Go path, for
// joins and the key API) it is a fakeBackend.
type fakeLoopBackend struct {
	fakeBackend // openTxs counts the loop's transactions too
	loop        *evloop.Loop
	pending     map[*sqlpool.Request]struct{} // loop goroutine only
}

func newFakeLoopBackend() *fakeLoopBackend {
	return &fakeLoopBackend{pending: map[*sqlpool.Request]struct{}{}}
}

func (f *fakeLoopBackend) UseLoop(l *evloop.Loop) { f.loop = l }

func (f *fakeLoopBackend) Submit(r *sqlpool.Request) {
	f.pending[r] = struct{}{}
	at, timedOut := time.Now(), false
	if strings.Contains(r.SQL, "slow") {
		at = at.Add(fakeSlow)
	}
	if !r.Deadline.IsZero() && r.Deadline.Before(at) {
		at, timedOut = r.Deadline, true
	}
	// One timer per request: a request answered normally may be reused by
	// the server for its next one.
	time.AfterFunc(time.Until(at), func() {
		f.loop.Post(func() {
			if timedOut {
				f.finish(r, &tether.Error{Code: tether.CodeTimeout, Message: "fake: deadline exceeded"}, true)
				return
			}
			f.run(r)
		})
	})
}

func (f *fakeLoopBackend) run(r *sqlpool.Request) {
	if _, ok := f.pending[r]; !ok {
		return // given up on already
	}
	if r.Tx != nil && r.Tx.Conn == nil {
		f.finish(r, &tether.Error{Code: tether.CodeTxAborted, Message: "fake: transaction over", Retry: true}, false)
		return
	}
	switch r.Kind {
	case sqlpool.KindBegin:
		f.openTxs.Add(1)
		r.NewTx = &sqlpool.Tx{Conn: f, Client: r.Client}
	case sqlpool.KindCommit, sqlpool.KindRollback:
		f.endTx(r.Tx, nil)
	case sqlpool.KindExec:
		if err := fakeFault(context.Background(), strings.ReplaceAll(r.SQL, "slow", "")); err != nil {
			f.finish(r, err, false)
			return
		}
		r.Affected, r.InsertID = int64(len(r.Params)), 7
	case sqlpool.KindQuery:
		if err := fakeFault(context.Background(), strings.ReplaceAll(r.SQL, "slow", "")); err != nil {
			f.finish(r, err, false)
			return
		}
		columns, rows := fakeRows(r.SQL, r.Params)
		if err := sinkRows(r.Sink, columns, rows); err != nil {
			f.finish(r, &tether.Error{Code: tether.CodeTooLarge, Message: "fake: " + err.Error()}, false)
			return
		}
	}
	f.finish(r, nil, false)
}

// sinkRows writes rows into s value by value, as a driver decodes them.
func sinkRows(s tether.RowSink, columns []string, rows [][]any) error {
	s.Columns(len(columns))
	for _, c := range columns {
		s.Column([]byte(c))
	}
	for _, row := range rows {
		s.BeginRow()
		for _, v := range row {
			switch x := v.(type) {
			case nil:
				s.Nil()
			case bool:
				s.Bool(x)
			case int64:
				s.Int(x)
			case uint64:
				s.Uint(x)
			case float64:
				s.Float(x)
			case string:
				s.Text([]byte(x))
			case []byte:
				s.Bytes(x)
			default:
				s.Nil()
			}
		}
		if err := s.EndRow(); err != nil {
			return err
		}
	}
	return nil
}

// finish answers r, once; abandoned: given up on (the server does not reuse it).
func (f *fakeLoopBackend) finish(r *sqlpool.Request, err error, abandoned bool) {
	if _, ok := f.pending[r]; !ok {
		return
	}
	delete(f.pending, r)
	r.Err = err
	r.State.Abandoned = abandoned
	r.State.Finished = true
	r.Done(r)
}

func (f *fakeLoopBackend) endTx(tx *sqlpool.Tx, why error) {
	if tx == nil || tx.Conn == nil {
		return
	}
	tx.Conn, tx.Ended = nil, why
	f.openTxs.Add(-1)
}

func (f *fakeLoopBackend) Abandon(r *sqlpool.Request, err error) { f.finish(r, err, true) }

func (f *fakeLoopBackend) CancelClient(c *sqlpool.Client, err error) {
	for r := range f.pending {
		if r.Client == c {
			f.finish(r, err, true)
		}
	}
}

func (f *fakeLoopBackend) AbortTx(tx *sqlpool.Tx, why string) {
	e := &tether.Error{Code: tether.CodeTxAborted, Message: why, Retry: true}
	for r := range f.pending {
		if r.Tx == tx {
			f.finish(r, e, true)
		}
	}
	f.endTx(tx, e)
}

// bareBackend offers no capability at all.
type bareBackend struct{}

func (bareBackend) Open(context.Context) error  { return nil }
func (bareBackend) Stats() tether.PoolStats     { return tether.PoolStats{} }
func (bareBackend) Close(context.Context) error { return nil }

var (
	_ tether.Querier    = (*fakeBackend)(nil)
	_ tether.Transactor = (*fakeBackend)(nil)
	_ tether.KeyValue   = (*fakeBackend)(nil)
	_ tether.WideColumn = (*fakeBackend)(nil)
	_ tether.Upstream   = (*fakeBackend)(nil)
	_ sqlpool.Backend   = (*fakeLoopBackend)(nil)
	_ tether.Backend    = bareBackend{}
)
