package server_test

import (
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// TestCausal_SingleServerBackend: on a backend of one server every read sees
// every write, so its causal token is empty and causal_after is accepted
// and does nothing; an unknown backend is an error (the replicated case is
// tested in backend/mysql and backend/postgres, TestReplicated).
func TestCausal_SingleServerBackend(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE c (v INT)"})
	c.ok(wire.Request{ID: 2, Op: wire.OpExec, SQL: "INSERT INTO c VALUES (1)"})
	rep := c.ok(wire.Request{ID: 3, Op: wire.OpCausalToken})
	if pos, ok := rep.Fields["position"].(string); !ok || pos != "" {
		t.Fatalf("causal_token on SQLite: %v, want an empty position", rep.Fields)
	}
	c.ok(wire.Request{ID: 4, Op: wire.OpCausalAfter, Position: "0-1-42"})
	if got := firstValue(t, c.ok(wire.Request{ID: 5, Op: wire.OpQuery, SQL: "SELECT COUNT(*) FROM c"})); got != "1" {
		t.Fatalf("read after causal_after: %s", got)
	}
	errCode(t, c.do(wire.Request{ID: 6, Op: wire.OpCausalToken, Backend: "nope"}), tether.CodeUnknownBackend)
}
