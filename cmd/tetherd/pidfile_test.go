package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond (a file's state, which has no event to wait on) until
// it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPID returns the pid a pid file holds, or 0.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// TestMain_PIDFile: server.pid_file holds tetherd's pid once it serves, and
// is removed on a clean exit; a stale one (a crash) is replaced.
func TestMain_PIDFile(t *testing.T) {
	dir := t.TempDir()
	pidPath := filepath.Join(dir, "run", "tetherd.pid")
	os.Mkdir(filepath.Dir(pidPath), 0o755)
	os.WriteFile(pidPath, []byte("999999\n"), 0o644) // left by a crash
	m, done, _ := start(t, "-config", writeConfig(t, dir, `pid_file = "`+pidPath+`"`))
	if got := readPID(pidPath); got != os.Getpid() { // written before start saw it ready
		t.Fatalf("pid file holds %d once tetherd is ready, want %d", got, os.Getpid())
	}
	if fi, err := os.Stat(pidPath); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("pid file mode: %v %v", fi.Mode(), err)
	}
	m.Signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Fatalf("pid file left behind after a clean exit: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "run", ".tetherd.pid.*")); len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}

	t.Run("UnwritableFailsTheStart", func(t *testing.T) {
		dir := t.TempDir()
		m := &Main{Stdout: io.Discard, Stderr: io.Discard, Signals: make(chan os.Signal, 1)}
		err := m.Run(context.Background(), []string{"-config", writeConfig(t, dir, `pid_file = "`+filepath.Join(dir, "no-such-dir", "t.pid")+`"`)})
		if err == nil || !strings.Contains(err.Error(), "server.pid_file") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestMain_PIDFileUpgrade runs the tetherd binary and upgrades it (POST
// /upgrade, as tether upgrade does): the pid file follows the process that
// serves, and the last one removes it when it stops.
func TestMain_PIDFileUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tetherd")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tetherd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build tetherd: %v\n%s", err, out)
	}
	pidPath := filepath.Join(dir, "tetherd.pid")
	cfg := writeConfig(t, dir, `pid_file = "`+pidPath+`"`)
	log, _ := os.Create(filepath.Join(dir, "stderr.log"))
	defer log.Close()
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if pid := readPID(pidPath); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
	}()
	first := cmd.Process.Pid
	waitFor(t, "the first pid", func() bool { return readPID(pidPath) == first })

	admin := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "t-admin.sock"))
	}}, Timeout: 90 * time.Second}
	resp, err := admin.Post("http://tetherd/upgrade", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		OldPID int `json:"old_pid"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || rep.OldPID != first {
		t.Fatalf("upgrade: %d %v %+v", resp.StatusCode, err, rep)
	}
	select {
	case <-exited: // the old process handed over and exited
	case <-time.After(30 * time.Second):
		t.Fatal("the old tetherd did not exit after the upgrade")
	}
	second := readPID(pidPath)
	if second == 0 || second == first || syscall.Kill(second, 0) != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
		t.Fatalf("after the upgrade the pid file holds %d (old %d), not a live new process\n%s", second, first, b)
	}
	// The old process's exit must not have removed the new one's file, nor
	// may it come back to the old pid.
	if got := readPID(pidPath); got != second {
		t.Fatalf("pid file %d, want %d", got, second)
	}
	if err := syscall.Kill(second, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pid file's removal", func() bool { _, err := os.Stat(pidPath); return os.IsNotExist(err) })
	waitFor(t, "the new tetherd's exit", func() bool { return syscall.Kill(second, 0) != nil })
}
