package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tether-php/tether/wire"
)

// What operators' signals do to a tetherd under load (docs/operations.md,
// Lifecycle), against the real binary and real MariaDB and PostgreSQL:
// SIGHUP reopens the log and nothing else; SIGTERM drains (the listener
// closes at once, requests in flight finish, open transactions may still
// commit within shutdown_grace, tetherd exits once they are done, those still
// open at the end of the grace are rolled back); a second SIGTERM exits at
// once; and no exit leaves the socket file behind.
func init() {
	register(campaign{name: "signals", title: "Operators' signals under load: SIGHUP, SIGTERM's drain, a second SIGTERM", run: runSignals})
}

const (
	sigMaxConns   = 8
	sigGrace      = 5 * time.Second // startTetherd's shutdown_grace
	sigRows       = 100
	sigReply      = 10 * time.Second // any reply later than this is a hang
	sigLogLine    = "log reopened"
	sigFastRefuse = 250 * time.Millisecond // a refused connect slower than this is a hang in a backlog
)

var sigDBs = []string{"maria", "pg"}

func runSignals(e *env, r *report) error {
	for _, db := range sigDBs {
		if err := sigTables(e, db); err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
	}
	if err := sigHUP(e, r); err != nil {
		return fmt.Errorf("SIGHUP: %w", err)
	}
	var exits [][]string
	row, err := sigDrain(e, r)
	if err != nil {
		return fmt.Errorf("SIGTERM with transactions open: %w", err)
	}
	exits = append(exits, row)
	if row, err = sigSecond(e, r); err != nil {
		return fmt.Errorf("second SIGTERM: %w", err)
	}
	exits = append(exits, row)
	if row, err = sigGraceOver(e, r); err != nil {
		return fmt.Errorf("SIGTERM with a transaction never ended: %w", err)
	}
	exits = append(exits, row)
	r.say("Exits (shutdown_grace %s; times from the SIGTERM):", sigGrace)
	r.table([]string{"scenario", "socket file gone after", "exited after", "exit code", "socket file after exit"}, exits)
	return nil
}

// sigTables creates faults_signals, the rows the load reads and updates, and
// faults_signals_tx, where the drained transactions insert.
func sigTables(e *env, db string) error {
	ctx := context.Background()
	w := e.watch(db)
	for _, q := range []string{"DROP TABLE IF EXISTS faults_signals", "DROP TABLE IF EXISTS faults_signals_tx",
		"CREATE TABLE faults_signals (id INT PRIMARY KEY, n INT NOT NULL, v VARCHAR(32))",
		"CREATE TABLE faults_signals_tx (marker VARCHAR(64) NOT NULL)"} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	var vals []string
	for i := 0; i <= sigRows; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 0, 'row %d')", i, i))
	}
	_, err := w.ExecContext(ctx, "INSERT INTO faults_signals VALUES "+strings.Join(vals, ", "))
	return err
}

// sigDaemon is a tetherd this campaign signals and waits for itself.
type sigDaemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	exit time.Time
	code int
}

// sigStart starts a tetherd with e.startTetherd's config and takes it off
// e's hands. logFile, when not "", becomes its [log] file.
func sigStart(e *env, logFile string) (*sigDaemon, error) {
	if err := e.startTetherd(sigMaxConns, ""); err != nil {
		return nil, err
	}
	if logFile != "" {
		// startTetherd takes only [server] lines: restart with its config
		// and a log file, which is what SIGHUP reopens.
		e.stopTetherd()
		if err := sigRestartWithLogFile(e, logFile); err != nil {
			return nil, err
		}
	}
	d := &sigDaemon{cmd: e.tetherd, done: make(chan struct{})}
	e.tetherd = nil
	go func() {
		d.cmd.Wait()
		d.exit, d.code = time.Now(), d.cmd.ProcessState.ExitCode()
		close(d.done)
	}()
	return d, nil
}

func sigRestartWithLogFile(e *env, logFile string) error {
	b, err := os.ReadFile(filepath.Join(e.dir, "tetherd.toml"))
	if err != nil {
		return err
	}
	cfg := strings.Replace(string(b), "[log]\n", "[log]\nfile = "+strconv.Quote(logFile)+"\n", 1)
	if cfg == string(b) {
		return errors.New("the config startTetherd writes has no [log] table")
	}
	path := filepath.Join(e.dir, "signals.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	out, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(e.tetherdBin, "-config", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	e.tetherd = cmd
	for i := 0; i < 300; i++ {
		// Up once a connect succeeds: the socket file appears at bind(),
		// before listen(), and a client in between is refused (the
		// campaign's clients start at once; under load they were).
		if sigSocketThere(e) {
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

func (d *sigDaemon) signal(s syscall.Signal) error { return d.cmd.Process.Signal(s) }

func (d *sigDaemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// wait waits up to within for the exit; it reports whether it came.
func (d *sigDaemon) wait(within time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(within):
		return false
	}
}

// stop ends a tetherd still running: SIGTERM, then SIGKILL.
func (d *sigDaemon) stop() {
	if !d.running() {
		return
	}
	d.signal(syscall.SIGTERM)
	if !d.wait(15 * time.Second) {
		d.cmd.Process.Kill()
		<-d.done
	}
}

func sigSocketThere(e *env) bool {
	fi, err := os.Lstat(e.socket)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// sigSocketGone polls for the socket file's removal, from `from`, until
// `until`; it returns when it saw it gone (zero: never).
func sigSocketGone(e *env, from time.Time, until time.Duration) time.Duration {
	for time.Since(from) < until {
		if _, err := os.Lstat(e.socket); errors.Is(err, os.ErrNotExist) {
			return time.Since(from)
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}

func sigExitRow(e *env, name string, d *sigDaemon, sigterm time.Time, socketGone time.Duration) []string {
	gone := "never"
	if socketGone > 0 {
		gone = ms(socketGone) + " ms"
	}
	exited, code := "did not exit", "-"
	if !d.running() {
		exited, code = fmt.Sprintf("%.2f s", d.exit.Sub(sigterm).Seconds()), fmt.Sprint(d.code)
	}
	after := "removed"
	if _, err := os.Lstat(e.socket); err == nil {
		after = "**left behind**"
	}
	return []string{name, gone, exited, code, after}
}

// sigLoad tallies the load's requests per database.
type sigLoad struct {
	mu       sync.Mutex
	requests map[string]int
	failed   map[string]int
	latency  map[string][]time.Duration
	firstErr error
}

func (l *sigLoad) record(db string, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests[db]++
	l.latency[db] = append(l.latency[db], took)
	if err != nil {
		l.failed[db]++
		if l.firstErr == nil {
			l.firstErr = fmt.Errorf("%s: %w", db, err)
		}
	}
}

// sigLoadClient runs point reads, or short transactions (begin, update,
// commit), until stop; after a failure it starts over on a new connection.
func sigLoadClient(e *env, db string, i int, txs bool, stop <-chan struct{}, l *sigLoad) {
	p1 := placeholder(db, 1)
	for n := 0; ; {
		c, err := e.dial()
		if err != nil {
			l.record(db, 0, fmt.Errorf("connect: %w", err))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				continue
			}
		}
		call := func(r wire.Request) (*wire.Reply, bool) {
			start := time.Now()
			rep, err := c.do(r, sigReply)
			if err != nil {
				err = fmt.Errorf("%s: %w", r.Op, err)
			}
			l.record(db, time.Since(start), err)
			return rep, err == nil
		}
		ok := true
		for ok {
			select {
			case <-stop:
				c.close()
				return
			default:
			}
			n++
			key := int64(1 + (i*31+n)%sigRows)
			if !txs {
				_, ok = call(wire.Request{Op: wire.OpQuery, Backend: db, SQL: "SELECT n, v FROM faults_signals WHERE id = " + p1, Params: []any{key}})
				continue
			}
			var rep *wire.Reply
			if rep, ok = call(wire.Request{Op: wire.OpBegin, Backend: db}); !ok {
				break
			}
			tx := toUint(rep.Fields["tx"])
			if _, ok = call(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "UPDATE faults_signals SET n = n + 1 WHERE id = " + p1, Params: []any{key}}); !ok {
				break
			}
			_, ok = call(wire.Request{Op: wire.OpCommit, Tx: tx})
		}
		c.close()
	}
}

// sigHUP: logrotate's SIGHUP (the log file moved away, then the signal),
// again and again, while clients read and commit on both databases.
func sigHUP(e *env, r *report) error {
	hups := e.scale(20, 5)
	every := 400 * time.Millisecond
	logFile := filepath.Join(e.dir, "signals-tetherd.log")
	old, _ := filepath.Glob(logFile + "*")
	for _, f := range old {
		os.Remove(f)
	}
	d, err := sigStart(e, logFile)
	if err != nil {
		return err
	}
	defer d.stop()
	perDB := 4 // half reading, half in short transactions
	r.say("SIGHUP under load: %d clients per database (max_conns %d), half doing point reads, half short transactions "+
		"(begin, UPDATE, commit), each on its own connection, while tetherd's log file (`[log] file`) is moved away "+
		"and tetherd sent SIGHUP, %d times, %s apart, as logrotate does.", perDB, sigMaxConns, hups, every)
	load := &sigLoad{requests: map[string]int{}, failed: map[string]int{}, latency: map[string][]time.Duration{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, db := range sigDBs {
		for i := range perDB {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sigLoadClient(e, db, i, i%2 == 1, stop, load)
			}()
		}
	}
	var reopened int
	var took []time.Duration
	var missing []int
	for i := 1; i <= hups; i++ {
		time.Sleep(every)
		if !d.running() {
			break
		}
		if err := os.Rename(logFile, fmt.Sprintf("%s.%d", logFile, i)); err != nil {
			close(stop)
			wg.Wait()
			return fmt.Errorf("rotate the log: %w", err)
		}
		start := time.Now()
		if err := d.signal(syscall.SIGHUP); err != nil {
			break
		}
		found := false
		for time.Since(start) < 5*time.Second && !found {
			b, _ := os.ReadFile(logFile)
			if found = strings.Contains(string(b), sigLogLine); !found {
				time.Sleep(2 * time.Millisecond)
			}
		}
		if found {
			reopened++
			took = append(took, time.Since(start))
		} else {
			missing = append(missing, i)
		}
	}
	time.Sleep(every)
	close(stop)
	wg.Wait()
	alive := d.running()
	var ping error
	if alive {
		ping = sigPing(e)
	}

	var rows [][]string
	requests, failed := 0, 0
	for _, db := range sigDBs {
		p50, p99, mx := durations(load.latency[db])
		rows = append(rows, []string{db, fmt.Sprint(perDB), fmt.Sprint(load.requests[db]), fmt.Sprint(load.failed[db]),
			ms(p50) + " / " + ms(p99) + " / " + ms(mx)})
		requests += load.requests[db]
		failed += load.failed[db]
	}
	r.table([]string{"database", "clients", "requests during the SIGHUPs", "failed", "latency p50 / p99 / max ms"}, rows)
	p50, _, mx := durations(took)
	r.say("SIGHUPs sent: %d; the fresh log file said `%s` after %d of them, %s ms after the signal at the median, %s ms at most.",
		hups, sigLogLine, reopened, ms(p50), ms(mx))
	if load.firstErr != nil {
		r.say("The first failed request: %v", load.firstErr)
	}
	r.check(alive, "SIGHUP: tetherd keeps running after %d SIGHUPs", hups)
	r.check(ping == nil, "SIGHUP: tetherd answers a new client afterwards (%v)", sigOr(ping, "ping answered"))
	r.check(requests > 0 && failed == 0, "SIGHUP: no request failed under the SIGHUPs (%d of %d)", failed, requests)
	r.check(reopened == hups, "SIGHUP: each SIGHUP reopened the log file, which says so (%d of %d%s)", reopened, hups, sigMissing(missing))

	// A clean stop ends the phase: exit code 0 and no socket file left.
	sigterm := time.Now()
	d.signal(syscall.SIGTERM)
	gone := sigSocketGone(e, sigterm, 5*time.Second)
	d.wait(sigGrace + 10*time.Second)
	r.check(!d.running() && d.code == 0, "SIGTERM with nothing open: tetherd exits with code 0 (%s)", sigExitText(d, sigterm))
	r.check(gone > 0 && !sigSocketThere(e), "SIGTERM with nothing open: the socket file is removed")
	return nil
}

func sigMissing(missing []int) string {
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("; not after SIGHUP %v", missing)
}

func sigOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func sigExitText(d *sigDaemon, from time.Time) string {
	if d.running() {
		return "still running"
	}
	return fmt.Sprintf("exited %.2f s after the signal, code %d", d.exit.Sub(from).Seconds(), d.code)
}

// sigPing pings tetherd on a new connection.
func sigPing(e *env) error {
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.close()
	_, err = c.do(wire.Request{Op: wire.OpPing}, sigReply)
	return err
}

// sigOpenTx begins a transaction on db on a new connection and inserts
// marker in it; the transaction is left open and idle.
func sigOpenTx(e *env, db, marker string) (*client, uint64, error) {
	c, err := e.dial()
	if err != nil {
		return nil, 0, err
	}
	rep, err := c.do(wire.Request{Op: wire.OpBegin, Backend: db}, sigReply)
	if err != nil {
		c.close()
		return nil, 0, fmt.Errorf("begin: %w", err)
	}
	tx := toUint(rep.Fields["tx"])
	if _, err := c.do(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO faults_signals_tx (marker) VALUES (" + placeholder(db, 1) + ")",
		Params: []any{marker}}, sigReply); err != nil {
		c.close()
		return nil, 0, fmt.Errorf("insert: %w", err)
	}
	// It also takes the lock of row 0, which shows whether the server ended it.
	if _, err := c.do(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "UPDATE faults_signals SET n = n + 1 WHERE id = 0"}, sigReply); err != nil {
		c.close()
		return nil, 0, fmt.Errorf("lock: %w", err)
	}
	return c, tx, nil
}

func sigCommitted(db, marker string, w *sql.DB) (int, error) {
	var n int
	err := w.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM faults_signals_tx WHERE marker = "+placeholder(db, 1), marker).Scan(&n)
	return n, err
}

// sigLockFree waits up to within for an independent connection to get row
// 0's lock, which the transactions of sigOpenTx hold while they are open.
func sigLockFree(e *env, db string, within time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		err := func() error {
			tx, err := e.watch(db).BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			_, err = tx.ExecContext(ctx, "SELECT n FROM faults_signals WHERE id = 0 FOR UPDATE NOWAIT")
			return err
		}()
		if err == nil {
			return time.Since(start), nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("row 0 still locked after %s: %w", within, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sigProbe is one connect attempt during a drain.
type sigProbe struct {
	at       time.Duration // after the SIGTERM
	took     time.Duration
	accepted bool
	answered string // for an accepted one: what became of a ping on it
}

// sigProbes connects every 20 ms from the SIGTERM at start until done is
// closed; a connection that is accepted is pinged.
func sigProbes(e *env, start time.Time, done <-chan struct{}) []sigProbe {
	var probes []sigProbe
	for {
		select {
		case <-done:
			return probes
		default:
		}
		p := sigProbe{at: time.Since(start)}
		t := time.Now()
		conn, err := net.DialTimeout("unix", e.socket, 3*time.Second)
		p.took = time.Since(t)
		if err == nil {
			p.accepted = true
			c := &client{conn: conn}
			rep, err := c.do(wire.Request{Op: wire.OpPing}, 3*time.Second)
			switch {
			case err == nil:
				p.answered = "ping answered"
			case rep != nil:
				p.answered = "error " + errCode(rep)
			case sigTimeout(err):
				p.answered = "no answer in 3 s"
			default:
				p.answered = "closed"
			}
			c.close()
		}
		probes = append(probes, p)
		time.Sleep(20 * time.Millisecond)
	}
}

func sigTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sigDrain: SIGTERM with a transaction open and idle on each database,
// requests in flight, and new clients knocking; the transactions commit
// during the grace, and tetherd should exit as soon as they have.
func sigDrain(e *env, r *report) ([]string, error) {
	d, err := sigStart(e, "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	marker := fmt.Sprintf("drain-%d", time.Now().UnixNano())
	txc := map[string]*client{}
	txs := map[string]uint64{}
	for _, db := range sigDBs {
		c, tx, err := sigOpenTx(e, db, marker)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", db, err)
		}
		defer c.close()
		txc[db], txs[db] = c, tx
	}
	// Requests in flight: a 1 s statement per client, 2 clients per database.
	type flight struct {
		db string
		c  *client
	}
	var flights []flight
	for _, db := range sigDBs {
		for range 2 {
			c, err := e.dial()
			if err != nil {
				return nil, err
			}
			defer c.close()
			if _, err := c.send(wire.Request{Op: wire.OpQuery, Backend: db, SQL: sleepSQL(db, 1)}); err != nil {
				return nil, err
			}
			flights = append(flights, flight{db, c})
		}
	}
	idle, err := e.dial() // a client with no transaction: its new work must be refused
	if err != nil {
		return nil, err
	}
	defer idle.close()
	if _, err := idle.do(wire.Request{Op: wire.OpPing}, sigReply); err != nil {
		return nil, err
	}
	time.Sleep(150 * time.Millisecond) // the statements are running

	sigterm := time.Now()
	if err := d.signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	stopProbes := make(chan struct{})
	probesc := make(chan []sigProbe, 1)
	go func() { probesc <- sigProbes(e, sigterm, stopProbes) }()
	gone := sigSocketGone(e, sigterm, 3*time.Second)

	// The requests in flight complete.
	answered, inflightFailed := 0, []string{}
	for _, f := range flights {
		rep, err := f.c.recv(sigReply)
		switch {
		case err != nil:
			inflightFailed = append(inflightFailed, fmt.Sprintf("%s: %v", f.db, err))
		case rep.Error() != nil:
			inflightFailed = append(inflightFailed, fmt.Sprintf("%s: %v", f.db, rep.Error()))
		default:
			answered++
		}
	}
	inflightDone := time.Since(sigterm)

	// New work is refused, retryably; work on an open transaction is served.
	rep, newErr := idle.do(wire.Request{Op: wire.OpQuery, Backend: "maria", SQL: "SELECT 1"}, sigReply)
	var retry bool
	if rep != nil {
		retry, _ = rep.Error()["retry"].(bool)
	}
	refusedNew := newErr != nil && errCode(rep) == "unavailable" && retry
	var inTxErr error
	for _, db := range sigDBs {
		if _, err := txc[db].do(wire.Request{Op: wire.OpQuery, Tx: txs[db], SQL: "SELECT COUNT(*) FROM faults_signals_tx WHERE marker = " + placeholder(db, 1),
			Params: []any{marker}}, sigReply); err != nil && inTxErr == nil {
			inTxErr = fmt.Errorf("%s: %w", db, err)
		}
	}

	// tetherd waits for the transactions: still there 1.5 s after the SIGTERM.
	time.Sleep(time.Until(sigterm.Add(1500 * time.Millisecond)))
	waited := d.running()
	close(stopProbes)
	probes := <-probesc
	var commitErr error
	for _, db := range sigDBs {
		if _, err := txc[db].do(wire.Request{Op: wire.OpCommit, Tx: txs[db]}, sigReply); err != nil && commitErr == nil {
			commitErr = fmt.Errorf("%s: %w", db, err)
		}
	}
	committed := time.Now()
	d.wait(sigGrace + 10*time.Second)
	afterCommit := time.Duration(-1)
	if !d.running() {
		afterCommit = d.exit.Sub(committed)
	}
	var rowsThere []string
	for _, db := range sigDBs {
		n, err := sigCommitted(db, marker, e.watch(db))
		if err != nil {
			return nil, err
		}
		if n == 1 {
			rowsThere = append(rowsThere, db)
		}
	}

	r.say("SIGTERM with a transaction open and idle on each database (each has inserted a row), two 1 s statements in " +
		"flight per database, and a connected client with no transaction. During the drain: a connect attempt every " +
		"20 ms, a new statement from the idle client, a statement in each transaction; 1.5 s after the SIGTERM both " +
		"transactions commit.")
	var refused []time.Duration
	accepted, slowRefusal, hung := 0, 0, 0
	var acceptedAfterRefusal bool
	var acceptedOutcomes []string
	for _, p := range probes {
		if p.accepted {
			accepted++
			acceptedOutcomes = append(acceptedOutcomes, fmt.Sprintf("%s ms: %s", ms(p.at), p.answered))
			if len(refused) > 0 {
				acceptedAfterRefusal = true
			}
			if strings.HasPrefix(p.answered, "no answer") {
				hung++
			}
			continue
		}
		refused = append(refused, p.took)
		if p.took > sigFastRefuse {
			slowRefusal++
		}
	}
	p50, p99, mx := durations(refused)
	r.table([]string{"connect attempts during the drain", "accepted (before the listener closed)", "refused", "refusal p50 / p99 / max ms",
		"in-flight statements answered", "in flight until (after SIGTERM)", "exit after the last commit"},
		[][]string{{fmt.Sprint(len(probes)), fmt.Sprint(accepted), fmt.Sprint(len(refused)), ms(p50) + " / " + ms(p99) + " / " + ms(mx),
			fmt.Sprintf("%d of %d", answered, len(flights)), ms(inflightDone) + " ms", sigDur(afterCommit)}})
	if accepted > 0 {
		r.say("Connections accepted during the drain: %s.", strings.Join(acceptedOutcomes, "; "))
	}
	r.check(gone > 0, "SIGTERM: the listener closes and its socket file is removed at once (after %s ms)", ms(gone))
	r.check(len(refused) > 0 && slowRefusal == 0 && !acceptedAfterRefusal && hung == 0,
		"SIGTERM: clients connecting during the drain are refused at once (%d refused, the slowest in %s ms; %d accepted, %d of them left unanswered)",
		len(refused), ms(mx), accepted, hung)
	r.check(answered == len(flights), "SIGTERM: the requests in flight complete (%d of %d%s)", answered, len(flights), sigList(inflightFailed))
	r.check(refusedNew, "SIGTERM: new work is refused with unavailable, retry true (%v)", sigOr(newErr, "it was served"))
	r.check(inTxErr == nil, "SIGTERM: statements on open transactions are still served (%v)", sigOr(inTxErr, "both were"))
	r.check(waited, "SIGTERM: tetherd waits for the open transactions (still running 1.5 s after the signal)")
	r.check(commitErr == nil, "SIGTERM: the open transactions commit during shutdown_grace (%v)", sigOr(commitErr, "both did"))
	r.check(len(rowsThere) == len(sigDBs), "SIGTERM: the committed rows are there afterwards (on %s)", sigNone(rowsThere))
	r.check(afterCommit >= 0 && afterCommit < 2*time.Second, "SIGTERM: tetherd exits once the transactions are done, within 2 s of the last commit (%s)", sigDur(afterCommit))
	r.check(!d.running() && d.code == 0, "SIGTERM: a drain that ends in time exits with code 0 (%s)", sigExitText(d, sigterm))
	r.check(!sigSocketThere(e), "SIGTERM: no socket file after the exit")
	return sigExitRow(e, "SIGTERM, transactions committed 1.5 s later", d, sigterm, gone), nil
}

func sigDur(d time.Duration) string {
	if d < 0 {
		return "did not exit"
	}
	return ms(d) + " ms"
}

func sigList(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return "; " + strings.Join(s, "; ")
}

func sigNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sigSecond: a second SIGTERM during the drain exits at once; what the
// abandoned transactions wrote must not be committed.
func sigSecond(e *env, r *report) ([]string, error) {
	d, err := sigStart(e, "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	marker := fmt.Sprintf("second-%d", time.Now().UnixNano())
	for _, db := range sigDBs {
		c, _, err := sigOpenTx(e, db, marker)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", db, err)
		}
		defer c.close()
	}
	sigterm := time.Now()
	if err := d.signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	gone := sigSocketGone(e, sigterm, 3*time.Second)
	time.Sleep(time.Until(sigterm.Add(500 * time.Millisecond)))
	draining := d.running()
	second := time.Now()
	d.signal(syscall.SIGTERM)
	d.wait(10 * time.Second)
	exitAfter := time.Duration(-1)
	if !d.running() {
		exitAfter = d.exit.Sub(second)
	}
	var released []string
	var lockErr error
	for _, db := range sigDBs {
		took, err := sigLockFree(e, db, 10*time.Second)
		if err != nil && lockErr == nil {
			lockErr = fmt.Errorf("%s: %w", db, err)
		}
		released = append(released, db+" "+ms(took)+" ms")
	}
	var committed []string
	for _, db := range sigDBs {
		n, err := sigCommitted(db, marker, e.watch(db))
		if err != nil {
			return nil, err
		}
		if n > 0 {
			committed = append(committed, db)
		}
	}
	r.say("A second SIGTERM, 0.5 s into a drain that waits for an open transaction on each database: tetherd exited %s "+
		"after it (exit code %d); the servers released the transactions' locks after %s.", sigDur(exitAfter), d.code, strings.Join(released, ", "))
	r.check(draining, "second SIGTERM: tetherd was still draining when it came (a transaction open, grace left)")
	r.check(exitAfter >= 0 && exitAfter < 2*time.Second, "second SIGTERM: tetherd exits at once, within 2 s (%s)", sigDur(exitAfter))
	r.check(!sigSocketThere(e), "second SIGTERM: no socket file after the exit")
	r.check(len(committed) == 0 && lockErr == nil, "second SIGTERM: the abandoned transactions are not committed and their locks are released (committed on: %s%s)",
		sigNone(committed), sigList(sigErrs(lockErr)))
	return sigExitRow(e, "second SIGTERM 0.5 s into the drain", d, sigterm, gone), nil
}

func sigErrs(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}

// sigGraceOver: a transaction never ended: tetherd waits out the grace,
// rolls it back and exits.
func sigGraceOver(e *env, r *report) ([]string, error) {
	d, err := sigStart(e, "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	marker := fmt.Sprintf("grace-%d", time.Now().UnixNano())
	c, _, err := sigOpenTx(e, "maria", marker)
	if err != nil {
		return nil, err
	}
	defer c.close()
	sigterm := time.Now()
	if err := d.signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	gone := sigSocketGone(e, sigterm, 3*time.Second)
	d.wait(sigGrace + 15*time.Second)
	exitAfter := time.Duration(-1)
	if !d.running() {
		exitAfter = d.exit.Sub(sigterm)
	}
	n, err := sigCommitted("maria", marker, e.watch("maria"))
	if err != nil {
		return nil, err
	}
	_, lockErr := sigLockFree(e, "maria", 5*time.Second)
	r.say("SIGTERM with a MariaDB transaction that never ends: tetherd exited %s after the signal (shutdown_grace %s).", sigDur(exitAfter), sigGrace)
	r.check(exitAfter >= sigGrace-500*time.Millisecond && exitAfter < sigGrace+5*time.Second,
		"grace over: tetherd waits out shutdown_grace for the transaction, then exits (%s after SIGTERM)", sigDur(exitAfter))
	r.check(n == 0 && lockErr == nil, "grace over: the transaction is rolled back (%d rows committed%s)", n, sigList(sigErrs(lockErr)))
	r.check(!d.running() && d.code == 0, "grace over: exit code 0 (%s)", sigExitText(d, sigterm))
	r.check(!sigSocketThere(e), "grace over: no socket file after the exit")
	return sigExitRow(e, "SIGTERM, a transaction never ended", d, sigterm, gone), nil
}
