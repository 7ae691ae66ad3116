package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Failover under load (issue 21): a tetherd backend over a MariaDB GTID
// primary and its semi-synchronous replica (replicas = [...]); clients
// read, insert and commit short transactions through tetherd while the
// campaign, as an orchestrator would, moves the primary from one server to
// the other, again and again: by a switchover (the primary turned
// read-only, the replica promoted once it has applied everything) and by a
// kill (the primary's mariadbd SIGKILLed, the replica promoted once it has
// applied all it received, the killed server started again as a replica of
// the new primary). Nothing tetherd acknowledged may be lost, every error
// must be typed (no write refused by a read-only server may reach a
// client: tetherd never sends one a write it can see is read-only, and a
// write refused as read-only waits for the next primary), and writes must
// be served again within a second of each promotion plus one monitor
// interval.
func init() {
	register(campaign{name: "failover", title: "Failover under load: a MariaDB primary switched over and killed, its replica promoted", run: runFailover})
}

const (
	failoverInterval = 100 * time.Millisecond
	failoverBound    = time.Second + failoverInterval
	failoverBackend  = "maria_rep"
)

// failoverServer is one server of the pair, by its admin connection.
type failoverServer struct {
	name  string // "a" (the pair's first primary) or "b"
	admin *sql.DB
	port  string
	// noTx is its Rpl_semi_sync_master_no_tx when its semi-sync came on:
	// a commit since that did not wait for an ack moves it.
	noTx int
}

func runFailover(e *env, r *report) error {
	cycles := e.scale(8, 2)
	warmup := time.Duration(e.scale(3000, 1000)) * time.Millisecond
	between := time.Duration(e.scale(3000, 1000)) * time.Millisecond
	var srv [2]*failoverServer
	for i, name := range []string{"a", "b"} {
		dsn := os.Getenv("FAULTS_REP_" + strings.ToUpper(name) + "_ADMIN_DSN")
		if dsn == "" {
			return fmt.Errorf("FAULTS_REP_%s_ADMIN_DSN is not set (run tests/faults/run.sh)", strings.ToUpper(name))
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(4)
		defer db.Close()
		s := &failoverServer{name: name, admin: db}
		if err := db.QueryRow("SELECT @@global.port").Scan(&s.port); err != nil {
			return fmt.Errorf("server %s: %w", name, err)
		}
		srv[i] = s
	}
	if err := failoverTables(srv[0].admin); err != nil {
		return err
	}
	if err := failoverCaughtUp(srv[0].admin, srv[1].admin); err != nil {
		return err
	}
	if err := failoverSemiSync(srv[0]); err != nil {
		return err
	}
	e.extraConfig = fmt.Sprintf(`
[backends.%s]
type = "mysql"
dsn = %q
replicas = [%q]
max_conns = 8
min_conns = 2
acquire_timeout = "10s"
monitor_interval = "%s"
max_replica_lag = "30s"
primary_wait = "5s"
`, failoverBackend, os.Getenv("FAULTS_REP_A_DSN"), os.Getenv("FAULTS_REP_B_DSN"), failoverInterval)
	defer func() { e.extraConfig = "" }()
	if err := e.startTetherd(8, ""); err != nil {
		return err
	}

	var clients []*restartClient
	for i := 1; i <= restartClientsPerRole; i++ {
		for _, role := range []string{"read", "insert", "tx"} {
			clients = append(clients, &restartClient{e: e, db: failoverBackend, role: role, name: fmt.Sprintf("rep-%s-%d", role, i)})
		}
	}
	r.say("%d clients on their own connections to one tetherd, backend `%s` = a MariaDB primary and its replica "+
		"(GTID, semi-synchronous with rpl_semi_sync_master_wait_point AFTER_SYNC; `replicas = [...]`, monitor_interval "+
		"%s, primary_wait 5s, max_conns 8 per host, every request with timeout_ms %d): %d point reads of a %d-row "+
		"table (replica-safe: they go to the replica), %d autocommit INSERTs of a unique key, %d short transactions "+
		"(`begin`, an INSERT, `commit`); each pauses %s after an error and keeps going. After %s of load, %d "+
		"failovers %s apart, alternating: a switchover (`SET GLOBAL read_only = 1` on the primary; on the replica, "+
		"once it has applied the primary's position, `STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0`; the old "+
		"primary then replicates from the new one) and a kill (the primary's mariadbd SIGKILLed; the replica promoted "+
		"once it has applied all it received; the killed server started again from its command line with read_only and "+
		"as a semi-sync slave, and made a replica of the new one). Semi-sync on the new primary is turned on once the "+
		"old one acknowledges as its replica, so every kill finds commits acknowledged only once the replica has them. "+
		"Afterwards the final primary is read: every acknowledged write must be there, none answered as not done.",
		len(clients), failoverBackend, failoverInterval, restartTimeout.Milliseconds(), restartClientsPerRole, restartReadRows,
		restartClientsPerRole, restartClientsPerRole, restartBackoff, warmup, cycles, between)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range clients {
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

	type cycle struct {
		kind       string
		promotion  time.Duration // from the fault to the promotion done
		firstWrite time.Duration // from the promotion to the first write answered done
		served     bool
		stray      int // on a killed primary only: never acknowledged
		semiOff    int // commits the primary did not wait for the replica's ack for, before a kill
	}
	var done []cycle
	cur, next := srv[0], srv[1]
	var runErr error
	for i := 0; i < cycles; i++ {
		cy := cycle{kind: "switchover"}
		if i%2 == 1 {
			cy.kind = "kill"
		}
		t0 := time.Now()
		var promoted time.Time
		var err error
		if cy.kind == "switchover" {
			promoted, err = failoverSwitchover(cur, next)
		} else {
			promoted, cy.stray, cy.semiOff, err = failoverKill(e, cur, next, clients)
		}
		if err != nil {
			runErr = fmt.Errorf("failover %d (%s): %w", i+1, cy.kind, err)
			break
		}
		cy.promotion = promoted.Sub(t0)
		// The first write answered done after the promotion (the kill's
		// restart of the old primary may have taken longer than the wait).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if cy.firstWrite, cy.served = failoverFirstWrite(clients, promoted); cy.served || time.Now().After(deadline) {
				break
			}
		}
		if !cy.served {
			for _, c := range clients {
				c.mu.Lock()
				var last []string
				for i := len(c.ops) - 1; i >= 0 && len(last) < 4; i-- {
					o := c.ops[i]
					last = append(last, fmt.Sprintf("%s %s %+.0fms..%+.0fms %s", o.op, o.code, float64(o.start.Sub(promoted))/1e6, float64(o.end.Sub(promoted))/1e6, o.msg))
				}
				c.mu.Unlock()
				e.logf("failover: no write served after failover %d; %s's last requests: %s", i+1, c.name, strings.Join(last, " | "))
			}
		}
		done = append(done, cy)
		e.logf("failover: %d (%s): promoted %.0f ms after the fault, first write %.0f ms after", i+1, cy.kind,
			float64(cy.promotion)/1e6, float64(cy.firstWrite)/1e6)
		cur, next = next, cur
		if err := failoverSemiSync(cur); err != nil {
			runErr = fmt.Errorf("failover %d: %w", i+1, err)
			break
		}
		time.Sleep(between)
	}
	stopLoad()

	// The judgement, on the final primary.
	if err := failoverCaughtUp(cur.admin, next.admin); err != nil {
		r.say("The last replica did not catch up: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	present, err := restartKeys(ctx, cur.admin)
	if err != nil {
		return errors.Join(runErr, err)
	}
	var acked, lost, notDone, notDoneFound, unknown, wrongReads, ops int
	codes := map[string]int{}
	var untyped, refused []string
	for _, c := range clients {
		wrongReads += c.wrongReads
		ops += len(c.ops)
		for _, w := range c.writes {
			switch w.fate {
			case restartAcked:
				acked++
				if !present[w.key] {
					lost++
				}
			case restartNotDone:
				notDone++
				if present[w.key] {
					notDoneFound++
				}
			default:
				unknown++
			}
		}
		for _, o := range c.ops {
			if o.code == "" {
				continue
			}
			k := o.code
			if o.retry {
				k += " (retry)"
			}
			codes[k]++
			if !restartOutageCodes[o.code] {
				untyped = append(untyped, o.op+": "+o.code+": "+o.msg)
			}
			if strings.Contains(o.msg, "read-only") && !strings.Contains(o.msg, "turned read-only under the transaction") {
				refused = append(refused, o.op+": "+o.msg)
			}
		}
	}
	rows := [][]string{}
	var firsts []time.Duration
	for i, cy := range done {
		first := "none within 10 s"
		if cy.served {
			first = ms(cy.firstWrite)
			firsts = append(firsts, cy.firstWrite)
		}
		rows = append(rows, []string{strconv.Itoa(i + 1), cy.kind, ms(cy.promotion), first, strconv.Itoa(cy.stray)})
	}
	r.table([]string{"failover", "how", "fault to promotion (ms)", "promotion to first write served (ms)", "unacknowledged writes only on the killed primary"}, rows)
	var cl []string
	for k, n := range codes {
		cl = append(cl, fmt.Sprintf("`%s` %d", k, n))
	}
	sort.Strings(cl)
	if len(cl) == 0 {
		cl = []string{"none"}
	}
	p50, p99, worst := durations(firsts)
	r.say("%d requests; %d writes acknowledged, %d answered as not done, %d answered \"may have run\"; errors by code: %s. "+
		"Promotion to first write served: p50 %s ms, p99 %s ms, max %s ms.",
		ops, acked, notDone, unknown, strings.Join(cl, ", "), ms(p50), ms(p99), ms(worst))
	r.check(len(done) == cycles, "all %d failovers ran (%d did)", cycles, len(done))
	r.check(lost == 0, "acknowledged writes lost: %d of %d", lost, acked)
	r.check(notDoneFound == 0, "writes answered as not done but found: %d", notDoneFound)
	r.check(len(untyped) == 0, "every error is one a client can act on (unavailable, tx_aborted, busy, timeout): %d are not%s", len(untyped), firstOf(untyped))
	r.check(len(refused) == 0, "no write refused as read-only reached a client: %d did%s", len(refused), firstOf(refused))
	r.check(wrongReads == 0, "every read returned its row: %d did not", wrongReads)
	slow := 0
	for _, cy := range done {
		if !cy.served || cy.firstWrite > failoverBound {
			slow++
		}
	}
	r.check(slow == 0, "writes served again within %s of every promotion: %d failovers were not", failoverBound, slow)
	semiOff := 0
	for _, cy := range done {
		semiOff += cy.semiOff
	}
	r.check(semiOff == 0, "every commit before a kill waited for the replica's ack (semi-sync on): %d did not", semiOff)
	r.check(e.alive(), "tetherd is still running")
	return runErr
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (first: " + s[0] + ")"
}

// failoverTables makes the restart campaign's tables afresh on the primary.
func failoverTables(db *sql.DB) error {
	values := make([]string, restartReadRows)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 'row-%d')", i+1, i+1)
	}
	for _, q := range []string{"DROP TABLE IF EXISTS faults_restart", "DROP TABLE IF EXISTS faults_restart_read",
		"CREATE TABLE faults_restart (k VARCHAR(64) PRIMARY KEY, via VARCHAR(8) NOT NULL)",
		"CREATE TABLE faults_restart_read (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
		"INSERT INTO faults_restart_read (id, v) VALUES " + strings.Join(values, ", ")} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("set up tables: %w", err)
		}
	}
	return nil
}

// failoverFirstWrite returns how long after t the first write (an insert or
// a commit) was answered done.
func failoverFirstWrite(clients []*restartClient, t time.Time) (time.Duration, bool) {
	var first time.Time
	for _, c := range clients {
		if c.role == "read" {
			continue
		}
		c.mu.Lock()
		for i := len(c.ops) - 1; i >= 0; i-- {
			o := c.ops[i]
			if !o.end.After(t) {
				break
			}
			if o.code == "" && (o.op == "insert" || o.op == "commit") && (first.IsZero() || o.end.Before(first)) {
				first = o.end
			}
		}
		c.mu.Unlock()
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(t), true
}

// failoverSwitchover turns cur read-only, promotes next once it has applied
// all of cur, and makes cur its replica.
func failoverSwitchover(cur, next *failoverServer) (time.Time, error) {
	if _, err := cur.admin.Exec("SET GLOBAL read_only = 1"); err != nil {
		return time.Time{}, err
	}
	if err := failoverCaughtUp(cur.admin, next.admin); err != nil {
		return time.Time{}, err
	}
	at, err := failoverPromote(next)
	if err != nil {
		return at, err
	}
	return at, failoverReplicate(cur, next, "")
}

// failoverKill kills cur's mariadbd, promotes next once it has applied all
// it received, starts cur again as a replica of next. It returns the
// promotion's time, how many rows cur alone had (never acknowledged:
// checked), and how many commits cur had not waited for an ack for.
func failoverKill(e *env, cur, next *failoverServer, clients []*restartClient) (time.Time, int, int, error) {
	noTx, on, err := failoverSemiStatus(cur)
	if err != nil {
		return time.Time{}, 0, 0, err
	}
	semiOff := noTx - cur.noTx
	if !on {
		semiOff++
	}
	var pidFile string
	if err := cur.admin.QueryRow("SELECT @@global.pid_file").Scan(&pidFile); err != nil {
		return time.Time{}, 0, 0, err
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return time.Time{}, 0, 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, 0, 0, fmt.Errorf("pid file %s: %w", pidFile, err)
	}
	img, err := readRestartImage(pid, "mariadbd", "mysqld")
	if err != nil {
		return time.Time{}, 0, 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return time.Time{}, 0, 0, err
	}
	for deadline := time.Now().Add(10 * time.Second); !exited(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return time.Time{}, 0, 0, fmt.Errorf("mariadbd %d still running 10 s after SIGKILL", pid)
		}
	}
	// The replica applies all it received, then is promoted.
	io, err := failoverSlaveStatus(next.admin, "Gtid_IO_Pos")
	if err != nil {
		return time.Time{}, 0, 0, err
	}
	if err := failoverWait(next.admin, io); err != nil {
		return time.Time{}, 0, 0, err
	}
	at, err := failoverPromote(next)
	if err != nil {
		return at, 0, 0, err
	}
	// cur again, read-only, as a semi-sync slave (not master), in its own
	// session; its pid in its pid file (run.sh stops it by that).
	cmd := exec.Command(img.args[0], append(img.args[1:], "--read-only=ON", "--rpl-semi-sync-slave-enabled=ON", "--rpl-semi-sync-master-enabled=OFF")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return at, 0, 0, fmt.Errorf("start mariadbd again: %w", err)
	}
	go cmd.Wait() //nolint:errcheck // reaps it if a later cycle kills it
	for deadline := time.Now().Add(60 * time.Second); cur.admin.Ping() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return at, 0, 0, errors.New("the killed primary did not answer 60 s after its restart")
		}
	}
	// What it logged that next never received was never acknowledged
	// (semi-sync AFTER_SYNC); it rejoins from where next was promoted.
	var have, from string
	if err := cur.admin.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&have); err != nil {
		return at, 0, 0, err
	}
	if err := next.admin.QueryRow("SELECT @@global.gtid_slave_pos").Scan(&from); err != nil {
		return at, 0, 0, err
	}
	stray := 0
	if !failoverCovers(from, have) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mine, err1 := restartKeys(ctx, cur.admin)
		theirs, err2 := restartKeys(ctx, next.admin)
		if err := errors.Join(err1, err2); err != nil {
			return at, 0, 0, err
		}
		for k := range mine {
			if !theirs[k] {
				stray++
				for _, c := range clients {
					c.mu.Lock()
					for _, w := range c.writes {
						if w.key == k && w.fate == restartAcked {
							c.mu.Unlock()
							return at, stray, 0, fmt.Errorf("key %s, acknowledged, is on the killed primary only", k)
						}
					}
					c.mu.Unlock()
				}
			}
		}
	}
	return at, stray, semiOff, failoverReplicate(cur, next, from)
}

// failoverPromote stops s replicating and makes it writable (semi-sync
// master off: no replica acknowledges yet).
func failoverPromote(s *failoverServer) (time.Time, error) {
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL rpl_semi_sync_master_enabled = OFF", "SET GLOBAL read_only = 0"} {
		if _, err := s.admin.Exec(q); err != nil {
			return time.Time{}, fmt.Errorf("promote %s: %s: %w", s.name, q, err)
		}
	}
	return time.Now(), nil
}

// failoverReplicate makes s, read-only, a semi-sync replica of primary,
// from its own binary log's position, or from from when it holds a stray
// tail (applied past with gtid_strict_mode off until it caught up).
func failoverReplicate(s, primary *failoverServer, from string) error {
	qs := []string{"SET GLOBAL read_only = 1", "SET GLOBAL rpl_semi_sync_master_enabled = OFF",
		"SET GLOBAL rpl_semi_sync_slave_enabled = ON", "STOP SLAVE"}
	if from != "" {
		qs = append(qs, "SET GLOBAL gtid_strict_mode = 0", "SET GLOBAL gtid_slave_pos = '"+from+"'")
	} else {
		qs = append(qs, "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos")
	}
	qs = append(qs, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = '%s', "+
		"MASTER_PASSWORD = '%s', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", primary.port,
		os.Getenv("FAULTS_REP_USER"), os.Getenv("FAULTS_REP_PASSWORD")), "START SLAVE")
	for _, q := range qs {
		if _, err := s.admin.Exec(q); err != nil {
			return fmt.Errorf("replicate %s from %s: %s: %w", s.name, primary.name, q, err)
		}
	}
	if from != "" {
		if err := failoverCaughtUp(primary.admin, s.admin); err != nil {
			return err
		}
		if _, err := s.admin.Exec("SET GLOBAL gtid_strict_mode = 1"); err != nil {
			return err
		}
	}
	return nil
}

// failoverSemiSync turns semi-sync on at primary once its replica
// acknowledges (a commit of the load switches it on).
func failoverSemiSync(primary *failoverServer) error {
	if _, err := primary.admin.Exec("SET GLOBAL rpl_semi_sync_master_enabled = ON"); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		noTx, on, err := failoverSemiStatus(primary)
		if err != nil {
			return err
		}
		if on {
			primary.noTx = noTx
			return nil
		}
		// A commit is what switches it on once the replica acknowledges.
		if _, err := primary.admin.Exec("REPLACE INTO faults_restart_read (id, v) VALUES (1, 'row-1')"); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("semi-sync not on at %s 30 s after its replica joined", primary.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failoverSemiStatus returns s's count of commits not acknowledged by a
// replica, and whether its semi-sync is on now.
func failoverSemiStatus(s *failoverServer) (int, bool, error) {
	rows, err := s.admin.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_master_status')")
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	var noTx int
	var on bool
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			return 0, false, err
		}
		switch strings.ToLower(name) {
		case "rpl_semi_sync_master_no_tx":
			noTx, _ = strconv.Atoi(v)
		case "rpl_semi_sync_master_status":
			on = v == "ON"
		}
	}
	return noTx, on, rows.Err()
}

// failoverCaughtUp waits until replica has applied primary's binary log.
func failoverCaughtUp(primary, replica *sql.DB) error {
	var pos string
	if err := primary.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&pos); err != nil {
		return err
	}
	return failoverWait(replica, pos)
}

func failoverWait(replica *sql.DB, pos string) error {
	var got int
	if err := replica.QueryRow("SELECT MASTER_GTID_WAIT(?, 30)", pos).Scan(&got); err != nil || got != 0 {
		return fmt.Errorf("the replica did not reach %s in 30 s: %d, %v", pos, got, err)
	}
	return nil
}

// failoverSlaveStatus returns one column of SHOW SLAVE STATUS.
func failoverSlaveStatus(db *sql.DB, col string) (string, error) {
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if !rows.Next() {
		return "", errors.New("SHOW SLAVE STATUS: the server replicates from nothing")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == col {
			return vals[i].String, nil
		}
	}
	return "", fmt.Errorf("SHOW SLAVE STATUS has no %s", col)
}

// failoverCovers reports whether GTID list have includes want.
func failoverCovers(have, want string) bool {
	seqs := func(s string) map[string]uint64 {
		m := map[string]uint64{}
		for _, g := range strings.Split(s, ",") {
			f := strings.Split(strings.TrimSpace(g), "-")
			if len(f) == 3 {
				m[f[0]], _ = strconv.ParseUint(f[2], 10, 64)
			}
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
