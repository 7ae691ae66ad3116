package server_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlite"
	"github.com/tether-php/tether/server"
	"github.com/tether-php/tether/wire"
)

// TestServer_HandOver plays a binary upgrade inside one process: a second
// server serves the first one's listening socket, and the first hands its
// clients over. An idle client is closed at once; one with a transaction open
// finishes it (and commits) on the old server first; new clients reach the
// new server; the socket file stays.
func TestServer_HandOver(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "t.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	start := func(given net.Listener) (*server.Server, chan error) {
		cfg := tether.DefaultConfig()
		cfg.Server.Socket = sock
		cfg.Backends = map[string]tether.BackendConfig{"main": tether.DefaultBackendConfig("sqlite", filepath.Join(dir, "t.db"))}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		b, err := sqlite.New(cfg.Backends["main"])
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New(cfg, map[string]tether.Backend{"main": b}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		srv.ListenWith = func(string, string, func(string, string) (net.Listener, error)) (net.Listener, error) {
			return given, nil
		}
		if err := srv.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve() }()
		return srv, served
	}
	old, oldServed := start(ln)
	raw := func() *client {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &client{t: t, conn: c}
	}
	idle, inTx := raw(), raw()
	idle.ok(wire.Request{ID: 1, Op: wire.OpExec, SQL: "CREATE TABLE moved (id INT)"})
	tx := toUint(inTx.ok(wire.Request{ID: 1, Op: wire.OpBegin}).Fields["tx"])
	inTx.ok(wire.Request{ID: 2, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO moved VALUES (1)"})

	// The new server: the same listening socket (as tableflip passes it).
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	dup, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fresh, freshServed := start(dup)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fresh.Shutdown(ctx)
		<-freshServed
	}()

	handed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		handed <- old.HandOver(ctx)
	}()
	// The idle client is closed at once.
	idle.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.conn.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Fatalf("the idle client was not closed: %v", err)
	}
	// The one in a transaction is served until it ends, then closed: the
	// sweep that closed the idle client (the event above) passed over it.
	inTx.ok(wire.Request{ID: 3, Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO moved VALUES (2)"})
	inTx.ok(wire.Request{ID: 4, Op: wire.OpQuery, SQL: "SELECT 1"}) // outside the transaction, on the same socket
	inTx.ok(wire.Request{ID: 5, Op: wire.OpCommit, Tx: tx})
	inTx.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := inTx.conn.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Fatalf("the client was not closed after its transaction ended: %v", err)
	}
	select {
	case err := <-handed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("HandOver did not return once every client was gone")
	}
	if err := <-oldServed; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the socket file went with the old server: %v", err)
	}
	// New clients reach the new server, which sees the committed rows.
	c := raw()
	if got := c.ok(wire.Request{ID: 1, Op: wire.OpQuery, SQL: "SELECT COUNT(*) FROM moved"}).Fields["rows"].([]any)[0].([]any)[0]; toUint(got) != 2 {
		t.Fatalf("the new server sees %v rows, want the 2 the transaction committed on the old one", got)
	}
}
