package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
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

// TestMain_RecentErrorsNameStatementAndClient: the status page's recent
// errors (an installer's expected "doesn't exist", on MariaDB and
// PostgreSQL) say which statement and which client each came from: the peer's
// pid and uid and tetherd's connection number, in /status.json and on the
// page, the number matching /clients.json.
func TestMain_RecentErrorsNameStatementAndClient(t *testing.T) {
	my := testDSN(t, "TETHER_TEST_MYSQL_DSN")
	pg := testDSN(t, "TETHER_TEST_POSTGRES_DSN")
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "")
	os.WriteFile(cfgPath, append(mustRead(t, cfgPath), []byte("[backends.my]\ntype = \"mysql\"\ndsn = '"+my+"'\n[backends.pg]\ntype = \"postgres\"\ndsn = '"+pg+"'\n")...), 0o644)
	m, done, sock := start(t, "-config", cfgPath)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "t-admin.sock"))
	}}, Timeout: 10 * time.Second}
	get := func(path string) string {
		t.Helper()
		resp, err := hc.Get("http://tetherd" + path) // start waited for ready: the admin socket listens
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := "SELECT option_value FROM wp_options_missing WHERE option_name = 'siteurl' /*" + strings.Repeat("x", 600) + "*/"
	for i, be := range []string{"my", "pg"} {
		rep := roundTrip(t, c, wire.Request{ID: uint32(i + 1), Op: wire.OpQuery, Backend: be, SQL: long})
		if rep.Error() == nil {
			t.Fatalf("%s: a query of a missing table succeeded", be)
		}
	}

	var clients []struct {
		Conn uint64 `json:"conn"`
		PID  int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(get("/clients.json")), &clients); err != nil || len(clients) != 1 {
		t.Fatalf("/clients.json: %v %+v", err, clients)
	}
	conn := clients[0].Conn
	if conn == 0 || clients[0].PID != os.Getpid() {
		t.Fatalf("/clients.json: %+v, want a connection number and pid %d", clients[0], os.Getpid())
	}

	var snap struct {
		RecentErrors []struct {
			Backend string `json:"backend"`
			SQL     string `json:"sql"`
			Message string `json:"message"`
			Client  *struct {
				Conn uint64 `json:"conn"`
				PID  int    `json:"pid"`
				UID  int    `json:"uid"`
			} `json:"client"`
		} `json:"recent_errors"`
	}
	if err := json.Unmarshal([]byte(get("/status.json")), &snap); err != nil || len(snap.RecentErrors) != 2 {
		t.Fatalf("/status.json recent errors: %v %+v", err, snap.RecentErrors)
	}
	for _, e := range snap.RecentErrors {
		if !strings.HasPrefix(e.SQL, "SELECT option_value FROM wp_options_missing") || len(e.SQL) > 600 {
			t.Errorf("%s: the statement, cut: %q", e.Backend, e.SQL)
		}
		if c := e.Client; c == nil || c.Conn != conn || c.PID != os.Getpid() || c.UID != os.Getuid() {
			t.Errorf("%s: client %+v, want conn %d pid %d uid %d", e.Backend, c, conn, os.Getpid(), os.Getuid())
		}
	}
	page := html.UnescapeString(get("/status"))
	if want := fmt.Sprintf("pid %d uid %d, conn %d", os.Getpid(), os.Getuid(), conn); strings.Count(page, want) < 2 {
		t.Errorf("the status page does not name the client %q of both errors", want)
	}
	if !strings.Contains(page, "wp_options_missing") {
		t.Error("the status page does not show the statement")
	}
	m.Signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
