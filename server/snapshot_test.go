package server_test

import (
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// TestSnapshot_MovesAsRequestsRun: the operator's figures that are not
// request counts (rollbacks by cause, the event loop's work, the pools'
// dials) move when what they count happens.
func TestSnapshot_MovesAsRequestsRun(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Server.TxIdleTimeout = tether.Duration(200 * time.Millisecond) })
	before := ts.Snapshot()
	if before.Rollbacks["client_gone"] != 0 || before.Rollbacks["idle_timeout"] != 0 {
		t.Fatalf("rollbacks before any transaction: %v", before.Rollbacks)
	}
	gone := dial(t, ts)
	gone.ok(wire.Request{ID: 1, Op: wire.OpBegin})
	gone.conn.Close()
	idle := dial(t, ts)
	idle.ok(wire.Request{ID: 1, Op: wire.OpBegin})
	for i := 0; ; i++ {
		snap := ts.Snapshot()
		if snap.Rollbacks["client_gone"] == 1 && snap.Rollbacks["idle_timeout"] == 1 {
			if snap.EventLoop.Turns <= before.EventLoop.Turns || snap.EventLoop.BusySeconds <= before.EventLoop.BusySeconds {
				t.Fatalf("the event loop's work did not move: %+v then %+v", before.EventLoop, snap.EventLoop)
			}
			break
		}
		if i == 300 {
			t.Fatalf("rollbacks by cause: %v, want one client_gone and one idle_timeout", snap.Rollbacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range optionalLoopDBs(t) {
		dts := d.start(t, nil)
		c := dial(t, dts)
		c.ok(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "db", SQL: "SELECT 1"})
		if st := dts.Snapshot().Pools[0].Stats; st.Dials < 1 || st.DialErrors != 0 {
			t.Errorf("%s: dials %d, dial errors %d after a query", d.typ, st.Dials, st.DialErrors)
		}
	}
}
