package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-php/tether/wire"
)

func writeConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	path := filepath.Join(dir, "tetherd.toml")
	cfg := `
[server]
socket = "` + filepath.Join(dir, "t.sock") + `"
socket_mode = "0600"
` + extra + `
[log]
level = "warn"

[backends.main]
type = "sqlite"
dsn = "` + filepath.Join(dir, "t.db") + `"
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs Main in the background and waits for its socket.
func start(t *testing.T, args ...string) (*Main, chan error, string) {
	t.Helper()
	var stderr bytes.Buffer
	ready := make(chan struct{})
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Signals: make(chan os.Signal, 2), OnReady: func() { close(ready) }}
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), args) }()
	sock := filepath.Join(filepath.Dir(args[len(args)-1]), "t.sock")
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("tetherd exited before it was ready: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("tetherd not ready after 30 s")
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("ready, but socket %s: %v", sock, err)
	}
	return m, done, sock
}

func roundTrip(t *testing.T, c net.Conn, r wire.Request) *wire.Reply {
	t.Helper()
	b, st := wire.BeginFrame(nil)
	if _, err := c.Write(wire.EndFrame(wire.AppendRequest(b, &r), st)); err != nil {
		t.Fatal(err)
	}
	return readReply(t, c, r.Op)
}

// readReply reads and decodes the next reply on c, to what (named in a
// failure).
func readReply(t *testing.T, c net.Conn, what any) *wire.Reply {
	t.Helper()
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("read reply to %v: %v", what, err)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	io.ReadFull(c, p)
	rep, err := wire.DecodeReply(p)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestMain_Check(t *testing.T) {
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard}
	if err := m.Run(context.Background(), []string{"-check", "-config", writeConfig(t, t.TempDir(), "")}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "config ok") {
		t.Fatalf("output %q", out.String())
	}
	err := m.Run(context.Background(), []string{"-check", "-config", writeConfig(t, t.TempDir(), `max_frame_bytes = 3`)})
	if err == nil || !strings.Contains(err.Error(), "server.max_frame_bytes = 3") {
		t.Fatalf("invalid config: %v", err)
	}
}

func TestMain_SocketFile(t *testing.T) {
	t.Run("ModeFromConfig", func(t *testing.T) {
		m, done, sock := start(t, "-config", writeConfig(t, t.TempDir(), ""))
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket mode %v, %v", fi.Mode(), err)
		}
		m.Signals <- syscall.SIGTERM
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Fatalf("socket left behind: %v", err)
		}
	})
	t.Run("OldSocketReplaced", func(t *testing.T) {
		dir := t.TempDir()
		ln, err := net.Listen("unix", filepath.Join(dir, "t.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close() // leaves a stale socket file, as a crashed daemon would
		m, done, _ := start(t, "-config", writeConfig(t, dir, ""))
		m.Signals <- syscall.SIGTERM
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("RegularFileKept", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "t.sock")
		os.WriteFile(path, []byte("precious"), 0o644)
		m := &Main{Stdout: io.Discard, Stderr: io.Discard, Signals: make(chan os.Signal, 1)}
		err := m.Run(context.Background(), []string{"-config", writeConfig(t, dir, "")})
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("got %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "precious" {
			t.Fatal("a regular file at the socket path was removed")
		}
	})
}

const slowSQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c"

func TestMain_Signals(t *testing.T) {
	t.Run("DrainThenExit", func(t *testing.T) {
		m, done, sock := start(t, "-config", writeConfig(t, t.TempDir(), `shutdown_grace = "300ms"`))
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tx := roundTrip(t, c, wire.Request{ID: 1, Op: wire.OpBegin}).Fields["tx"]
		if tx == nil {
			t.Fatal("no transaction")
		}
		m.Signals <- syscall.SIGTERM
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("did not exit after SIGTERM with an idle transaction open")
		}
		if _, err := os.Lstat(sock); err == nil {
			t.Fatal("the socket file is left behind")
		}
	})
	t.Run("SIGHUPKeepsServingAndReopensTheLog", func(t *testing.T) {
		dir := t.TempDir()
		logPath := filepath.Join(dir, "tetherd.log")
		cfg := writeConfig(t, dir, "")
		b, _ := os.ReadFile(cfg)
		os.WriteFile(cfg, []byte(strings.Replace(string(b), `level = "warn"`, `level = "info"`+"\nfile = \""+logPath+"\"", 1)), 0o644)
		m, done, sock := start(t, "-config", cfg)
		os.Rename(logPath, logPath+".1") // what logrotate does before it signals
		m.Signals <- syscall.SIGHUP
		// The reopened log is the only sign of the SIGHUP's handling.
		var text []byte
		waitFor(t, "the SIGHUP line in the reopened log", func() bool {
			text, _ = os.ReadFile(logPath)
			return strings.Contains(string(text), "SIGHUP")
		})
		if !strings.Contains(string(text), "log reopened") {
			t.Fatalf("no SIGHUP line in the reopened log: %q", text)
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("not serving after SIGHUP: %v", err)
		}
		defer c.Close()
		if rep := roundTrip(t, c, wire.Request{ID: 1, Op: wire.OpPing}); rep.Error() != nil {
			t.Fatal(rep.Error())
		}
		select {
		case err := <-done:
			t.Fatalf("SIGHUP stopped tetherd: %v", err)
		default:
		}
		m.Signals <- syscall.SIGTERM
		<-done
	})
	t.Run("SecondSignalExitsAtOnce", func(t *testing.T) {
		m, done, sock := start(t, "-config", writeConfig(t, t.TempDir(), `shutdown_grace = "1m"`))
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The slow query, then a ping behind it on the same connection: the
		// ping's answer (ahead of the query's) says the query was read and
		// is in flight.
		b, st := wire.BeginFrame(nil)
		b = wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: 1, Op: wire.OpQuery, SQL: slowSQL, TimeoutMS: 60000}), st)
		b, st = wire.BeginFrame(b)
		b = wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: 2, Op: wire.OpPing}), st)
		c.Write(b)
		if rep := readReply(t, c, "the query and the ping"); rep.ID != 2 {
			t.Fatalf("got the answer to request %d first, want the ping's", rep.ID)
		}
		m.Signals <- syscall.SIGTERM
		// Under test: tetherd does not exit while the request runs and grace
		// is left. A window in which it must not, not a wait.
		select {
		case err := <-done:
			t.Fatalf("exited with a request in flight and grace left: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		start := time.Now()
		m.Signals <- syscall.SIGINT
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "second signal") {
				t.Fatalf("got %v", err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("second signal took %s", el)
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Fatal("the socket file is left behind after a second signal")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("second signal did not exit")
		}
	})
}

// TestMain_Admin: the admin API answers on its own socket beside the PHP
// socket (admin.socket "auto") while tetherd runs, and the socket is gone
// once it stops.
func TestMain_Admin(t *testing.T) {
	dir := t.TempDir()
	m, done, _ := start(t, "-config", writeConfig(t, dir, ""))
	sock := filepath.Join(dir, "t-admin.sock")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get("http://tetherd" + path) // start waited for ready: the admin socket listens
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{`tether_pool_connections{backend="main",state="open",type="sqlite"} `, "tether_build_info{version=",
		"tether_ready 1", "tether_clients ", "tether_cache_hits_total 0", `tether_cache_invalidations_total{cause="change_stream"} 0`,
		"go_goroutines ", "process_resident_memory_bytes ", "tether_event_loop_busy_seconds_total ", "tether_event_loop_turns_total ",
		`tether_transaction_rollbacks_total{cause="idle_timeout"} 0`, `tether_pool_dials_total{backend="main"} `, "tether_pools_retiring 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	_, status := get("/status.json")
	var snap struct {
		Ready bool `json:"ready"`
		Pools []struct {
			Backend string `json:"backend"`
			Type    string `json:"type"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(status), &snap); err != nil || !snap.Ready || len(snap.Pools) != 1 || snap.Pools[0].Backend != "main" {
		t.Errorf("/status.json: %v %s", err, status)
	}
	m.Signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("admin socket left behind: %v", err)
	}
}

// TestMain_Reload: tether reload (POST /reload on the admin socket) and SIGHUP
// apply the config file anew; a broken file changes nothing and says why.
func TestMain_Reload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "")
	m, done, sock := start(t, "-config", cfgPath)
	adminSock := filepath.Join(dir, "t-admin.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", adminSock)
	}}, Timeout: 30 * time.Second}
	postReload := func() (int, map[string]any) {
		t.Helper()
		resp, err := hc.Post("http://tetherd/reload", "", nil) // start waited for ready: the admin socket listens
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("/reload: %v", err)
		}
		return resp.StatusCode, body
	}
	base, _ := os.ReadFile(cfgPath)
	withSide := string(base) + "\n[backends.side]\ntype = \"sqlite\"\ndsn = \"" + filepath.Join(dir, "side.db") + "\"\n"
	os.WriteFile(cfgPath, []byte(withSide), 0o644)
	code, body := postReload()
	if code != 200 || fmt.Sprint(body["added"]) != "[side]" || fmt.Sprint(body["unchanged"]) != "[main]" {
		t.Fatalf("reload adding side: %d %v", code, body)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep := roundTrip(t, c, wire.Request{ID: 1, Op: wire.OpQuery, Backend: "side", SQL: "SELECT 1"}); rep.Error() != nil {
		t.Fatalf("side after the reload: %v", rep.Error())
	}

	os.WriteFile(cfgPath, []byte(withSide+"\n[backends.broken\n"), 0o644)
	code, body = postReload()
	if code != 409 || !strings.Contains(fmt.Sprint(body["error"]), "tetherd.toml") || !strings.Contains(fmt.Sprint(body["error"]), "nothing changed") {
		t.Fatalf("reload of a broken file: %d %v", code, body)
	}
	if rep := roundTrip(t, c, wire.Request{ID: 2, Op: wire.OpQuery, Backend: "side", SQL: "SELECT 1"}); rep.Error() != nil {
		t.Fatalf("side after a failed reload: %v", rep.Error())
	}

	os.WriteFile(cfgPath, []byte(strings.Replace(withSide, "[log]", "max_client_conns = 77\n[log]", 1)), 0o644)
	code, body = postReload()
	if code != 200 || fmt.Sprint(body["need_restart"]) != "[server.max_client_conns]" {
		t.Fatalf("reload with a setting that needs a restart: %d %v", code, body)
	}

	os.WriteFile(cfgPath, base, 0o644) // side removed, by SIGHUP this time
	m.Signals <- syscall.SIGHUP
	// Nothing tells a test that a SIGHUP's reload is done: poll what it
	// changes, with a deadline.
	for i := 0; ; i++ {
		rep := roundTrip(t, c, wire.Request{ID: 3, Op: wire.OpQuery, Backend: "side", SQL: "SELECT 1"})
		if e := rep.Error(); e != nil && e["code"] == "unknown_backend" {
			break
		}
		if i == 500 {
			t.Fatal("side still served 5 s after SIGHUP removed it from the file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.Signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
