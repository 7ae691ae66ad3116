package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain_PoolLimitsShown: a pool's limits in force are in /status.json and
// on the status page, and a reload that changes max_conns shows the new value
// in both once it is done.
func TestMain_PoolLimitsShown(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, `tx_idle_timeout = "42s"`)
	base, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(string(base)+"max_conns = 5\nmin_conns = 2\nacquire_timeout = \"750ms\"\nstmt_cache_size = 64\n"), 0o644)
	m, done, _ := start(t, "-config", cfgPath)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "t-admin.sock"))
	}}, Timeout: 30 * time.Second}
	do := func(method, path string) string {
		t.Helper()
		req, _ := http.NewRequest(method, "http://tetherd"+path, nil)
		resp, err := hc.Do(req) // start waited for ready: the admin socket listens
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	type limits struct {
		MaxConns       int    `json:"max_conns"`
		MinConns       int    `json:"min_conns"`
		AcquireTimeout string `json:"acquire_timeout"`
		IdleTimeout    string `json:"idle_timeout"`
		TxIdleTimeout  string `json:"tx_idle_timeout"`
		StmtCacheSize  int    `json:"stmt_cache_size"`
	}
	mainLimits := func() limits {
		t.Helper()
		var snap struct {
			Pools []struct {
				Backend  string `json:"backend"`
				Retiring bool   `json:"retiring"`
				Limits   limits `json:"limits"`
			} `json:"pools"`
		}
		if err := json.Unmarshal([]byte(do("GET", "/status.json")), &snap); err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Pools {
			if p.Backend == "main" && !p.Retiring {
				return p.Limits
			}
		}
		t.Fatal("no pool main in /status.json")
		return limits{}
	}
	want := limits{MaxConns: 5, MinConns: 2, AcquireTimeout: "750ms", IdleTimeout: "5m0s", TxIdleTimeout: "42s", StmtCacheSize: 64}
	if got := mainLimits(); got != want {
		t.Fatalf("/status.json limits %+v, want %+v", got, want)
	}
	page := do("GET", "/status")
	for _, cell := range []string{`max-conns">5<`, "750ms", "42s"} {
		if !strings.Contains(page, cell) {
			t.Errorf("the status page has no %q", cell)
		}
	}

	os.WriteFile(cfgPath, []byte(strings.Replace(string(mustRead(t, cfgPath)), "max_conns = 5", "max_conns = 3", 1)), 0o644)
	var rep struct{ Changed []string }
	if err := json.Unmarshal([]byte(do("POST", "/reload")), &rep); err != nil || len(rep.Changed) != 1 || rep.Changed[0] != "main" {
		t.Fatalf("reload: %v %+v", err, rep)
	}
	want.MaxConns = 3
	if got := mainLimits(); got != want {
		t.Fatalf("after the reload, /status.json limits %+v, want %+v", got, want)
	}
	if page := do("GET", "/status"); !strings.Contains(page, `max-conns">3<`) {
		t.Errorf("the status page does not show max_conns 3 after the reload")
	}
	if metrics := do("GET", "/metrics"); !strings.Contains(metrics, `tether_pool_max_connections{backend="main"} 3`) {
		t.Errorf("/metrics has no max_conns 3 after the reload")
	}
	m.Signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
