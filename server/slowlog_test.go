package server_test

import (
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// TestSlowStatementLog: with log.slow_statement set, a statement that took at
// least that long is logged at warn with its backend, time, result and SQL;
// with it off (the default), nothing is.
func TestSlowStatementLog(t *testing.T) {
	ts := startServer(t, func(c *tether.Config) { c.Log.SlowStatement = 1 }) // 1 ns: every statement is slow
	c := dial(t, ts)
	c.ok(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "main", SQL: "SELECT 42 AS slow_marker"})
	c.do(wire.Request{ID: 2, Op: wire.OpQuery, Backend: "main", SQL: "SELECT * FROM no_such_table_marker"})
	logs := ts.logs.String()
	for _, want := range []string{`msg="slow statement"`, "op=query", "backend=main", "SELECT 42 AS slow_marker", "code=ok",
		"no_such_table_marker", "code=backend_error"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %q:\n%s", want, logs)
		}
	}

	quiet := startServer(t, nil)
	dial(t, quiet).ok(wire.Request{ID: 1, Op: wire.OpQuery, Backend: "main", SQL: "SELECT 1"})
	if strings.Contains(quiet.logs.String(), "slow statement") {
		t.Errorf("slow statements logged with the log off:\n%s", quiet.logs.String())
	}
}
