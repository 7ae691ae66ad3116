package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tether-php/tether/wire"
)

// A backend killed and restarted under mixed load: the server behind
// tetherd dies hard (mariadbd by SIGKILL, PostgreSQL by an immediate stop),
// stays down, and comes back, while clients read, insert and commit short
// transactions through one tetherd. Nothing tetherd acknowledged may be
// lost, nothing it answered as not done may be found done, every error must
// be typed and come within the request's timeout, and service must come
// back by itself within a bound, with tetherd's sessions within max_conns.
func init() {
	register(campaign{name: "restart", title: "A backend killed and restarted under mixed load", run: runRestart})
}

const (
	restartMaxConns       = 8
	restartClientsPerRole = 3                      // readers, inserters and transaction clients, each
	restartTimeout        = 3 * time.Second        // every request's timeout_ms
	restartLateSlack      = time.Second            // an answer later than its timeout plus this breaks the bound
	restartHang           = 10 * time.Second       // no answer at all after this long: a hang
	restartDownFor        = 2 * time.Second        // how long the server stays dead
	restartServiceBound   = 5 * time.Second        // full service at most this long after the server accepts again
	restartRecoveryWait   = 30 * time.Second       // give up waiting for full service after this
	restartDownGrace      = 250 * time.Millisecond // after the kill, time for tetherd to notice its connections broke
	restartBackoff        = 20 * time.Millisecond  // a client's pause after an error, as a client backing off
	restartProbeEvery     = 10 * time.Millisecond
	restartReadRows       = 1000
)

// restartOutageCodes are the codes a client may see while its backend is
// down or coming back (docs/protocol.md).
var restartOutageCodes = map[string]bool{"unavailable": true, "tx_aborted": true, "busy": true, "timeout": true}

// Transport outcomes of a request, recorded as codes: no answer within
// restartHang, and the client connection to tetherd lost.
const (
	restartNoAnswer = "(no answer)"
	restartConnLost = "(connection to tetherd lost)"
)

func runRestart(e *env, r *report) error {
	cycles := e.scale(5, 1)
	warmup := time.Duration(e.scale(3000, 1000)) * time.Millisecond
	steady := time.Duration(e.scale(4000, 2000)) * time.Millisecond
	servers, err := restartServers(e)
	if err != nil {
		return err
	}
	probes, err := restartProbes()
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range probes {
			p.Close()
		}
	}()
	resetSyncCommit, err := restartSyncCommitOn(e)
	if err != nil {
		return err
	}
	defer func() {
		if err := resetSyncCommit(); err != nil {
			r.say("Could not reset the pool user's synchronous_commit afterwards: %v", err)
		}
	}()
	for _, db := range []string{"maria", "pg"} {
		if err := restartTables(e, db); err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
	}
	if err := e.startTetherd(restartMaxConns, ""); err != nil {
		return err
	}
	flush, syncCommit, fsync, err := restartDurability(e)
	if err != nil {
		return err
	}
	clients := 3 * restartClientsPerRole
	r.say("Per database, %d clients on their own connections to one tetherd (max_conns %d, min_conns %d, every request "+
		"with timeout_ms %d): %d doing point reads of a %d-row table, %d autocommit INSERTs of a unique key, %d short "+
		"transactions (`begin`, an INSERT of a unique key, `commit`); each pauses %s after an error, as a client "+
		"backing off, and keeps going. A further client reads from the other database throughout. After %s of load "+
		"the server is killed hard: mariadbd by SIGKILL, then started again with the command line and user read from "+
		"/proc before the kill; PostgreSQL by `pg_ctl -m immediate stop`, then `pg_ctl start`. It stays down %s. %d "+
		"cycle(s) per database, each ending once every client has succeeded again and %s have passed without an "+
		"error. An independent connection logs in every %s to see when the server accepts connections again. "+
		"Afterwards an independent connection reads every key back: each acknowledged write (an autocommit INSERT "+
		"answered, a commit answered) must be there; each write answered as not done (an error with `retry` true, a "+
		"transaction whose commit was never sent) must not.",
		clients, restartMaxConns, restartMaxConns, restartTimeout.Milliseconds(), restartClientsPerRole, restartReadRows,
		restartClientsPerRole, restartClientsPerRole, restartBackoff, warmup, restartDownFor, cycles, steady, restartProbeEvery)
	r.say("Durability under test. MariaDB runs innodb_flush_log_at_trx_commit = %s: each commit's log is written to the "+
		"OS before it is acknowledged (and flushed to disk once a second), so a mariadbd kill loses nothing "+
		"acknowledged; an OS crash could. PostgreSQL runs fsync = %s and synchronous_commit = off server-wide, under "+
		"which an immediate stop loses acknowledged commits by design (their WAL is still in shared memory); so this "+
		"campaign runs `ALTER ROLE CURRENT_USER SET synchronous_commit = on` as tetherd's user before starting tetherd "+
		"(its sessions showed synchronous_commit = %s): each commit's WAL reaches the OS before the commit is "+
		"acknowledged, which survives a server crash though not an OS crash. The role setting is reset afterwards.",
		flush, fsync, syncCommit)
	var results []*restartResult
	var runErr error
	for _, db := range []string{"maria", "pg"} {
		res, err := restartOn(e, db, servers[db], probes[db], cycles, warmup, steady)
		if err != nil {
			runErr = fmt.Errorf("%s: %w", db, err)
			break
		}
		results = append(results, res)
		res.judge(r)
	}
	restartTablesOut(r, results)
	r.check(e.alive(), "tetherd is still running")
	return runErr
}

// restartServer kills a database server hard and starts it again.
type restartServer interface {
	// kill returns once the server is gone.
	kill() error
	// start starts the server again and returns without waiting for it to
	// accept connections.
	start() error
}

func restartServers(e *env) (map[string]restartServer, error) {
	for _, k := range []string{"FAULTS_PG_DATADIR", "FAULTS_PG_BINDIR", "FAULTS_PG_LOG", "FAULTS_MYSQL_WATCH_DSN", "FAULTS_PG_WATCH_DSN"} {
		if os.Getenv(k) == "" {
			return nil, fmt.Errorf("%s is not set (run tests/faults/run.sh)", k)
		}
	}
	return map[string]restartServer{
		"maria": &restartMariaDB{e: e, pidFile: filepath.Join(e.dir, "mariadb.pid")},
		"pg": &restartPostgres{dir: e.dir, bin: os.Getenv("FAULTS_PG_BINDIR"), datadir: os.Getenv("FAULTS_PG_DATADIR"),
			logPath: os.Getenv("FAULTS_PG_LOG"), as: os.Getenv("FAULTS_PG_AS")},
	}, nil
}

// restartMariaDB is the mariadbd at e.mariadbPID. After a restart it is the
// one this campaign started: its pid goes to pidFile (run.sh stops that one)
// and to e.mariadbPID.
type restartMariaDB struct {
	e       *env
	pidFile string
	proc    restartImage // the killed server's, read before the kill
}

// restartImage is what it takes to start a process again as it was.
type restartImage struct {
	args     []string
	env      []string
	uid, gid uint32
}

// readRestartImage reads pid's command line, environment and user from
// /proc; it refuses a process whose name is not one of names.
func readRestartImage(pid int, names ...string) (restartImage, error) {
	var p restartImage
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return p, fmt.Errorf("read pid %d's name: %w", pid, err)
	}
	name := strings.TrimSpace(string(comm))
	known := false
	for _, n := range names {
		known = known || name == n
	}
	if !known {
		return p, fmt.Errorf("pid %d is %q, not one of %v", pid, name, names)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return p, fmt.Errorf("read pid %d's command line: %w", pid, err)
	}
	p.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		p.env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	} else {
		p.env = os.Environ()
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, fmt.Errorf("read pid %d's status: %w", pid, err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "Uid:" && f[0] != "Gid:" {
			continue
		}
		id, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			return p, fmt.Errorf("parse pid %d's %s %q: %w", pid, f[0], f[1], err)
		}
		if f[0] == "Uid:" {
			p.uid = uint32(id)
		} else {
			p.gid = uint32(id)
		}
	}
	return p, nil
}

func (m *restartMariaDB) kill() error {
	pid := m.e.mariadbPID
	proc, err := readRestartImage(pid, "mariadbd", "mysqld")
	if err != nil {
		return err
	}
	m.proc = proc
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 mariadbd %d: %w", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !exited(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd %d still running 10 s after SIGKILL", pid)
		}
	}
	return nil
}

func (m *restartMariaDB) start() error {
	args := m.proc.args
	logPath := os.DevNull
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--log-error="); ok {
			logPath = v
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open mariadbd's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = m.proc.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a signal meant for this program is not for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if int(m.proc.uid) != os.Getuid() || int(m.proc.gid) != os.Getgid() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: m.proc.uid, Gid: m.proc.gid}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reaps it when a later cycle kills it
	m.e.mariadbPID = pid
	tmp := m.pidFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("write mariadbd's pid: %w", err)
	}
	if err := os.Rename(tmp, m.pidFile); err != nil {
		return fmt.Errorf("write mariadbd's pid: %w", err)
	}
	return nil
}

// restartPostgres is the PostgreSQL instance of datadir, driven by pg_ctl as
// the user as (ourselves when empty).
type restartPostgres struct {
	dir                   string // for pg_ctl's output
	bin, datadir, logPath string
	as                    string
}

func (p *restartPostgres) kill() error {
	return p.pgCtl("-D", p.datadir, "-m", "immediate", "-w", "-t", "30", "-s", "stop")
}

func (p *restartPostgres) start() error {
	return p.pgCtl("-D", p.datadir, "-l", p.logPath, "-W", "-s", "start")
}

// pgCtl runs pg_ctl with args. Its output goes to a file, not a pipe, so
// that a postmaster it starts holds nothing this program waits on.
func (p *restartPostgres) pgCtl(args ...string) error {
	path := filepath.Join(p.bin, "pg_ctl")
	cmd := exec.Command(path, args...)
	if p.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", p.as, "--", path}, args...)...)
		cmd.Dir = "/" // the user may not be allowed into our working directory
	}
	out, err := os.CreateTemp(p.dir, "pg_ctl-*.out")
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w", strings.Join(args, " "), err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		said, _ := os.ReadFile(out.Name())
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(said)))
	}
	return nil
}

// restartProbes opens, per database, an independent connection pool that keeps
// no idle connection: each probe is a fresh login, as a new client's.
func restartProbes() (map[string]*sql.DB, error) {
	maria, err := sql.Open("mysql", os.Getenv("FAULTS_MYSQL_WATCH_DSN"))
	if err != nil {
		return nil, fmt.Errorf("open mariadb probe: %w", err)
	}
	pg, err := sql.Open("pgx", os.Getenv("FAULTS_PG_WATCH_DSN"))
	if err != nil {
		maria.Close()
		return nil, fmt.Errorf("open postgres probe: %w", err)
	}
	for _, db := range []*sql.DB{maria, pg} {
		db.SetMaxIdleConns(0)
		db.SetMaxOpenConns(1)
	}
	return map[string]*sql.DB{"maria": maria, "pg": pg}, nil
}

// restartWaitAccepting logs in with probe every restartProbeEvery until a login and
// a SELECT 1 succeed, and returns when that was.
func restartWaitAccepting(probe *sql.DB, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var one int
		last = probe.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		cancel()
		if last == nil {
			return time.Now(), nil
		}
		time.Sleep(restartProbeEvery)
	}
	return time.Time{}, fmt.Errorf("not accepting connections %s after the start: %w", within, last)
}

// restartFlushWatchers closes the env's idle watcher connections, which a restart
// broke, so that the next use dials afresh.
func restartFlushWatchers(e *env) {
	for _, db := range []*sql.DB{e.mysqlWatch, e.pgWatch, e.mysqlCount} {
		db.SetMaxIdleConns(0)
		db.SetMaxIdleConns(2)
	}
}

// restartSyncCommitOn makes the sessions of tetherd's PostgreSQL user run
// with synchronous_commit = on (the test server runs it off), and returns
// the function that resets it.
func restartSyncCommitOn(e *env) (reset func() error, err error) {
	alter := func(stmt string) error {
		db, err := sql.Open("pgx", e.pgDSN)
		if err != nil {
			return fmt.Errorf("open postgres as tetherd's user: %w", err)
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	if err := alter("ALTER ROLE CURRENT_USER SET synchronous_commit = on"); err != nil {
		return nil, err
	}
	return func() error { return alter("ALTER ROLE CURRENT_USER RESET synchronous_commit") }, nil
}

// restartDurability reads the durability settings that decide what a kill
// may lose: MariaDB's innodb_flush_log_at_trx_commit, and PostgreSQL's
// synchronous_commit as tetherd's sessions have it, and fsync.
func restartDurability(e *env) (flush, syncCommit, fsync string, err error) {
	c, err := e.dial()
	if err != nil {
		return "", "", "", fmt.Errorf("dial tetherd: %w", err)
	}
	defer c.close()
	one := func(db, q string) (string, error) {
		rep, err := c.do(wire.Request{Op: wire.OpQuery, Backend: db, SQL: q}, 10*time.Second)
		if err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
		v, ok := restartCell(rep)
		if !ok {
			return "", fmt.Errorf("%s: no single value in %v", q, rep.Fields)
		}
		return v, nil
	}
	if flush, err = one("maria", "SELECT @@innodb_flush_log_at_trx_commit"); err != nil {
		return
	}
	if syncCommit, err = one("pg", "SHOW synchronous_commit"); err != nil {
		return
	}
	fsync, err = one("pg", "SHOW fsync")
	return
}

// restartCell returns the value of a one-row, one-column result as a string.
func restartCell(rep *wire.Reply) (string, bool) {
	rows, _ := rep.Fields["rows"].([]any)
	if len(rows) != 1 {
		return "", false
	}
	row, _ := rows[0].([]any)
	if len(row) != 1 {
		return "", false
	}
	switch v := row[0].(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	case nil:
		return "", false
	default:
		return fmt.Sprint(v), true
	}
}

// restartTables makes the campaign's tables afresh on db: the written keys,
// and the rows the readers read.
func restartTables(e *env, db string) error {
	ctx := context.Background()
	w := e.watch(db)
	values := make([]string, restartReadRows)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 'row-%d')", i+1, i+1)
	}
	for _, q := range []string{"DROP TABLE IF EXISTS faults_restart", "DROP TABLE IF EXISTS faults_restart_read",
		"CREATE TABLE faults_restart (k VARCHAR(64) PRIMARY KEY, via VARCHAR(8) NOT NULL)",
		"CREATE TABLE faults_restart_read (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
		"INSERT INTO faults_restart_read (id, v) VALUES " + strings.Join(values, ", ")} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("set up tables: %w", err)
		}
	}
	return nil
}

// restartOp is one request a load client made, and how it ended.
type restartOp struct {
	op         string
	start, end time.Time
	code       string // "" for success, else the error's code or a transport outcome
	retry      bool
	msg        string
}

func (o restartOp) latency() time.Duration { return o.end.Sub(o.start) }

// restartFate is what a write's answer promised about it.
type restartFate uint8

const (
	restartAcked   restartFate = iota // answered done: it must be there
	restartNotDone                    // never committed, or answered retryable: it must not be there
	restartUnknown                    // answered "may or may not have run": either
)

type restartWrite struct {
	key  string
	tx   bool
	fate restartFate
}

// restartFateOf is the promise the answer of a write's last request made.
func restartFateOf(o restartOp) restartFate {
	switch {
	case o.code == "":
		return restartAcked
	case o.code == restartNoAnswer || o.code == restartConnLost:
		return restartUnknown
	case o.retry:
		return restartNotDone
	default:
		return restartUnknown
	}
}

// restartClient is one load client: a connection to tetherd making one kind
// of request, back to back, recording every outcome. Only its own goroutine
// touches it while it runs, but lastOK and lastErr, which the campaign
// watches.
type restartClient struct {
	e    *env
	db   string
	role string // read, insert or tx
	name string
	conn *client
	seq  int

	// mu guards ops and writes against a reader besides the client's own
	// goroutine (the failover campaign's, while the load runs).
	mu         sync.Mutex
	ops        []restartOp
	writes     []restartWrite
	wrongReads int
	lastOK     atomic.Int64 // unix nanoseconds of the latest success
	lastErr    atomic.Int64 // and of the latest error
}

func (c *restartClient) run(stop <-chan struct{}) {
	defer func() {
		if c.conn != nil {
			c.conn.close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		var ok bool
		switch c.role {
		case "read":
			ok = c.read()
		case "insert":
			ok = c.insert()
		case "tx":
			ok = c.transaction()
		}
		if !ok {
			time.Sleep(restartBackoff)
		}
	}
}

func (c *restartClient) read() bool {
	id := rand.IntN(restartReadRows) + 1
	rep, ok := c.call("read", wire.Request{Op: wire.OpQuery, Backend: c.db,
		SQL: "SELECT v FROM faults_restart_read WHERE id = " + placeholder(c.db, 1), Params: []any{int64(id)}})
	if ok {
		if v, _ := restartCell(rep); v != fmt.Sprintf("row-%d", id) {
			c.wrongReads++
		}
	}
	return ok
}

func (c *restartClient) insertSQL(via string) string {
	return "INSERT INTO faults_restart (k, via) VALUES (" + placeholder(c.db, 1) + ", '" + via + "')"
}

func (c *restartClient) nextKey() string {
	c.seq++
	return fmt.Sprintf("%s-%d", c.name, c.seq)
}

func (c *restartClient) insert() bool {
	key := c.nextKey()
	_, ok := c.call("insert", wire.Request{Op: wire.OpExec, Backend: c.db, SQL: c.insertSQL("auto"), Params: []any{key}})
	c.mu.Lock()
	c.writes = append(c.writes, restartWrite{key: key, fate: restartFateOf(c.ops[len(c.ops)-1])})
	c.mu.Unlock()
	return ok
}

// transaction runs begin, an insert, commit; after a failed insert it rolls
// back, as a client would, unless its connection to tetherd is gone.
func (c *restartClient) transaction() bool {
	rep, ok := c.call("begin", wire.Request{Op: wire.OpBegin, Backend: c.db})
	if !ok {
		return false
	}
	tx := toUint(rep.Fields["tx"])
	w := restartWrite{key: c.nextKey(), tx: true, fate: restartNotDone}
	defer func() { c.mu.Lock(); c.writes = append(c.writes, w); c.mu.Unlock() }()
	if _, ok := c.call("tx insert", wire.Request{Op: wire.OpExec, Tx: tx, SQL: c.insertSQL("tx"), Params: []any{w.key}}); !ok {
		if c.conn != nil {
			c.call("rollback", wire.Request{Op: wire.OpRollback, Tx: tx})
		}
		return false
	}
	_, ok = c.call("commit", wire.Request{Op: wire.OpCommit, Tx: tx})
	w.fate = restartFateOf(c.ops[len(c.ops)-1])
	return ok
}

// call sends one request with timeout_ms restartTimeout and records its
// outcome; it reports whether it succeeded. Without an answer within
// restartHang, or when the connection to tetherd fails, the connection is
// dropped and the next request dials a new one.
func (c *restartClient) call(op string, req wire.Request) (*wire.Reply, bool) {
	o := restartOp{op: op, start: time.Now()}
	rep, err := c.roundTrip(req)
	o.end = time.Now()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		o.code, o.msg = restartNoAnswer, err.Error()
	case err != nil:
		o.code, o.msg = restartConnLost, err.Error()
	case rep.Error() != nil:
		fields := rep.Error()
		code, _ := fields["code"].(string)
		if code == "" {
			code = fmt.Sprintf("(untyped: %v)", fields)
		}
		o.code = code
		o.retry, _ = fields["retry"].(bool)
		o.msg = fmt.Sprint(fields["message"])
	}
	c.mu.Lock()
	c.ops = append(c.ops, o)
	c.mu.Unlock()
	if o.code != "" {
		c.lastErr.Store(o.end.UnixNano())
		return rep, false
	}
	c.lastOK.Store(o.end.UnixNano())
	return rep, true
}

func (c *restartClient) roundTrip(req wire.Request) (*wire.Reply, error) {
	if c.conn == nil {
		conn, err := c.e.dial()
		if err != nil {
			return nil, fmt.Errorf("dial tetherd: %w", err)
		}
		c.conn = conn
	}
	req.TimeoutMS = uint32(restartTimeout.Milliseconds())
	id, err := c.conn.send(req)
	if err != nil {
		c.dropConn()
		return nil, fmt.Errorf("send: %w", err)
	}
	rep, err := c.conn.recv(restartHang)
	if err != nil {
		c.dropConn()
		return nil, fmt.Errorf("receive: %w", err)
	}
	if rep.ID != id {
		c.dropConn()
		return nil, fmt.Errorf("reply to request %d came for request %d", rep.ID, id)
	}
	return rep, nil
}

func (c *restartClient) dropConn() {
	c.conn.close()
	c.conn = nil
}

// restartCycle is one kill and restart, as timed by the campaign.
type restartCycle struct {
	kill      time.Time // the kill began
	down      time.Time // the server was gone
	started   time.Time // the start began
	accepting time.Time // an independent login succeeded again
	end       time.Time
	recovered bool // full service seen before restartRecoveryWait
	sessions  int  // tetherd's sessions, most at once, from accepting to end
	countErr  error
	alive     bool
}

// restartResult is what happened on one database.
type restartResult struct {
	db           string
	clients      []*restartClient
	other        *restartClient // reads the other database throughout
	cycles       []restartCycle
	present      map[string]bool // keys found afterwards
	restSessions int             // tetherd's sessions with the load stopped
	restErr      error
	finalErr     error            // a fresh client's request after everything
	logLines     restartLogCounts // what tetherd logged meanwhile
	logErr       error
	fig          *restartFigures // set by judge
}

func restartOn(e *env, db string, server restartServer, probe *sql.DB, cycles int, warmup, steady time.Duration) (*restartResult, error) {
	res := &restartResult{db: db}
	for i := 1; i <= restartClientsPerRole; i++ {
		for _, role := range []string{"read", "insert", "tx"} {
			res.clients = append(res.clients, &restartClient{e: e, db: db, role: role, name: fmt.Sprintf("%s-%s-%d", db, role, i)})
		}
	}
	otherDB := "pg"
	if db == "pg" {
		otherDB = "maria"
	}
	res.other = &restartClient{e: e, db: otherDB, role: "read", name: "other"}
	logBefore, logErr := restartCountLog(e.logPath)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range append(res.clients, res.other) {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(stop) }()
	}
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopLoad()
	time.Sleep(warmup)
	for i := 0; i < cycles; i++ {
		cy, err := restartOnce(e, db, server, probe, res.clients, steady)
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		res.cycles = append(res.cycles, cy)
		e.logf("restart: %s cycle %d: accepting %.1f s after the kill, cycle over %.1f s later", db, i+1,
			cy.accepting.Sub(cy.kill).Seconds(), cy.end.Sub(cy.accepting).Seconds())
	}
	stopLoad()

	// At rest: the janitor tops the pool up to min_conns within a second.
	time.Sleep(1500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res.restSessions, res.restErr = e.sessions(ctx, db)
	res.finalErr = restartFinalRequest(e, db)
	logAfter, err := restartCountLog(e.logPath)
	res.logLines, res.logErr = logAfter.minus(logBefore), errors.Join(logErr, err)
	if res.present, err = restartKeys(ctx, e.watch(db)); err != nil {
		return nil, err
	}
	return res, nil
}

// restartOnce kills the server, keeps it down restartDownFor, starts it,
// and waits until every client has succeeded again and steady has passed
// without an error (or restartRecoveryWait).
func restartOnce(e *env, db string, server restartServer, probe *sql.DB, clients []*restartClient, steady time.Duration) (restartCycle, error) {
	var cy restartCycle
	cy.kill = time.Now()
	if err := server.kill(); err != nil {
		return cy, err
	}
	cy.down = time.Now()
	time.Sleep(restartDownFor)
	cy.started = time.Now()
	if err := server.start(); err != nil {
		return cy, err
	}
	var err error
	if cy.accepting, err = restartWaitAccepting(probe, 60*time.Second); err != nil {
		return cy, err
	}
	restartFlushWatchers(e)
	sampler := e.sampleSessions(db)
	for deadline := cy.accepting.Add(restartRecoveryWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		everyone := true
		var lastErr int64
		for _, c := range clients {
			everyone = everyone && c.lastOK.Load() > cy.down.UnixNano()
			lastErr = max(lastErr, c.lastErr.Load())
		}
		if everyone && time.Since(time.Unix(0, lastErr)) >= steady {
			cy.recovered = true
			break
		}
	}
	cy.end = time.Now()
	cy.sessions, cy.countErr = sampler.stop()
	cy.alive = e.alive()
	return cy, nil
}

// restartFinalRequest runs a read and a transaction on a fresh connection
// to tetherd once the load is over.
func restartFinalRequest(e *env, db string) error {
	c, err := e.dial()
	if err != nil {
		return fmt.Errorf("dial tetherd: %w", err)
	}
	defer c.close()
	if _, err := c.do(wire.Request{Op: wire.OpQuery, Backend: db, SQL: "SELECT COUNT(*) FROM faults_restart_read"}, 10*time.Second); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	rep, err := c.do(wire.Request{Op: wire.OpBegin, Backend: db}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := toUint(rep.Fields["tx"])
	if _, err := c.do(wire.Request{Op: wire.OpQuery, Tx: tx, SQL: "SELECT v FROM faults_restart_read WHERE id = 1"}, 10*time.Second); err != nil {
		return fmt.Errorf("read in a transaction: %w", err)
	}
	if _, err := c.do(wire.Request{Op: wire.OpCommit, Tx: tx}, 10*time.Second); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// restartLogCounts counts lines of tetherd's log.
type restartLogCounts struct {
	connectFailed int // a failed dial, logged at WARN
	errors        int // level=ERROR: internal errors among them
}

func (a restartLogCounts) minus(b restartLogCounts) restartLogCounts {
	return restartLogCounts{connectFailed: a.connectFailed - b.connectFailed, errors: a.errors - b.errors}
}

// restartCountLog counts the lines of tetherd's log at path.
func restartCountLog(path string) (restartLogCounts, error) {
	var n restartLogCounts
	b, err := os.ReadFile(path)
	if err != nil {
		return n, fmt.Errorf("read tetherd's log: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(l, `msg="connect failed"`):
			n.connectFailed++
		case strings.Contains(l, "level=ERROR"):
			n.errors++
		}
	}
	return n, nil
}

// restartKeys reads every key written, on an independent connection (a few
// tries: it may be a pooled one the restart broke).
func restartKeys(ctx context.Context, w *sql.DB) (map[string]bool, error) {
	var err error
	for try := 0; try < 3; try++ {
		var rows *sql.Rows
		if rows, err = w.QueryContext(ctx, "SELECT k FROM faults_restart"); err != nil {
			continue
		}
		keys := map[string]bool{}
		for rows.Next() {
			var k string
			if err = rows.Scan(&k); err != nil {
				break
			}
			keys[k] = true
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		if err == nil {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("read the keys back: %w", err)
}

// restartFigures are a database's figures, computed from the records.
type restartFigures struct {
	okByOp                     map[string]int
	ackedAuto, ackedTx         int
	missing                    []string
	phantom                    []string
	unknownApplied, unknownNot int
	wrongReads                 int
	hangs, connLost            int
	slowest                    restartOp
	okLatency, errLatency      []time.Duration
	nonOutage                  []restartOp // errors whose code is not an outage code
	badRetry                   []restartOp // busy or tx_aborted not retryable
	downNotRetry               []restartOp // begun while the server was down, not retryable
	errorsByKind               map[[3]string]*restartErrorGroup
	otherOps, otherErrs        int
	otherSlowest               time.Duration
	cycleRows                  [][]string
	worstService               time.Duration // the slowest cycle's accepting → full service
	allRecovered               bool
	mostSessions               int
	countErr                   error
	cyclesAlive                bool
}

type restartErrorGroup struct {
	count   int
	slowest time.Duration
	example string
}

func (res *restartResult) figures() *restartFigures {
	f := &restartFigures{okByOp: map[string]int{}, errorsByKind: map[[3]string]*restartErrorGroup{}, allRecovered: true, cyclesAlive: true}
	inDown := func(t time.Time) bool {
		for _, cy := range res.cycles {
			if t.After(cy.down.Add(restartDownGrace)) && t.Before(cy.accepting) {
				return true
			}
		}
		return false
	}
	for _, c := range append(append([]*restartClient(nil), res.clients...), res.other) {
		f.wrongReads += c.wrongReads
		for _, o := range c.ops {
			if o.latency() > f.slowest.latency() {
				f.slowest = o
			}
			if o.code == "" {
				f.okByOp[o.op]++
				f.okLatency = append(f.okLatency, o.latency())
				continue
			}
			f.errLatency = append(f.errLatency, o.latency())
			op := o.op
			if c == res.other {
				op = "read (other database)"
			}
			k := [3]string{op, o.code, strconv.FormatBool(o.retry)}
			g := f.errorsByKind[k]
			if g == nil {
				g = &restartErrorGroup{example: o.msg}
				f.errorsByKind[k] = g
			}
			g.count++
			g.slowest = max(g.slowest, o.latency())
			switch {
			case o.code == restartNoAnswer:
				f.hangs++
			case o.code == restartConnLost:
				f.connLost++
			case !restartOutageCodes[o.code]:
				f.nonOutage = append(f.nonOutage, o)
			case (o.code == "busy" || o.code == "tx_aborted") && !o.retry:
				f.badRetry = append(f.badRetry, o)
			}
			if c != res.other && !o.retry && inDown(o.start) {
				f.downNotRetry = append(f.downNotRetry, o)
			}
		}
	}
	for _, c := range res.clients {
		for _, w := range c.writes {
			there := res.present[w.key]
			switch w.fate {
			case restartAcked:
				if w.tx {
					f.ackedTx++
				} else {
					f.ackedAuto++
				}
				if !there {
					f.missing = append(f.missing, w.key)
				}
			case restartNotDone:
				if there {
					f.phantom = append(f.phantom, w.key)
				}
			case restartUnknown:
				if there {
					f.unknownApplied++
				} else {
					f.unknownNot++
				}
			}
		}
	}
	for i, cy := range res.cycles {
		f.cycle(res, i, cy)
	}
	return f
}

// cycle adds one kill cycle's figures: when tetherd served again, relative
// to the server accepting logins again.
func (f *restartFigures) cycle(res *restartResult, i int, cy restartCycle) {
	var firstOK, everyone, lastErr, firstErr time.Time
	errs, late := 0, 0
	allServed := true
	for _, c := range res.clients {
		var mine time.Time
		for _, o := range c.ops {
			if o.end.Before(cy.kill) || o.end.After(cy.end) {
				continue
			}
			if o.code != "" {
				errs++
				if firstErr.IsZero() || o.end.Before(firstErr) {
					firstErr = o.end
				}
				lastErr = restartLater(lastErr, o.end)
				continue
			}
			// A request begun after the server was gone: one begun before
			// may have had its answer on the way.
			if o.start.After(cy.down) && mine.IsZero() {
				mine = o.end
			}
		}
		if mine.IsZero() {
			allServed = false
			continue
		}
		everyone = restartLater(everyone, mine)
		if firstOK.IsZero() || mine.Before(firstOK) {
			firstOK = mine
		}
	}
	for _, c := range res.clients {
		for _, o := range c.ops {
			if o.code != "" && !firstOK.IsZero() && o.end.After(firstOK) && !o.end.After(cy.end) {
				late++
			}
		}
	}
	otherErrs, otherOps := 0, 0
	for _, o := range res.other.ops {
		if o.start.Before(cy.kill) || o.end.After(cy.end) {
			continue
		}
		otherOps++
		if o.code != "" {
			otherErrs++
		}
		f.otherSlowest = max(f.otherSlowest, o.latency())
	}
	f.otherOps += otherOps
	f.otherErrs += otherErrs
	if !allServed {
		everyone = time.Time{}
	}
	f.allRecovered = f.allRecovered && cy.recovered && allServed
	f.cyclesAlive = f.cyclesAlive && cy.alive
	f.mostSessions = max(f.mostSessions, cy.sessions)
	if cy.countErr != nil && f.countErr == nil {
		f.countErr = cy.countErr
	}
	// Full service: every client has succeeded again, and no error after.
	full := restartLater(everyone, lastErr)
	sinceAccepting := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%+.0f", float64(t.Sub(cy.accepting))/float64(time.Millisecond))
	}
	fullAfter := full.Sub(cy.accepting)
	if everyone.IsZero() {
		fullAfter = restartRecoveryWait
	}
	f.worstService = max(f.worstService, fullAfter)
	outage := "-"
	if !firstErr.IsZero() && !everyone.IsZero() {
		outage = fmt.Sprintf("%.2f", full.Sub(firstErr).Seconds())
	}
	firstOKCol := sinceAccepting(firstOK)
	fullCol := sinceAccepting(full)
	if everyone.IsZero() {
		fullCol = "never"
	}
	f.cycleRows = append(f.cycleRows, []string{res.db, strconv.Itoa(i + 1),
		fmt.Sprintf("%.2f", cy.down.Sub(cy.kill).Seconds()),
		fmt.Sprintf("%.2f", cy.accepting.Sub(cy.started).Seconds()),
		fmt.Sprintf("%.2f", cy.accepting.Sub(cy.kill).Seconds()),
		firstOKCol, fullCol, outage,
		strconv.Itoa(errs), strconv.Itoa(late),
		fmt.Sprintf("%d (%d)", cy.sessions, sessionLimit(res.db, restartMaxConns)),
		fmt.Sprintf("%d / %d", otherErrs, otherOps),
	})
}

func restartLater(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// judge checks the database's invariants.
func (res *restartResult) judge(r *report) {
	f := res.figures()
	db := res.db
	acked := f.ackedAuto + f.ackedTx
	r.check(acked > 0 && len(f.missing) == 0, "%s: no acknowledged write lost (%d of %d missing afterwards%s)",
		db, len(f.missing), acked, restartFirstFew(f.missing))
	r.check(len(f.phantom) == 0, "%s: no write answered as not done (retry true, or never committed) found applied (%d%s)",
		db, len(f.phantom), restartFirstFew(f.phantom))
	r.check(len(f.nonOutage) == 0, "%s: every error typed with an outage code: unavailable, tx_aborted, busy or timeout (%d others%s)",
		db, len(f.nonOutage), restartExamples(f.nonOutage))
	r.check(len(f.badRetry) == 0, "%s: every busy and tx_aborted answered with retry true (%d not%s)",
		db, len(f.badRetry), restartExamples(f.badRetry))
	r.check(len(f.downNotRetry) == 0, "%s: every request begun while the server was down (from %s after the kill until it accepted logins) "+
		"answered with retry true, since none could have run (%d not%s)", db, restartDownGrace, len(f.downNotRetry), restartExamples(f.downNotRetry))
	r.check(f.hangs == 0 && f.slowest.latency() <= restartTimeout+restartLateSlack,
		"%s: every request answered within its timeout_ms (%d) + %s (slowest: %s ms, %s answered %s, begun %s; %d never answered within %s)",
		db, restartTimeout.Milliseconds(), restartLateSlack, ms(f.slowest.latency()), f.slowest.op, restartOrSuccess(f.slowest.code),
		res.when(f.slowest.start), f.hangs, restartHang)
	r.check(f.connLost == 0, "%s: tetherd kept every client connection open (%d lost)", db, f.connLost)
	r.check(f.allRecovered && f.worstService <= restartServiceBound,
		"%s: full service (every client succeeding, no error after) within %s of the server accepting logins again, every cycle (slowest: %s ms)",
		db, restartServiceBound, ms(f.worstService))
	limit := sessionLimit(db, restartMaxConns)
	if f.countErr != nil {
		r.fail("%s: tetherd's sessions after recovery within max_conns: could not count them: %v", db, f.countErr)
	} else {
		r.check(f.mostSessions <= limit, "%s: tetherd's sessions after recovery within max_conns (%d allowed, at most %d at once)", db, limit, f.mostSessions)
	}
	if res.restErr != nil {
		r.fail("%s: tetherd's sessions at rest within max_conns: could not count them: %v", db, res.restErr)
	} else {
		r.check(res.restSessions <= limit, "%s: tetherd's sessions at rest, after the load, within max_conns (%d allowed, %d)", db, limit, res.restSessions)
	}
	r.check(f.otherErrs == 0, "%s: the other database served throughout the outage (%d errors in %d reads, slowest %s ms)",
		db, f.otherErrs, f.otherOps, ms(f.otherSlowest))
	r.check(f.wrongReads == 0, "%s: every read returned its own row (%d wrong)", db, f.wrongReads)
	r.check(res.finalErr == nil, "%s: a fresh client's read and transaction succeed after the restarts (%v)", db, restartOrNone(res.finalErr))
	r.check(f.cyclesAlive, "%s: tetherd running at the end of every cycle", db)
	res.fig = f
}

// when places t in the campaign's timeline: which kill cycle, and how long
// after its kill.
func (res *restartResult) when(t time.Time) string {
	for i, cy := range res.cycles {
		if !t.Before(cy.kill) && !t.After(cy.end) {
			return fmt.Sprintf("%.2f s after kill %d (the server accepted logins again at %.2f s)", t.Sub(cy.kill).Seconds(), i+1, cy.accepting.Sub(cy.kill).Seconds())
		}
	}
	return "outside the kill cycles"
}

func restartFirstFew(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return ": " + strings.Join(keys[:min(len(keys), 5)], ", ")
}

func restartExamples(ops []restartOp) string {
	var b strings.Builder
	for i, o := range ops {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "; %s → %s retry %v: %s", o.op, o.code, o.retry, restartShorten(o.msg, 120))
	}
	return b.String()
}

func restartOrSuccess(code string) string {
	if code == "" {
		return "success"
	}
	return code
}

func restartOrNone(err error) string {
	if err == nil {
		return "none failed"
	}
	return err.Error()
}

func restartShorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func restartLogColumn(res *restartResult) string {
	if res.logErr != nil {
		return "unread: " + restartShorten(res.logErr.Error(), 80)
	}
	return fmt.Sprintf("%d / %d", res.logLines.connectFailed, res.logLines.errors)
}

// restartTablesOut adds the campaign's tables.
func restartTablesOut(r *report, results []*restartResult) {
	var cycles, totals, errs [][]string
	for _, res := range results {
		f := res.fig
		if f == nil {
			continue
		}
		cycles = append(cycles, f.cycleRows...)
		p50, p99, mx := durations(f.okLatency)
		e50, e99, emx := durations(f.errLatency)
		totals = append(totals, []string{res.db,
			fmt.Sprintf("%d / %d / %d", f.okByOp["read"], f.okByOp["insert"], f.okByOp["commit"]),
			fmt.Sprintf("%d + %d", f.ackedAuto, f.ackedTx),
			strconv.Itoa(len(f.missing)), strconv.Itoa(len(f.phantom)),
			fmt.Sprintf("%d / %d", f.unknownApplied, f.unknownNot),
			strconv.Itoa(f.hangs),
			ms(p50) + " / " + ms(p99) + " / " + ms(mx),
			fmt.Sprintf("%d: %s / %s / %s", len(f.errLatency), ms(e50), ms(e99), ms(emx)),
			fmt.Sprintf("%d (%d)", res.restSessions, sessionLimit(res.db, restartMaxConns)),
			restartLogColumn(res),
		})
		keys := make([][3]string, 0, len(f.errorsByKind))
		for k := range f.errorsByKind {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if a[0] != b[0] {
				return a[0] < b[0]
			}
			if a[1] != b[1] {
				return a[1] < b[1]
			}
			return a[2] < b[2]
		})
		for _, k := range keys {
			g := f.errorsByKind[k]
			errs = append(errs, []string{res.db, k[0], "`" + k[1] + "`", k[2], strconv.Itoa(g.count), ms(g.slowest), restartShorten(g.example, 140)})
		}
	}
	if len(cycles) == 0 {
		return
	}
	r.say("Each kill cycle. Times in seconds from the kill, or in ms from the moment an independent login succeeded "+
		"again (negative: tetherd served before the %s probe saw the server back). Full service: every client has "+
		"succeeded again and none failed after. Client-visible outage: from the first error to full service.", restartProbeEvery)
	r.table([]string{"database", "cycle", "kill took s", "start → accepting s", "kill → accepting s",
		"accepting → first success via tetherd ms", "accepting → full service ms", "client-visible outage s",
		"errors", "errors after the first success", "tetherd sessions after recovery, most (allowed)",
		"other database: errors / reads"}, cycles)
	r.table([]string{"database", "succeeded: reads / inserts / commits", "acknowledged writes: autocommit + committed",
		"missing afterwards", "answered not done, found applied", "outcome unknown: applied / not", "never answered",
		"latency of successes p50 / p99 / max ms", "errors: count: latency p50 / p99 / max ms",
		"tetherd sessions at rest (allowed)", "tetherd's log: connect-failed warnings / ERROR lines"}, totals)
	r.say("Errors the clients saw, by operation, code and `retry` flag (a transaction's statements are `tx insert`, " +
		"`commit` and `rollback`, sent after a failed `tx insert`).")
	r.table([]string{"database", "operation", "code", "retry", "count", "slowest answer ms", "example message"}, errs)
}
