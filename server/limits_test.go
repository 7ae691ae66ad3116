package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// Tests of the bounds on what one client can make tetherd hold
// (limits.go); the fault suite (tests/faults) measures the same under
// attack, with memory figures.

func TestLimits_MaxClientConns(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.MaxClientConns = 3 })
	var cs []*client
	for i := 0; i < 3; i++ {
		c := dial(t, ts)
		c.ok(wire.Request{ID: 1, Op: wire.OpPing})
		cs = append(cs, c)
	}
	over := dial(t, ts)
	e := errCode(t, over.recv(), tether.CodeUnavailable)
	if !strings.Contains(fmt.Sprint(e["message"]), "max_client_conns = 3") {
		t.Fatalf("the error does not name the limit: %v", e)
	}
	over.expectClosed()
	cs[0].conn.Close()
	// The server signals no event when it has seen a client go: its count.
	eventually(t, "the server to see the client go", func() bool { return ts.Snapshot().Clients < 3 })
	dial(t, ts).ok(wire.Request{ID: 1, Op: wire.OpPing})
}

func TestLimits_MaxClientTxs(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, func(c *tether.Config) {
		c.Server.MaxClientTxs = 2
		for _, name := range []string{"other", "third"} {
			c.Backends[name] = tether.DefaultBackendConfig("sqlite", dir+"/"+name+".db")
		}
	})
	c := dial(t, ts)
	tx1 := toUint(c.ok(wire.Request{ID: 3, Op: wire.OpBegin}).Fields["tx"])
	c.ok(wire.Request{ID: 4, Op: wire.OpBegin, Backend: "other"})
	e := errCode(t, c.do(wire.Request{ID: 5, Op: wire.OpBegin, Backend: "third"}), tether.CodeBusy)
	if !strings.Contains(fmt.Sprint(e["message"]), "max_client_txs = 2") {
		t.Fatalf("the error does not name the limit: %v", e)
	}
	// Another client is not held back by this one's share.
	dial(t, ts).ok(wire.Request{ID: 1, Op: wire.OpBegin, Backend: "third"})
	c.ok(wire.Request{ID: 6, Op: wire.OpCommit, Tx: tx1})
	c.ok(wire.Request{ID: 7, Op: wire.OpBegin})
}

func TestLimits_ClientFrameTimeout(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.ClientFrameTimeout = tether.Duration(300 * time.Millisecond) })
	c := dial(t, ts)
	start := time.Now()
	c.sendRaw(binary.BigEndian.AppendUint32(nil, 100)) // announces 100 bytes...
	c.sendRaw([]byte{0x82, 0xa2})                      // ...sends 2, then nothing (slowloris)
	e := errCode(t, c.recv(), tether.CodeBadFrame)
	if !strings.Contains(fmt.Sprint(e["message"]), "client_frame_timeout") {
		t.Fatalf("the error does not name the limit: %v", e)
	}
	c.expectClosed()
	if el := time.Since(start); el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("closed after %s with a 300 ms client_frame_timeout", el)
	}
	// A client that sends whole frames, slowly, is not affected.
	slow := dial(t, ts)
	for i := 0; i < 3; i++ {
		slow.ok(wire.Request{ID: uint32(i + 1), Op: wire.OpPing})
		time.Sleep(200 * time.Millisecond) // a slow client, the subject of the test
	}
}

func TestLimits_ClientIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.ClientIdleTimeout = tether.Duration(300 * time.Millisecond) })
	// inTx goes quiet first: the sweep that closes idle (the reply waited
	// for below) finds inTx idle for longer.
	inTx := dial(t, ts)
	inTx.ok(wire.Request{ID: 1, Op: wire.OpBegin})
	idle := dial(t, ts)
	idle.ok(wire.Request{ID: 1, Op: wire.OpPing})
	errCode(t, idle.recv(), tether.CodeUnavailable)
	idle.expectClosed()
	// A client with a transaction open is the transaction reaper's business.
	inTx.ok(wire.Request{ID: 2, Op: wire.OpPing})
}

func TestLimits_MaxClientOutputBytes(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) {
		c.Server.MaxResultBytes = 64 << 10
		c.Server.MaxClientOutputBytes = 256 << 10
	})
	c := dial(t, ts)
	// 64 replies of ~40 KB each, pipelined and not read: past 256 KiB queued
	// (and the socket's own buffers) the connection is closed.
	q := wire.Request{Op: wire.OpQuery, SQL: "SELECT zeroblob(40000) AS b"}
	var frames []byte
	for i := 0; i < 64; i++ {
		q.ID = uint32(i + 1)
		b, st := wire.BeginFrame(nil)
		frames = append(frames, wire.EndFrame(wire.AppendRequest(b, &q), st)...)
	}
	c.sendRaw(frames)
	// The client cannot be told (it does not read): the log says which limit.
	// It is the one sign that the server closed the connection: polled.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ts.logs.String(), "limit=server.max_client_output_bytes value=262144 closed=1") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line names the limit; the log: %s", ts.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Read to the end: whole replies, then maybe part of one, then EOF.
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(c.conn)
	if err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	got := 0
	for len(all) >= 4 && len(all)-4 >= int(binary.BigEndian.Uint32(all)) {
		all = all[4+binary.BigEndian.Uint32(all):]
		got++
	}
	if got >= 64 {
		t.Fatalf("all %d replies were queued for a client that did not read", got)
	}
	t.Logf("%d of 64 replies reached the client before its connection was closed", got)
	dial(t, ts).ok(wire.Request{ID: 1, Op: wire.OpPing}) // and tetherd serves others
}

// TestLimits_ReadsPauseAtMaxClientRequests: a client that pipelines many slow
// requests has at most max_client_requests in flight; the rest wait in its
// socket, not in tetherd, and all are answered in the end.
func TestLimits_ReadsPauseAtMaxClientRequests(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			const limit, n = 3, 12
			ts := d.startWith(t, func(bc *tether.BackendConfig) { bc.MaxConns, bc.MinConns = 8, 8 },
				func(c *tether.Config) { c.Server.MaxClientRequests = limit })
			c := dial(t, ts)
			for i := 0; i < n; i++ {
				c.send(wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: "db", SQL: d.sleep(0.2, "paused_reads")})
			}
			done := make(chan int)
			go func() {
				got := 0
				for got < n && c.recv() != nil {
					got++
				}
				done <- got
			}()
			most := 0
			for {
				select {
				case got := <-done:
					t.Logf("%d pipelined statements, at most %d running at once on the server (max_client_requests = %d, max_conns 8)", n, most, limit)
					if got != n {
						t.Fatalf("%d of %d answered", got, n)
					}
					if most > limit {
						t.Fatalf("%d statements of one client ran at once with max_client_requests = %d", most, limit)
					}
					if most == 0 {
						t.Fatal("the sampler saw none running: it cannot tell")
					}
					return
				case <-time.After(20 * time.Millisecond):
					running, err := d.running(context.Background(), "paused_reads")
					if err != nil {
						t.Fatal(err)
					}
					most = max(most, running)
				}
			}
		})
	}
}

// TestLimits_FairShareOfThePool: a client that floods a pool of two
// connections with slow statements waits behind its own requests; another
// client's statements are served in between, not after the flood.
func TestLimits_FairShareOfThePool(t *testing.T) {
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			ts := d.start(t, func(bc *tether.BackendConfig) {
				bc.MaxConns, bc.MinConns = 2, 2
				bc.AcquireTimeout = tether.Duration(10 * time.Second)
			})
			flood := dial(t, ts)
			const n = 60
			for i := 0; i < n; i++ {
				flood.send(wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: "db", SQL: d.sleep(0.02, "flood")})
			}
			// The flood holds both connections (a pool count, polled: no
			// event says so) before the bystander comes.
			eventually(t, "the flood to hold the pool", func() bool {
				for _, p := range ts.Snapshot().Pools {
					if p.Backend == "db" && p.Stats.InUse == 2 {
						return true
					}
				}
				return false
			})
			by := dial(t, ts)
			var worst time.Duration
			for i := 0; i < 5; i++ {
				start := time.Now()
				by.ok(wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
				worst = max(worst, time.Since(start))
			}
			var wg sync.WaitGroup
			var answered atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					if flood.recv() == nil {
						return
					}
					answered.Add(1)
				}
			}()
			wg.Wait()
			t.Logf("a bystander's statement took at most %s while another client's %d statements of 20 ms waited on 2 connections (%d answered)", worst, n, answered.Load())
			if worst > 300*time.Millisecond {
				t.Errorf("a bystander waited %s behind another client's flood (FIFO would be ~%s)", worst, time.Duration(n/2)*20*time.Millisecond)
			}
			if answered.Load() != n {
				t.Errorf("%d of the flood's %d statements answered", answered.Load(), n)
			}
		})
	}
}

// TestLimits_MemoryBudget: clients that each hold a legal frame half-sent
// make tetherd buffer what they announced; past max_memory_bytes, those
// holding the most are closed (with an error that names the limit) until it
// is back under, and everyone else is served on. Before the budget, a fault
// campaign took tetherd from 40 MB to 1.64 GB this way, and out of memory.
func TestLimits_MemoryBudget(t *testing.T) {
	// The runtime's soft limit is the process's: give the others theirs back.
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	const budget = 64 << 20
	ts := startServer(t, func(c *tether.Config) {
		c.Server.MaxMemoryBytes = budget
		c.Server.ClientFrameTimeout = tether.Duration(time.Minute) // not what closes them here
	})
	half := make([]byte, 4<<20)
	var attackers []*client
	for i := 0; i < 24; i++ { // 24 x 8 MiB announced, 4 MiB sent: far over the budget
		c := dial(t, ts)
		// tetherd may close it while it sends, once the budget is exceeded:
		// a failed write is that, and the read below tells.
		c.conn.Write(binary.BigEndian.AppendUint32(nil, 8<<20-64))
		c.conn.Write(half)
		attackers = append(attackers, c)
	}
	bystander := dial(t, ts)
	bystander.ok(wire.Request{ID: 1, Op: wire.OpPing})
	// Each attacker is either closed, with the error, or still held.
	var closed atomic.Int64
	var wrong atomic.Value
	var wg sync.WaitGroup
	for _, c := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			var h [4]byte
			if _, err := io.ReadFull(c.conn, h[:]); err != nil {
				if !strings.Contains(err.Error(), "timeout") {
					wrong.CompareAndSwap(nil, "closed without an error: "+err.Error())
				}
				return // still held
			}
			p := make([]byte, binary.BigEndian.Uint32(h[:]))
			io.ReadFull(c.conn, p)
			rep, err := wire.DecodeReply(p)
			if err != nil {
				wrong.CompareAndSwap(nil, err.Error())
				return
			}
			e := rep.Error()
			if e == nil || e["code"] != string(tether.CodeUnavailable) || !strings.Contains(fmt.Sprint(e["message"]), fmt.Sprintf("max_memory_bytes = %d", budget)) {
				wrong.CompareAndSwap(nil, fmt.Sprintf("the error does not name the limit: %v", rep.Fields))
				return
			}
			if _, err := c.conn.Read(h[:]); err == nil {
				wrong.CompareAndSwap(nil, "not closed after the error")
				return
			}
			closed.Add(1)
		}()
	}
	wg.Wait()
	if w := wrong.Load(); w != nil {
		t.Fatal(w)
	}
	// What is left held must fit the budget: at least 4 MiB each.
	if left := 24 - closed.Load(); left*4<<20 > budget {
		t.Fatalf("%d clients closed; the %d left hold more than the %d MiB budget", closed.Load(), left, budget>>20)
	}
	bystander.ok(wire.Request{ID: 2, Op: wire.OpQuery, SQL: "SELECT 1"})
	t.Logf("%d of 24 clients holding 4 MiB each closed over a %d MiB budget", closed.Load(), budget>>20)
}
