package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/admin"
	"github.com/tether-php/tether/backend/sqlite"
	"github.com/tether-php/tether/server"
)

// serve runs a tetherd (SQLite backend "main") with its admin API, and
// returns its PHP and admin sockets.
func serve(t *testing.T) (php, adm string) {
	t.Helper()
	cfg, _ := serveWith(t, func(bc *tether.BackendConfig) {})
	return cfg.Server.Socket, cfg.Admin.Socket
}

// serveWith runs a tetherd with its admin API on one SQLite backend "main",
// whose config tweak may change, and returns its config and server.
func serveWith(t *testing.T, tweak func(*tether.BackendConfig)) (tether.Config, *server.Server) {
	t.Helper()
	dir := t.TempDir()
	cfg := tether.DefaultConfig()
	cfg.Server.Socket = filepath.Join(dir, "t.sock")
	cfg.Admin.Socket = filepath.Join(dir, "admin.sock")
	bc := tether.DefaultBackendConfig("sqlite", filepath.Join(dir, "t.db"))
	tweak(&bc)
	cfg.Backends = map[string]tether.BackendConfig{"main": bc}
	cfg.Server.DefaultBackend = "main"
	b, err := sqlite.New(bc)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(cfg, map[string]tether.Backend{"main": b}, nil)
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	l, err := admin.Listen(cfg.Admin, srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l.Close(ctx)
		srv.Shutdown(ctx)
	})
	return cfg, srv
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), args)
	return out.String() + errOut.String(), err
}

// TestCLI runs each command against a live tetherd.
func TestCLI(t *testing.T) {
	php, adm := serve(t)
	flags := []string{"-socket", php, "-admin", adm}

	out, err := run(t, append(flags, "query", "CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)")...)
	if err != nil {
		t.Fatalf("query: %v\n%s", err, out)
	}
	if _, err := run(t, append(flags, "query", "INSERT INTO kv VALUES (?, 42)", "answer")...); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, append(flags, "query", "SELECT k, v FROM kv")...)
	if err != nil || !strings.Contains(out, "answer") || !strings.Contains(out, "42") || !strings.Contains(out, "(1 rows)") {
		t.Errorf("query: %v\n%s", err, out)
	}
	out, err = run(t, append(flags, "query", "SELECT * FROM missing")...)
	if err == nil || !strings.Contains(err.Error(), "backend_error") {
		t.Errorf("a failing query: %v\n%s", err, out)
	}

	// The admin API counted them.
	_, metrics, err := adminGet(context.Background(), adm, "/metrics")
	for _, want := range []string{`tether_requests_total{backend="main",code="ok",op="query"} 3`,
		`tether_requests_total{backend="main",code="backend_error",op="query"} 1`,
		`tether_request_duration_seconds_bucket{backend="main",op="query",le="+Inf"} 4`,
		`tether_request_duration_seconds_count{backend="main",op="query"} 4`} {
		if err != nil || !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("/metrics has no line %q (%v)", want, err)
		}
	}

	out, err = run(t, append(flags, "status")...)
	for _, want := range []string{"state", "ready", "clients", "BACKEND", "main", "sqlite", "result cache"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("status has no %q (%v):\n%s", want, err, out)
		}
	}
	out, err = run(t, append(flags, "pools")...)
	if err != nil || !strings.Contains(out, "main") || !strings.Contains(out, "OPEN") {
		t.Errorf("pools: %v\n%s", err, out)
	}
	out, err = run(t, append(flags, "stats")...)
	if err != nil || !strings.Contains(out, "hits / misses") {
		t.Errorf("stats: %v\n%s", err, out)
	}
	out, err = run(t, append(flags, "-json", "status")...)
	var snap server.Snapshot
	if err != nil || json.Unmarshal([]byte(out), &snap) != nil || !snap.Ready || len(snap.Pools) != 1 {
		t.Errorf("status -json: %v\n%s", err, out)
	}
	out, err = run(t, append(flags, "ping")...)
	if err != nil || !strings.Contains(out, "pong from") || !strings.Contains(out, "ready") {
		t.Errorf("ping: %v\n%s", err, out)
	}

	// clients: a PHP-like client that holds its socket, seen by its pid.
	held, err := net.Dial("unix", php)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	out, err = run(t, append(flags, "-json", "clients")...)
	var list []server.ClientSnapshot
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].PID != os.Getpid() || list[0].TCP {
		t.Errorf("clients -json: want this process's one held connection: %v\n%s", err, out)
	}
	out, err = run(t, append(flags, "clients")...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(out, "1 clients") {
		t.Errorf("clients: %v\n%s", err, out)
	}

	// A tetherd that is not there: a clear error.
	_, err = run(t, "-admin", filepath.Join(t.TempDir(), "none.sock"), "status")
	if err == nil || !strings.Contains(err.Error(), "is tetherd running") {
		t.Errorf("status without tetherd: %v", err)
	}
	if _, err = run(t, append(flags, "frobnicate")...); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("unknown command: %v", err)
	}
}

// tetherdOnce builds cmd/tetherd once for the tests of tether check, which
// runs it.
var tetherdOnce struct {
	sync.Once
	path string
	err  error
}

// tetherdBinary returns a tetherd built from this tree.
func tetherdBinary(t *testing.T) string {
	t.Helper()
	tetherdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tether-check-")
		if err != nil {
			tetherdOnce.err = err
			return
		}
		tetherdOnce.path = filepath.Join(dir, "tetherd")
		out, err := exec.Command("go", "build", "-o", tetherdOnce.path, "../tetherd").CombinedOutput()
		if err != nil {
			tetherdOnce.err = fmt.Errorf("go build tetherd: %v\n%s", err, out)
		}
	})
	if tetherdOnce.err != nil {
		t.Fatal(tetherdOnce.err)
	}
	return tetherdOnce.path
}

// TestCheck validates config files through tetherd -check.
func TestCheck(t *testing.T) {
	bin := tetherdBinary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[backends.main]\ntype = \"sqlite\"\ndsn = \""+filepath.Join(dir, "x.db")+"\"\n"), 0o644)
	if out, err := run(t, "check", "-tetherd", bin, good); err != nil || !strings.Contains(out, "config ok") {
		t.Errorf("check good: %v %s", err, out)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[backends.main]\ntype = \"oracle\"\ndsn = \"x\"\n"), 0o644)
	if out, err := run(t, "check", "-tetherd", bin, bad); err == nil || !strings.Contains(out, "backends.main.type") {
		t.Errorf("check bad: %v\n%s", err, out)
	}
	t.Setenv("TETHERD", bin) // found without the flag
	if out, err := run(t, "check", good); err != nil || !strings.Contains(out, "config ok") {
		t.Errorf("check good with $TETHERD: %v %s", err, out)
	}
	t.Setenv("TETHERD", filepath.Join(dir, "no-such-tetherd"))
	if out, err := run(t, "check", good); err == nil {
		t.Errorf("check with a missing tetherd passed:\n%s", out)
	}
}

// TestCheck_Backends: check builds every backend (a malformed DSN fails,
// naming the backend), and --connect logs in to each (a wrong password fails,
// with the server's answer).
func TestCheck_Backends(t *testing.T) {
	t.Setenv("TETHERD", tetherdBinary(t))
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.toml")
	os.WriteFile(malformed, []byte("[backends.main]\ntype = \"mysql\"\ndsn = \"app:pw@tcp(localhost:3306/app\"\n"), 0o644)
	if out, err := run(t, "check", malformed); err == nil || !strings.Contains(out, "backends.main (mysql)") || !strings.Contains(out, "dsn") {
		t.Errorf("check of a malformed DSN: %v\n%s", err, out)
	}
	pg := os.Getenv("TETHER_TEST_POSTGRES_DSN")
	if pg == "" {
		if os.Getenv("TETHER_REQUIRE_BACKENDS") == "1" {
			t.Fatal("TETHER_TEST_POSTGRES_DSN is not set and TETHER_REQUIRE_BACKENDS=1")
		}
		t.Skip("TETHER_TEST_POSTGRES_DSN is not set")
	}
	wrong := filepath.Join(dir, "wrong.toml")
	os.WriteFile(wrong, []byte("[backends.main]\ntype = \"postgres\"\ndsn = '"+pg+" password=not-the-password'\n"), 0o644)
	if out, err := run(t, "check", wrong); err != nil {
		t.Errorf("check without --connect connects nothing: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"check", "--connect", wrong}, {"check", wrong, "--connect"}} {
		out, err := run(t, args...)
		if err == nil || !strings.Contains(out, "FAIL backends.main (postgres)") || !strings.Contains(out, "password authentication failed") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

// TestPools_Limits: tether pools shows each pool's limits in force, the new
// max_conns once a reload changed it.
func TestPools_Limits(t *testing.T) {
	cfg, srv := serveWith(t, func(bc *tether.BackendConfig) { bc.MaxConns = 5 })
	// column returns the value of column col in the row of backend main.
	column := func(col string) string {
		t.Helper()
		out, err := run(t, "-admin", cfg.Admin.Socket, "pools")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		at := strings.Index(lines[0], col)
		for _, line := range lines[1:] {
			if strings.HasPrefix(line, "main ") && at >= 0 && at < len(line) {
				return strings.Fields(line[at:])[0]
			}
		}
		t.Fatalf("no column %s for main in\n%s", col, out)
		return ""
	}
	if got := column("MAX"); got != "5" {
		t.Fatalf("MAX %s, want 5", got)
	}
	if got := column("ACQUIRE"); got != "1s" {
		t.Fatalf("ACQUIRE %s, want 1s", got)
	}
	next := cfg
	bc := cfg.Backends["main"]
	bc.MaxConns = 3
	next.Backends = map[string]tether.BackendConfig{"main": bc}
	if _, err := srv.Reload(context.Background(), next, tether.NewBackend); err != nil {
		t.Fatal(err)
	}
	if got := column("MAX"); got != "3" {
		t.Fatalf("after a reload to max_conns 3, MAX %s", got)
	}
}

// topoSource is an admin source whose one backend is replicated.
type topoSource struct{ snap server.Snapshot }

func (s topoSource) Snapshot() server.Snapshot { return s.snap }

// TestPools_Topology: tether pools and tether status print a host table
// under a replicated backend (role, state, lag, reads, writes, shunned) and
// its failovers in time order, read from /status.json.
func TestPools_Topology(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 1, 0, time.UTC)
	snap := server.Snapshot{Version: "v1", Ready: true, Pools: []server.PoolSnapshot{
		{Backend: "one", Type: "sqlite"},
		{Backend: "maria", Type: "mysql", Stats: tether.PoolStats{Open: 5}, Topology: &tether.TopologyStats{
			Hosts: []tether.HostStats{
				{Addr: "db1:3306", Role: "primary", State: "writes", CheckedAt: at, Writes: 17, Pool: tether.PoolStats{Open: 3, InUse: 1}},
				{Addr: "db2:3306", Role: "replica", State: "shunned", Why: "7s behind, more than max_replica_lag 5s", LagSeconds: 7.25, LagKnown: true,
					CheckedAt: at, Reads: 40, Shunned: 2, Pool: tether.PoolStats{Open: 2}},
			},
			Failovers: []tether.Failover{
				{At: at, From: "db2:3306", To: "", Why: "db2:3306: replica, read-only"},
				{At: at.Add(1500 * time.Millisecond), From: "", To: "db1:3306", Why: "db1:3306: primary"},
			},
			FailoversTotal: 5, CausalPrimary: 6, CausalReplica: 9, PrimaryWaits: 2, PrimaryWaitTimeouts: 1,
		}},
	}}
	sock := filepath.Join(t.TempDir(), "admin.sock")
	l, err := admin.Listen(tether.AdminConfig{Socket: sock}, topoSource{snap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	for _, cmd := range []string{"pools", "status"} {
		out, err := run(t, "-admin", sock, cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		for _, want := range [][]string{
			{"maria: hosts"},
			{"HOST", "ROLE", "STATE", "LAG", "READS", "WRITES", "SHUNNED", "OPEN", "IN", "USE", "CHECKED", "WHY"},
			{"db1:3306", "primary", "writes", "-", "0", "17", "0", "3", "1", "12:00:01.000", "-"},
			{"db2:3306", "replica", "shunned", "7.250s", "40", "0", "2", "2", "0", "12:00:01.000", "7s", "behind,", "more", "than", "max_replica_lag", "5s"},
			{"reads", "after", "a", "client's", "write:", "6", "on", "the", "primary,", "9", "on", "a", "replica", "that", "had", "it"},
			{"waits", "for", "a", "primary:", "2", "(1", "timed", "out)"},
			{"failovers:", "5"},
			{"the", "last", "2:"},
			{"2026-11-27", "12:00:01.000", "db2:3306", "->", "(none)", "db2:3306:", "replica,", "read-only"},
			{"2026-11-27", "12:00:02.500", "(none)", "->", "db1:3306", "db1:3306:", "primary"},
		} {
			if !hasLine(out, want) {
				t.Errorf("%s has no line %q:\n%s", cmd, strings.Join(want, " "), out)
			}
		}
		if strings.Contains(out, "one: hosts") {
			t.Errorf("%s: a host table for a backend of one server:\n%s", cmd, out)
		}
		// The failovers come in time order.
		if i, j := strings.Index(out, "-> (none)"), strings.Index(out, "-> db1:3306"); i < 0 || j < i {
			t.Errorf("%s: failovers out of order:\n%s", cmd, out)
		}
	}
}

// hasLine reports whether a line of out has exactly the fields want.
func hasLine(out string, want []string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
