package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tether-php/tether/wire"
)

// env is what the campaigns share: the servers run.sh started, a tetherd
// they start and stop, and independent connections that watch the servers.
type env struct {
	quick      bool
	dir        string
	tetherdBin string
	// tetherd's own users (their sessions are counted), and watchers that
	// connect as another user.
	mysqlDSN, pgDSN string
	mysqlWatch      *sql.DB
	pgWatch         *sql.DB
	// mysqlCount connects as tetherd's user: MariaDB shows a user without
	// the PROCESS privilege only its own sessions.
	mysqlCount *sql.DB
	mariadbPID int
	nginxURL   string // nginx's base: /base/ and /admin route apart

	tetherd *exec.Cmd
	socket  string
	logPath string
	// extraConfig is appended to the config of the tetherds started (a
	// campaign's own backends).
	extraConfig string
}

func newEnv(quick bool) (*env, error) {
	e := &env{quick: quick}
	get := func(key string) string {
		v := os.Getenv(key)
		if v == "" {
			panic(fmt.Sprintf("%s is not set (run tests/faults/run.sh)", key))
		}
		return v
	}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		e.dir = get("FAULTS_DIR")
		e.tetherdBin = get("FAULTS_TETHERD")
		e.mysqlDSN, e.pgDSN = get("FAULTS_MYSQL_DSN"), get("FAULTS_PG_DSN")
		e.nginxURL = get("FAULTS_NGINX")
		e.mariadbPID, _ = strconv.Atoi(get("FAULTS_MARIADB_PID"))
		if e.mysqlWatch, err = sql.Open("mysql", get("FAULTS_MYSQL_WATCH_DSN")); err != nil {
			return
		}
		if e.pgWatch, err = sql.Open("pgx", get("FAULTS_PG_WATCH_DSN")); err != nil {
			return
		}
		e.mysqlCount, err = sql.Open("mysql", e.mysqlDSN)
	}()
	if err != nil {
		return nil, err
	}
	e.mysqlWatch.SetMaxOpenConns(4)
	e.pgWatch.SetMaxOpenConns(4)
	e.mysqlCount.SetMaxOpenConns(1) // one session of tetherd's user that is not tetherd's: itself, left out
	e.socket = filepath.Join(e.dir, "tether.sock")
	return e, nil
}

func (e *env) close() {
	e.stopTetherd()
	e.mysqlWatch.Close()
	e.pgWatch.Close()
	e.mysqlCount.Close()
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> faults: "+format+"\n", args...)
}

// scale returns full, or quick in -quick mode.
func (e *env) scale(full, quick int) int {
	if e.quick {
		return quick
	}
	return full
}

// startTetherd starts a tetherd with backends maria (MariaDB), pg
// (PostgreSQL) and web (nginx's /base), pools of maxConns, and extra lines
// in its [server] table; it returns once its socket is there.
func (e *env) startTetherd(maxConns int, server string) error {
	e.stopTetherd()
	cfg := fmt.Sprintf(`[server]
socket = %q
default_backend = "maria"
shutdown_grace = "5s"
default_timeout = "30s"
%s

[log]
level = "info"

[backends.maria]
type = "mysql"
dsn = %q
max_conns = %d
min_conns = %d
acquire_timeout = "10s"

[backends.pg]
type = "postgres"
dsn = %q
max_conns = %d
min_conns = %d
acquire_timeout = "10s"

[backends.web]
type = "http"
dsn = %q
`, e.socket, server, e.mysqlDSN, maxConns, maxConns, e.pgDSN, maxConns, maxConns, e.nginxURL+"/base") + e.extraConfig
	path := filepath.Join(e.dir, "tetherd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	e.logPath = filepath.Join(e.dir, "tetherd.log")
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	os.Remove(e.socket)
	cmd := exec.Command(e.tetherdBin, "-config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	e.tetherd = cmd
	for i := 0; i < 300; i++ {
		// Up once a connect succeeds: the socket file appears at bind(),
		// before listen(), and a client in between is refused.
		if fi, err := os.Stat(e.socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := e.dial(); err == nil {
				c.close()
				return nil
			}
		}
		if !e.alive() {
			return fmt.Errorf("tetherd exited at start; see %s", e.logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("tetherd's socket never appeared")
}

// alive reports whether the tetherd started is still running.
func (e *env) alive() bool {
	if e.tetherd == nil {
		return false
	}
	return syscall.Kill(e.tetherd.Process.Pid, 0) == nil && !exited(e.tetherd.Process.Pid)
}

// exited reports a zombie: the process ended and was not waited for.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// stopTetherd stops the tetherd started, if any: SIGTERM, then SIGKILL.
func (e *env) stopTetherd() {
	if e.tetherd == nil {
		return
	}
	cmd := e.tetherd
	e.tetherd = nil
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// memory returns tetherd's resident memory now and at its peak.
func (e *env) memory() (rss, peak int64) {
	if e.tetherd == nil {
		return 0, 0
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.tetherd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// sessions counts tetherd's sessions on MariaDB or PostgreSQL (its user's).
func (e *env) sessions(ctx context.Context, db string) (int, error) {
	var n int
	var err error
	if db == "maria" {
		err = e.mysqlCount.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID()").Scan(&n)
	} else {
		err = e.pgWatch.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = 'tether_pool'").Scan(&n)
	}
	return n, err
}

// watch returns the independent connection to a database.
func (e *env) watch(db string) *sql.DB {
	if db == "maria" {
		return e.mysqlWatch
	}
	return e.pgWatch
}

// client is a raw protocol client of tetherd, as the PHP client is, without
// its conveniences.
type client struct {
	conn net.Conn
	id   uint32
}

func (e *env) dial() (*client, error) {
	c, err := net.Dial("unix", e.socket)
	if err != nil {
		return nil, err
	}
	return &client{conn: c}, nil
}

// send writes one request, numbering it, and returns its id.
func (c *client) send(r wire.Request) (uint32, error) {
	c.id++
	r.ID = c.id
	b, st := wire.BeginFrame(nil)
	_, err := c.conn.Write(wire.EndFrame(wire.AppendRequest(b, &r), st))
	return r.ID, err
}

// recv reads one reply.
func (c *client) recv(timeout time.Duration) (*wire.Reply, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	var h [4]byte
	if _, err := io.ReadFull(c.conn, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(c.conn, p); err != nil {
		return nil, err
	}
	return wire.DecodeReply(p)
}

// do sends r and reads its reply; a reply that is an error is returned as
// one (its code first).
func (c *client) do(r wire.Request, timeout time.Duration) (*wire.Reply, error) {
	if _, err := c.send(r); err != nil {
		return nil, err
	}
	rep, err := c.recv(timeout)
	if err != nil {
		return nil, err
	}
	if e := rep.Error(); e != nil {
		return rep, fmt.Errorf("%v: %v", e["code"], e["message"])
	}
	return rep, nil
}

func (c *client) close() { c.conn.Close() }

// errCode returns the code of a reply's error, "" for none.
func errCode(rep *wire.Reply) string {
	if rep == nil {
		return ""
	}
	if e := rep.Error(); e != nil {
		return fmt.Sprint(e["code"])
	}
	return ""
}

// sleepSQL returns a statement that sleeps on db.
func sleepSQL(db string, seconds float64) string {
	if db == "maria" {
		return fmt.Sprintf("SELECT SLEEP(%g)", seconds)
	}
	return fmt.Sprintf("SELECT pg_sleep(%g)", seconds)
}

// placeholder returns db's n-th placeholder.
func placeholder(db string, n int) string {
	if strings.HasPrefix(db, "maria") {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// sessionSampler records the most sessions tetherd held on a database at
// once, every 5 ms, until stopped.
type sessionSampler struct {
	most    int
	samples int
	err     error // the first failed count
	stopc   chan struct{}
	done    chan struct{}
}

func (e *env) sampleSessions(db string) *sessionSampler {
	s := &sessionSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			n, err := e.sessions(context.Background(), db)
			switch {
			case err != nil:
				if s.err == nil {
					s.err = err
				}
			default:
				s.samples++
				s.most = max(s.most, n)
			}
			select {
			case <-s.stopc:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the most sessions seen at once; an
// error if a count failed (a sampler that cannot see proves nothing).
func (s *sessionSampler) stop() (int, error) {
	close(s.stopc)
	<-s.done
	if s.err != nil {
		return s.most, fmt.Errorf("counting sessions: %w", s.err)
	}
	return s.most, nil
}

// sessionLimit is how many sessions tetherd may hold on db with a pool of
// maxConns: on MariaDB one more, the side connection that sends KILL QUERY
// for a statement whose client went away (docs/operations.md).
func sessionLimit(db string, maxConns int) int {
	if db == "maria" {
		return maxConns + 1
	}
	return maxConns
}
