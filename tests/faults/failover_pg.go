package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Failover under load on PostgreSQL (issue 21): a tetherd backend over a
// primary and its streaming standby, synchronous (synchronous_standby_names
// '*', synchronous_commit on: a commit is acknowledged once the standby has
// flushed it); the campaign kills the primary (pg_ctl stop -m immediate)
// and promotes the standby (pg_promote()), as an orchestrator would, then
// makes the dead server a standby of the new primary afresh
// (pg_basebackup -R) and the standby synchronous again; and again, the
// primary going back and forth. The judgement is the MariaDB campaign's.
func init() {
	register(campaign{name: "failover-pg", title: "Failover under load: a PostgreSQL primary killed, its standby promoted", run: runFailoverPG})
}

const failoverPGBackend = "pg_rep"

// failoverPGServer is one server of the pair.
type failoverPGServer struct {
	name                   string
	admin                  *sql.DB
	datadir, sockdir, port string
	logPath                string
	pg                     *restartPostgres
}

func runFailoverPG(e *env, r *report) error {
	cycles := e.scale(6, 2)
	warmup := time.Duration(e.scale(3000, 1000)) * time.Millisecond
	between := time.Duration(e.scale(3000, 1000)) * time.Millisecond
	var srv [2]*failoverPGServer
	for i, name := range []string{"A", "B"} {
		get := func(k string) string { return os.Getenv("FAULTS_PGREP_" + name + "_" + k) }
		if get("ADMIN_DSN") == "" {
			return fmt.Errorf("FAULTS_PGREP_%s_ADMIN_DSN is not set (run tests/faults/run.sh)", name)
		}
		db, err := sql.Open("pgx", get("ADMIN_DSN"))
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(4)
		defer db.Close()
		s := &failoverPGServer{name: strings.ToLower(name), admin: db, datadir: get("DATADIR"), sockdir: get("SOCKDIR"),
			port: get("PORT"), logPath: get("LOG")}
		s.pg = &restartPostgres{dir: e.dir, bin: os.Getenv("FAULTS_PG_BINDIR"), datadir: s.datadir, logPath: s.logPath,
			as: os.Getenv("FAULTS_PG_AS")}
		srv[i] = s
	}
	if err := failoverPGTables(srv[0].admin); err != nil {
		return err
	}
	if err := failoverPGSync(srv[0]); err != nil {
		return err
	}
	// The standby has replayed the tables and their grant before reads go
	// to it (synchronous commit waits for its flush, not its replay).
	var lsn string
	if err := srv[0].admin.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		if err := srv[1].admin.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok); err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby did not replay %s in 30 s", lsn)
		}
	}
	e.extraConfig = fmt.Sprintf(`
[backends.%s]
type = "postgres"
dsn = %q
replicas = [%q]
max_conns = 8
min_conns = 2
acquire_timeout = "10s"
monitor_interval = "%s"
max_replica_lag = "30s"
primary_wait = "10s"
`, failoverPGBackend, os.Getenv("FAULTS_PGREP_A_DSN"), os.Getenv("FAULTS_PGREP_B_DSN"), failoverInterval)
	defer func() { e.extraConfig = "" }()
	if err := e.startTetherd(8, ""); err != nil {
		return err
	}
	var clients []*restartClient
	for i := 1; i <= restartClientsPerRole; i++ {
		for _, role := range []string{"read", "insert", "tx"} {
			clients = append(clients, &restartClient{e: e, db: failoverPGBackend, role: role, name: fmt.Sprintf("pgrep-%s-%d", role, i)})
		}
	}
	r.say("%d clients through one tetherd, backend `%s` = a PostgreSQL primary and its streaming standby, synchronous "+
		"(synchronous_standby_names '*', synchronous_commit on); monitor_interval %s, primary_wait 10s, timeout_ms %d: "+
		"point reads (to the standby), autocommit INSERTs of a unique key, short transactions. After %s of load, %d "+
		"failovers %s apart: the primary stopped at once (`pg_ctl stop -m immediate`), the standby promoted "+
		"(`pg_promote()`) and its synchronous_standby_names emptied (no standby yet: commits would wait for one), "+
		"the dead server made a standby of the new primary afresh (`pg_basebackup -R`), then the new primary's "+
		"standby made synchronous again.",
		len(clients), failoverPGBackend, failoverInterval, restartTimeout.Milliseconds(), warmup, cycles, between)

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
		promotion, firstWrite time.Duration
		served                bool
	}
	var done []cycle
	cur, next := srv[0], srv[1]
	var runErr error
	for i := 0; i < cycles; i++ {
		t0 := time.Now()
		promoted, err := failoverPGKill(cur, next)
		if err != nil {
			runErr = fmt.Errorf("failover %d: %w", i+1, err)
			break
		}
		cy := cycle{promotion: promoted.Sub(t0)}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if cy.firstWrite, cy.served = failoverFirstWrite(clients, promoted); cy.served || time.Now().After(deadline) {
				break
			}
		}
		done = append(done, cy)
		e.logf("failover-pg: %d: promoted %.0f ms after the kill, first write %.0f ms after", i+1,
			float64(cy.promotion)/1e6, float64(cy.firstWrite)/1e6)
		if err := failoverPGRejoin(cur, next); err != nil {
			runErr = fmt.Errorf("failover %d: rejoin: %w", i+1, err)
			break
		}
		cur, next = next, cur
		if err := failoverPGSync(cur); err != nil {
			runErr = fmt.Errorf("failover %d: %w", i+1, err)
			break
		}
		time.Sleep(between)
	}
	stopLoad()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	present, err := restartKeys(ctx, cur.admin)
	if err != nil {
		return errors.Join(runErr, err)
	}
	var acked, lost, notDone, notDoneFound, unknown, wrongReads, ops int
	codes := map[string]int{}
	var untyped []string
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
		}
	}
	var rows [][]string
	var firsts []time.Duration
	slow := 0
	for i, cy := range done {
		first := "none within 10 s"
		if cy.served {
			first = ms(cy.firstWrite)
			firsts = append(firsts, cy.firstWrite)
		}
		if !cy.served || cy.firstWrite > failoverBound {
			slow++
		}
		rows = append(rows, []string{strconv.Itoa(i + 1), ms(cy.promotion), first})
	}
	r.table([]string{"failover", "kill to promotion (ms)", "promotion to first write served (ms)"}, rows)
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
	r.check(wrongReads == 0, "every read returned its row: %d did not", wrongReads)
	r.check(slow == 0, "writes served again within %s of every promotion: %d failovers were not", failoverBound, slow)
	r.check(e.alive(), "tetherd is still running")
	return runErr
}

func failoverPGTables(db *sql.DB) error {
	values := make([]string, restartReadRows)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 'row-%d')", i+1, i+1)
	}
	for _, q := range []string{"DROP TABLE IF EXISTS faults_restart", "DROP TABLE IF EXISTS faults_restart_read",
		"CREATE TABLE faults_restart (k VARCHAR(64) PRIMARY KEY, via VARCHAR(8) NOT NULL)",
		"CREATE TABLE faults_restart_read (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
		"INSERT INTO faults_restart_read (id, v) VALUES " + strings.Join(values, ", "),
		"GRANT ALL ON faults_restart, faults_restart_read TO PUBLIC"} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("set up tables: %s: %w", q, err)
		}
	}
	return nil
}

// failoverPGSync makes primary's standby synchronous and waits until it is.
func failoverPGSync(primary *failoverPGServer) error {
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "ALTER SYSTEM SET synchronous_commit = 'on'",
		"SELECT pg_reload_conf()"} {
		if _, err := primary.admin.Exec(q); err != nil {
			return fmt.Errorf("%s: %s: %w", primary.name, q, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var state string
		if err := primary.admin.QueryRow("SELECT sync_state FROM pg_stat_replication").Scan(&state); err == nil && state == "sync" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's standby not synchronous after 30 s", primary.name)
		}
	}
}

// failoverPGKill stops cur at once and promotes next, emptying its
// synchronous_standby_names (it has no standby yet).
func failoverPGKill(cur, next *failoverPGServer) (time.Time, error) {
	if err := cur.pg.kill(); err != nil {
		return time.Time{}, fmt.Errorf("stop %s: %w", cur.name, err)
	}
	var ok bool
	if err := next.admin.QueryRow("SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		return time.Time{}, fmt.Errorf("promote %s: %v, %w", next.name, ok, err)
	}
	at := time.Now()
	for _, q := range []string{"ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()"} {
		if _, err := next.admin.Exec(q); err != nil {
			return at, fmt.Errorf("%s: %s: %w", next.name, q, err)
		}
	}
	return at, nil
}

// failoverPGRejoin makes the dead cur a standby of next afresh: its data
// directory copied from next (pg_basebackup -R), with its own port and
// socket, and no synchronous_standby_names of its own.
func failoverPGRejoin(cur, next *failoverPGServer) error {
	if err := os.RemoveAll(cur.datadir); err != nil {
		return err
	}
	bb := filepath.Join(cur.pg.bin, "pg_basebackup")
	args := []string{"-h", next.sockdir, "-p", next.port, "-U", "postgres", "-D", cur.datadir, "-R", "-X", "stream", "-c", "fast", "--no-sync"}
	cmd := exec.Command(bb, args...)
	if cur.pg.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", cur.pg.as, "--", bb}, args...)...)
		cmd.Dir = "/"
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, out)
	}
	conf := filepath.Join(cur.datadir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "\n# --- tests/faults failover-pg: this server's own ---\nport = %s\nunix_socket_directories = '%s'\n", cur.port, cur.sockdir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	auto := filepath.Join(cur.datadir, "postgresql.auto.conf")
	b, err := os.ReadFile(auto)
	if err != nil {
		return err
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "synchronous_standby_names") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(auto, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		return err
	}
	if err := cur.pg.start(); err != nil {
		return fmt.Errorf("start %s as a standby: %w", cur.name, err)
	}
	return nil
}
