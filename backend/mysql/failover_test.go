package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/sqlpool"
)

// The failover tests run writers, readers and transactions through a
// Replicated backend over the pair while the test, as an orchestrator
// would, moves the primary to the replica (a switchover: the primary turned
// read-only; a kill: the primary's mariadbd killed), then puts the pair back
// as it found it (the primary on the env's primary, the replica replicating
// from it semi-synchronously) for the package's other tests. They run one
// after another, never in parallel with another user of the pair.

// failoverInterval is the monitor's interval in these tests; writes must be
// served again within failoverBound of the promotion.
const (
	failoverInterval = 100 * time.Millisecond
	failoverBound    = time.Second + failoverInterval
	// failoverPrimaryWait is the backend's primary_wait in these tests.
	failoverPrimaryWait = 5 * time.Second
)

// failoverLoad is the load a failover runs under, and what it saw.
type failoverLoad struct {
	b     *mysql.Replicated
	table string
	stop  chan struct{}
	wg    sync.WaitGroup

	mu sync.Mutex
	// acked are the rows whose write (or transaction's commit) was
	// answered done: they must be on the new primary.
	acked []int64
	// ackedAt are the times those answers came.
	ackedAt []time.Time
	// errs counts the errors the clients saw, by class (classify).
	errs map[string]int
	// bad are the errors that are not a typed outcome a client can act on.
	bad []error
	// reads counts the reads answered.
	reads int
}

// startLoad starts writers writers, readers readers and txs clients of
// transactions (an insert and a read of it, then commit) through b into
// table, each with its own client. Row ids are unique: writer w's n-th row
// is w*1e6+n.
func startLoad(b *mysql.Replicated, table string, writers, readers, txs int) *failoverLoad {
	l := &failoverLoad{b: b, table: table, stop: make(chan struct{}), errs: map[string]int{}}
	for w := 0; w < writers+txs; w++ {
		l.wg.Add(1)
		go l.writer(w, w >= writers)
	}
	for i := 0; i < readers; i++ {
		l.wg.Add(1)
		go l.reader()
	}
	return l
}

func (l *failoverLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *failoverLoad) writer(w int, tx bool) {
	defer l.wg.Done()
	cl := &sqlpool.Client{}
	ins := "INSERT INTO " + l.table + " (id, v) VALUES (?, ?)"
	for n := int64(1); !l.stopped(); n++ {
		id := int64(w+1)*1_000_000 + n
		if !tx {
			_, _, err := backendtest.Query(l.b, cl, sqlpool.KindExec, nil, ins, id, n)
			l.outcome(id, err)
			continue
		}
		_, begin, err := backendtest.Query(l.b, cl, sqlpool.KindBegin, nil, "")
		if err != nil {
			l.outcome(0, err)
			continue
		}
		t := begin.NewTx
		if _, _, err = backendtest.Query(l.b, cl, sqlpool.KindExec, t, ins, id, n); err == nil {
			_, _, err = backendtest.Query(l.b, cl, sqlpool.KindQuery, t, "SELECT v FROM "+l.table+" WHERE id = ?", id)
		}
		if err != nil {
			l.outcome(0, err)
			if _, _, rerr := backendtest.Query(l.b, cl, sqlpool.KindRollback, t, ""); rerr != nil && !errors.Is(rerr, tether.ErrTxDone) {
				l.outcome(0, rerr)
			}
			continue
		}
		_, _, err = backendtest.Query(l.b, cl, sqlpool.KindCommit, t, "")
		l.outcome(id, err)
	}
}

func (l *failoverLoad) reader() {
	defer l.wg.Done()
	cl := &sqlpool.Client{}
	for !l.stopped() {
		_, _, err := backendtest.Query(l.b, cl, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+l.table)
		l.mu.Lock()
		if err == nil {
			l.reads++
		} else {
			l.classify(err)
		}
		l.mu.Unlock()
	}
}

// outcome records a write's answer: id acknowledged (id 0: nothing to
// check), or the error.
func (l *failoverLoad) outcome(id int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		if id != 0 {
			l.acked = append(l.acked, id)
			l.ackedAt = append(l.ackedAt, time.Now())
		}
		return
	}
	l.classify(err)
}

// classify counts err by its class: a typed answer a client can act on
// (retry it, or find out whether it ran), or bad.
func (l *failoverLoad) classify(err error) {
	var te *tether.Error
	if !errors.As(err, &te) {
		l.errs["untyped"]++
		l.bad = append(l.bad, err)
		return
	}
	class := string(te.Code)
	if te.BackendCode != "" {
		class += "[" + te.BackendCode + "]"
	}
	switch {
	case te.Retry:
		class += " (retry)"
	case te.Code == tether.CodeUnavailable:
		class += " (may have run)"
	default:
		class += " (final)"
	}
	l.errs[class]++
	switch {
	case te.Retry && (te.Code == tether.CodeUnavailable || te.Code == tether.CodeTxAborted || te.Code == tether.CodeBusy):
	case !te.Retry && te.Code == tether.CodeUnavailable && te.BackendCode == "":
		// A connection lost under a statement: it may have run (a kill).
	default:
		l.bad = append(l.bad, err)
	}
}

// firstAckAfter returns how long after t the first write was answered done.
func (l *failoverLoad) firstAckAfter(t time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.ackedAt {
		if at.After(t) {
			return at.Sub(t), true
		}
	}
	return 0, false
}

func (l *failoverLoad) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitAcks waits until n more writes than now are acknowledged.
func (l *failoverLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	want := l.ackCount() + n
	deadline := time.Now().Add(10 * time.Second)
	for l.ackCount() < want {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d writes acknowledged in 10 s; errors: %v; hosts: %+v", n, l.errs, l.b.Topology())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *failoverLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// check judges what the load saw: no error but typed ones, every
// acknowledged row on db (the new primary).
func (l *failoverLoad) check(t *testing.T, db *sql.DB) {
	t.Helper()
	for i, err := range l.bad {
		if i == 10 {
			t.Errorf("... %d more", len(l.bad)-10)
			break
		}
		t.Errorf("a client saw an error that is neither retryable nor 'may have run': %v", err)
	}
	rows, err := db.Query("SELECT id FROM " + l.table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	have := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, id := range l.acked {
		if !have[id] {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged row %d is not on the new primary", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(l.acked))
	}
	t.Logf("%d writes acknowledged (%d rows on the new primary), %d reads, errors by class: %v", len(l.acked), len(have), l.reads, l.errs)
}

// openFailover opens a Replicated backend over the pair with a fast monitor
// and a table for the load.
func openFailover(t *testing.T, p *pair) (*mysql.Replicated, string) {
	t.Helper()
	bc := tether.DefaultBackendConfig("mysql", backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_PRIMARY_DSN"))
	bc.Replicas = []string{backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPLICA_DSN")}
	bc.MonitorInterval = tether.Duration(failoverInterval)
	bc.MaxReplicaLag = tether.Duration(30 * time.Second)
	bc.PrimaryWait = tether.Duration(failoverPrimaryWait)
	b, err := mysql.NewReplicated(bc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	table := fmt.Sprintf("failover_%d", time.Now().UnixNano()%1e9)
	exec(t, p.primaryAdmin, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
	t.Cleanup(func() { p.primaryAdmin.Exec("DROP TABLE IF EXISTS " + table) })
	waitCaughtUp(t, p)
	// Reads on the replica: the monitor has answered.
	deadline := time.Now().Add(10 * time.Second)
	for h := b.Topology().Hosts; h[0].State != "writes" || h[1].State != "reads"; h = b.Topology().Hosts {
		if time.Now().After(deadline) {
			t.Fatalf("hosts not primary and replica after 10 s: %+v", h)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return b, table
}

// promote makes the replica at db a primary as an orchestrator does: it
// waits until the replica has applied all it received, then stops
// replicating and turns writable, waiting for a semi-sync replica's ack at
// each commit when semiSync (none is attached yet at a failover: a commit
// would wait rpl_semi_sync_master_timeout for nothing). It returns when the
// promotion is done.
func promote(t *testing.T, db *sql.DB, semiSync bool) time.Time {
	t.Helper()
	io := slaveStatus(t, db)["Gtid_IO_Pos"]
	var got int
	if err := db.QueryRow("SELECT MASTER_GTID_WAIT(?, 15)", io).Scan(&got); err != nil || got != 0 {
		t.Fatalf("the replica did not apply what it received (%s) in 15 s: %d, %v", io, got, err)
	}
	exec(t, db, "STOP SLAVE")
	exec(t, db, "RESET SLAVE ALL")
	if semiSync {
		exec(t, db, "SET GLOBAL rpl_semi_sync_master_enabled = ON")
	} else {
		exec(t, db, "SET GLOBAL rpl_semi_sync_master_enabled = OFF")
	}
	exec(t, db, "SET GLOBAL read_only = 0")
	return time.Now()
}

// replicateFrom makes the server at db, read-only, a replica of the server
// listening on port, from what it has itself (its binary log's position),
// acknowledging semi-synchronously and no longer waiting for acks itself
// (its applier would wait for a replica of its own at every event).
func replicateFrom(t *testing.T, db *sql.DB, port string) {
	t.Helper()
	user := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPL_USER")
	pass := backendtest.RequireEnv(t, "TETHER_TEST_MYSQL_REPL_PASSWORD")
	exec(t, db, "SET GLOBAL read_only = 1")
	exec(t, db, "SET GLOBAL rpl_semi_sync_master_enabled = OFF")
	exec(t, db, "SET GLOBAL rpl_semi_sync_slave_enabled = ON")
	exec(t, db, "STOP SLAVE")
	exec(t, db, "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos")
	exec(t, db, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = '%s', MASTER_PASSWORD = '%s', "+
		"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", port, user, pass))
	exec(t, db, "START SLAVE")
}

// caughtUp waits until replica has applied all of primary's binary log.
func caughtUp(t *testing.T, primary, replica *sql.DB) {
	t.Helper()
	var pos string
	if err := primary.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	var got int
	if err := replica.QueryRow("SELECT MASTER_GTID_WAIT(?, 15)", pos).Scan(&got); err != nil || got != 0 {
		var st string
		replica.QueryRow("SELECT CONCAT_WS(' ', @@global.gtid_slave_pos, @@global.gtid_io_pos)").Scan(&st)
		t.Fatalf("replica did not reach %s in 15 s (it has %s): %d, %v", pos, st, got, err)
	}
}

// restorePair puts the pair back as the env says: the env's primary
// writable, the env's replica read-only and replicating from it
// semi-synchronously. The env's primary must be read-only and replicating
// from the env's replica (the switchover back).
func restorePair(t *testing.T, p *pair) {
	t.Helper()
	primaryPort := portOf(t, p.primaryAdmin)
	caughtUp(t, p.replicaAdmin, p.primaryAdmin)
	exec(t, p.replicaAdmin, "SET GLOBAL read_only = 1")
	caughtUp(t, p.replicaAdmin, p.primaryAdmin)
	promote(t, p.primaryAdmin, true)
	replicateFrom(t, p.replicaAdmin, primaryPort)
	caughtUp(t, p.primaryAdmin, p.replicaAdmin)
	// The replica's semi-sync ack is what the loss test leans on: wait
	// until the primary counts it again.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var name string
		var n int
		if err := p.primaryAdmin.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not a semi-sync client of the primary again after 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func portOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	var port string
	if err := db.QueryRow("SELECT @@global.port").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

// runFailover runs the load, calls fail to take the primary away and
// promote the replica (it returns when the promotion is done), and judges
// what the clients saw. With semiSync, the primary must wait for the
// replica's ack at every commit of the load (else an acknowledged write may
// be lost by a kill whatever tetherd does, and the test says so).
func runFailover(t *testing.T, p *pair, semiSync bool, fail func() time.Time) (*mysql.Replicated, *failoverLoad) {
	b, table := openFailover(t, p)
	var noTx int
	if semiSync {
		noTx = semiSyncOn(t, p.primaryAdmin)
	}
	l := startLoad(b, table, 4, 2, 2)
	defer func() {
		if !l.stopped() {
			l.finish()
		}
	}()
	l.waitAcks(t, 200)
	if semiSync {
		if n := semiSyncStatus(t, p.primaryAdmin, "Rpl_semi_sync_master_no_tx"); n != noTx {
			t.Fatalf("%d commits of the load were not acknowledged by the replica (semi-sync fell back to asynchronous): "+
				"a kill could lose acknowledged writes whatever tetherd does", n-noTx)
		}
	}
	faulted := time.Now()
	promoted := fail()
	l.waitAcks(t, 200)
	l.finish()
	took, ok := l.firstAckAfter(promoted)
	if !ok {
		t.Fatal("no write acknowledged after the promotion")
	}
	if took > failoverBound {
		t.Errorf("writes served again %s after the promotion, want within %s", took, failoverBound)
	}
	t.Logf("first write served %s after the promotion", took.Round(time.Millisecond))
	l.check(t, p.replicaAdmin)
	// What could not run waited for the new primary instead of failing,
	// when it came well within primary_wait (a slow promotion may not).
	if n := l.errs[string(tether.CodeUnavailable)+" (retry)"]; n > 0 && promoted.Sub(faulted) < failoverPrimaryWait-time.Second {
		t.Errorf("%d requests answered unavailable (retry) although a primary came %s after the fault, within primary_wait %s",
			n, promoted.Sub(faulted).Round(time.Millisecond), failoverPrimaryWait)
	}
	top := b.Topology()
	if b.PrimaryIndex() != 1 || top.Hosts[1].State != "writes" {
		t.Errorf("writes are not on the promoted replica: %+v", top.Hosts)
	}
	return b, l
}

// TestFailover_Switchover: the primary turned read-only and the replica
// promoted under load: every acknowledged write on the new primary, no
// error but typed retryable ones (a write refused as read-only waits for
// the new primary), writes served again within a second of the promotion
// plus one monitor interval.
func TestFailover_Switchover(t *testing.T) {
	p := openPair(t)
	waitCaughtUp(t, p)
	restored := false
	defer func() {
		if !restored {
			restorePair(t, p)
		}
	}()
	runFailover(t, p, false, func() time.Time {
		exec(t, p.primaryAdmin, "SET GLOBAL read_only = 1")
		at := promote(t, p.replicaAdmin, false)
		replicateFrom(t, p.primaryAdmin, portOf(t, p.replicaAdmin))
		return at
	})
	restored = true
	restorePair(t, p)
}

// TestFailover_PrimaryKilled: the primary's mariadbd killed (SIGKILL) under
// load, the replica promoted: writes served again within the bound, no
// acknowledged write lost (semi-sync, AFTER_SYNC: a commit is acknowledged
// only once the replica has it), every error typed (a write in flight at
// the kill answers "may have run"). The killed server is started again from
// its data directory as a replica of the promoted one (its binary log
// truncated of what the replica never acknowledged: it starts as a semi-sync
// slave), then the pair is switched back.
func TestFailover_PrimaryKilled(t *testing.T) {
	p := openPair(t)
	waitCaughtUp(t, p)
	var waitPoint string
	if err := p.primaryAdmin.QueryRow("SELECT @@global.rpl_semi_sync_master_wait_point").Scan(&waitPoint); err != nil {
		t.Fatal(err)
	}
	if waitPoint != "AFTER_SYNC" {
		t.Fatalf("the primary's semi-sync waits %s, want AFTER_SYNC (scripts/lib/replicas.sh): no loss test without it", waitPoint)
	}
	pid, args := serverProcess(t, p.primaryAdmin)
	restarted := false
	defer func() {
		if !restarted {
			restartAsReplica(t, p, args, nil)
			restorePair(t, p)
		}
	}()
	var killedAt time.Time
	_, l := runFailover(t, p, true, func() time.Time {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killedAt = time.Now()
		return promote(t, p.replicaAdmin, false)
	})
	t.Logf("promoted %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	restarted = true
	restartAsReplica(t, p, args, l)
	restorePair(t, p)
}

// serverProcess returns the PID of the server at db (its pid file) and its
// command line (/proc), to start it again as it was.
func serverProcess(t *testing.T, db *sql.DB) (int, []string) {
	t.Helper()
	var file string
	if err := db.QueryRow("SELECT @@global.pid_file").Scan(&file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("the server's pid file is not readable here (not the same machine?): %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", file, err)
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Skipf("the server's command line is not readable: %v", err)
	}
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	if len(args) < 2 || !strings.Contains(args[0], "mariadbd") && !strings.Contains(args[0], "mysqld") {
		t.Fatalf("pid %d is not a mariadbd: %q", pid, args)
	}
	return pid, args
}

// restartAsReplica starts the killed primary again with its command line
// plus read_only, semi-sync slave and not semi-sync master (its crash
// recovery then rolls back the transactions it had prepared and logged but
// no replica acknowledged, and truncates its binary log before them: else
// it would hold writes the promoted replica never had, and could not
// replicate from it), in its own session so that
// it outlives the test binary (scripts/lib/replicas.sh stops it by its pid
// file), and makes it replicate from the promoted replica.
//
// Its recovery does not always drop that tail (MariaDB 10.11 here commits
// the prepared transactions it finds in its binary log): then what it holds
// that the promoted replica never received must be writes never
// acknowledged (checked against l's, when given), and it rejoins from the
// position the replica was promoted at, applying the new primary's
// transactions past its own stray ones with gtid_strict_mode off until it
// has caught up. An orchestrator would re-clone it or flash those back.
func restartAsReplica(t *testing.T, p *pair, args []string, l *failoverLoad) {
	t.Helper()
	cmd := osexec.Command(args[0], append(args[1:], "--read-only=ON", "--rpl-semi-sync-slave-enabled=ON",
		"--rpl-semi-sync-master-enabled=OFF")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s again: %v", args[0], err)
	}
	go cmd.Wait() //nolint:errcheck // reaps it if it exits while the test runs
	deadline := time.Now().Add(30 * time.Second)
	for p.primaryAdmin.Ping() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the killed primary did not answer 30 s after its restart (see its --log-error)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var have, from string
	if err := p.primaryAdmin.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&have); err != nil {
		t.Fatal(err)
	}
	if err := p.replicaAdmin.QueryRow("SELECT @@global.gtid_slave_pos").Scan(&from); err != nil {
		t.Fatal(err)
	}
	if !gtidCovers(from, have) {
		t.Logf("the killed primary had logged up to %s, the replica was promoted at %s: the rest was never acknowledged", have, from)
		if l != nil {
			l.checkStray(t, p.primaryAdmin, p.replicaAdmin)
		}
		exec(t, p.primaryAdmin, "SET GLOBAL gtid_strict_mode = 0")
		replicateFrom(t, p.primaryAdmin, portOf(t, p.replicaAdmin))
		exec(t, p.primaryAdmin, "STOP SLAVE")
		exec(t, p.primaryAdmin, "SET GLOBAL gtid_slave_pos = ?", from)
		exec(t, p.primaryAdmin, "START SLAVE")
		caughtUp(t, p.replicaAdmin, p.primaryAdmin)
		exec(t, p.primaryAdmin, "SET GLOBAL gtid_strict_mode = 1")
		return
	}
	replicateFrom(t, p.primaryAdmin, portOf(t, p.replicaAdmin))
}

// checkStray fails if a row the old primary has and the new one lacks was
// acknowledged.
func (l *failoverLoad) checkStray(t *testing.T, old, cur *sql.DB) {
	t.Helper()
	ids := func(db *sql.DB) map[int64]bool {
		rows, err := db.Query("SELECT id FROM " + l.table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			m[id] = true
		}
		return m
	}
	o, c := ids(old), ids(cur)
	acked := map[int64]bool{}
	for _, id := range l.acked {
		acked[id] = true
	}
	stray := 0
	for id := range o {
		if !c[id] {
			stray++
			if acked[id] {
				t.Errorf("row %d, acknowledged, is on the killed primary only", id)
			}
		}
	}
	t.Logf("%d rows on the killed primary only, none acknowledged", stray)
}

// slaveStatus returns SHOW SLAVE STATUS's columns by name (none when the
// server replicates from nothing).
func slaveStatus(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if !rows.Next() {
		return out
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

// semiSyncStatus returns a numeric global status variable of the server.
func semiSyncStatus(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n string
	var v sql.NullString
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if v.String == "ON" {
		return 1
	}
	i, _ := strconv.Atoi(v.String)
	return i
}

// semiSyncOn waits until the primary at db waits for its replica's ack at
// each commit (Rpl_semi_sync_master_status: on once the replica has
// acknowledged a commit), and returns how many commits went unacknowledged
// so far.
func semiSyncOn(t *testing.T, db *sql.DB) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for semiSyncStatus(t, db, "Rpl_semi_sync_master_status") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the primary's semi-sync is not on after 15 s")
		}
		exec(t, db, "CREATE TABLE IF NOT EXISTS failover_semisync (id INT PRIMARY KEY)")
		exec(t, db, "REPLACE INTO failover_semisync VALUES (1)")
		time.Sleep(20 * time.Millisecond)
	}
	return semiSyncStatus(t, db, "Rpl_semi_sync_master_no_tx")
}

// gtidCovers reports whether the GTID list have includes want's every
// domain's sequence number (the router's own rule, restated for the test).
func gtidCovers(have, want string) bool {
	seqs := func(s string) map[string]uint64 {
		m := map[string]uint64{}
		for _, g := range strings.Split(s, ",") {
			f := strings.Split(strings.TrimSpace(g), "-")
			if len(f) != 3 {
				continue
			}
			n, _ := strconv.ParseUint(f[2], 10, 64)
			m[f[0]] = n
		}
		return m
	}
	h := seqs(have)
	for d, n := range seqs(want) {
		if h[d] < n {
			return false
		}
	}
	return true
}
