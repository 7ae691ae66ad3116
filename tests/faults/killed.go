package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-php/tether/wire"
)

// Workers killed inside transactions: what a PHP worker killed by its
// manager (max_execution_time, a crash, a deploy) leaves behind. Each worker
// begins, inserts a row, locks a shared row, and is killed: idle in its
// transaction, or in the middle of a statement. Nothing it wrote may be
// committed, no lock may stay, and tetherd's sessions must stay within
// max_conns.
func init() {
	register(campaign{name: "killed", title: "Workers killed inside transactions", run: runKilled})
}

const killedMaxConns = 8

func runKilled(e *env, r *report) error {
	workers := e.scale(10000, 400)
	r.say("%d workers per database, 32 at a time, each on its own connection to tetherd (max_conns %d): `begin`, an "+
		"INSERT, an UPDATE that locks one of 16 shared rows, then killed (its socket closed, as the kernel closes a "+
		"killed process's): half of them idle in the transaction, half in the middle of a 2 s statement of it. Then "+
		"an independent connection counts the rows committed and takes every shared row's lock with NOWAIT. Time to "+
		"release: a worker locks a row and is killed mid-statement, one at a time; how long until an independent "+
		"connection gets the lock.", workers, killedMaxConns)
	if err := e.startTetherd(killedMaxConns, `tx_idle_timeout = "60s"`); err != nil {
		return err
	}
	var rows [][]string
	for _, db := range []string{"maria", "pg"} {
		row, err := killedOn(e, r, db, workers)
		if err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
		rows = append(rows, row)
	}
	r.table([]string{"database", "workers killed", "acknowledged inserts", "committed rows", "locks left", "tetherd sessions, most at once (allowed)", "their statements all stopped after the last kill, s", "lock released after a kill: p50 / p99 / max ms", "took s"}, rows)
	r.check(e.alive(), "tetherd is still running")
	return nil
}

func killedOn(e *env, r *report, db string, workers int) ([]string, error) {
	ctx := context.Background()
	w := e.watch(db)
	p := func(n int) string { return placeholder(db, n) }
	auto := "BIGINT AUTO_INCREMENT PRIMARY KEY"
	if db == "pg" {
		auto = "BIGSERIAL PRIMARY KEY"
	}
	for _, q := range []string{"DROP TABLE IF EXISTS faults_killed", "DROP TABLE IF EXISTS faults_lock",
		"CREATE TABLE faults_killed (id " + auto + ", worker INT, v VARCHAR(32))",
		"CREATE TABLE faults_lock (id INT PRIMARY KEY, n INT)"} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	for i := 0; i <= 16; i++ {
		if _, err := w.ExecContext(ctx, "INSERT INTO faults_lock VALUES ("+p(1)+", 0)", i); err != nil {
			return nil, err
		}
	}
	sampler := e.sampleSessions(db)
	start := time.Now()
	var acked atomic.Int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := 0; i < workers; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := killedWorker(e, db, i, i%2 == 1, &acked); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	// The release times below are one kill at a time: first every statement
	// of the killed workers must have stopped (MariaDB can take 2 s over one
	// KILL QUERY of a SLEEP while others sleep, and tetherd sends them one
	// after the other).
	settled, err := killedSettle(ctx, e, db)
	if err != nil {
		return nil, err
	}
	// Time to release: one at a time, row 0.
	var release []time.Duration
	for i := 0; i < e.scale(50, 10); i++ {
		d, err := killedRelease(e, db)
		if err != nil {
			return nil, err
		}
		release = append(release, d)
	}
	most, err := sampler.stop()
	if err != nil {
		return nil, err
	}
	if err, _ := firstErr.Load().(error); err != nil {
		r.say("A worker's own error, before it was killed (%s): %v", db, err)
	}
	var committed int
	if err := w.QueryRowContext(ctx, "SELECT COUNT(*) FROM faults_killed").Scan(&committed); err != nil {
		return nil, err
	}
	locked := 0
	for i := 0; i <= 16; i++ {
		if err := tryLock(ctx, w, db, i); err != nil {
			locked++
		}
	}
	p50, p99, mx := durations(release)
	settledText := "-"
	if db == "maria" {
		settledText = fmt.Sprintf("%.2f", settled.Seconds())
	}
	r.check(committed == 0, "%s: no row of a killed worker committed (%d)", db, committed)
	r.check(locked == 0, "%s: no lock left behind (%d rows still locked)", db, locked)
	limit := sessionLimit(db, killedMaxConns)
	r.check(most <= limit, "%s: tetherd's sessions within max_conns (%d allowed, at most %d at once)", db, limit, most)
	r.check(mx < time.Second, "%s: a killed worker's lock released within 1 s (the slowest: %s ms)", db, ms(mx))
	return []string{db, fmt.Sprint(workers), fmt.Sprint(acked.Load()), fmt.Sprint(committed), fmt.Sprint(locked),
		fmt.Sprintf("%d (%d)", most, limit), settledText, ms(p50) + " / " + ms(p99) + " / " + ms(mx), fmt.Sprintf("%.1f", took.Seconds())}, nil
}

// killedSettle waits until no session of tetherd's on MariaDB is in a SLEEP
// (the killed workers' statements all stopped) and returns how long that
// took. PostgreSQL cancels at once; its watcher, another user, could not see
// the sessions' states.
func killedSettle(ctx context.Context, e *env, db string) (time.Duration, error) {
	if db != "maria" {
		return 0, nil
	}
	start := time.Now()
	for {
		var n int
		err := e.mysqlCount.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID() AND STATE = 'User sleep'").Scan(&n)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > 60*time.Second {
			return 0, fmt.Errorf("%d statements of killed workers still running 60 s after the last kill", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killedWorker is one worker: begin, insert, lock, killed idle or mid-statement.
func killedWorker(e *env, db string, i int, midStatement bool, acked *atomic.Int64) error {
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.close()
	rep, err := c.do(wire.Request{Op: wire.OpBegin, Backend: db}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := toUint(rep.Fields["tx"])
	p := func(n int) string { return placeholder(db, n) }
	if _, err := c.do(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "INSERT INTO faults_killed (worker, v) VALUES (" + p(1) + ", 'killed')", Params: []any{int64(i)}}, 10*time.Second); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	acked.Add(1)
	if _, err := c.do(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "UPDATE faults_lock SET n = n + 1 WHERE id = " + p(1), Params: []any{int64(1 + i%16)}}, 10*time.Second); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if midStatement {
		c.send(wire.Request{Op: wire.OpQuery, Tx: tx, SQL: sleepSQL(db, 2)})
		time.Sleep(20 * time.Millisecond)
	}
	return nil // the deferred close is the kill
}

// killedRelease locks row 0 through tetherd, is killed mid-statement, and
// returns how long until an independent connection gets the lock.
func killedRelease(e *env, db string) (time.Duration, error) {
	c, err := e.dial()
	if err != nil {
		return 0, err
	}
	rep, err := c.do(wire.Request{Op: wire.OpBegin, Backend: db}, 10*time.Second)
	if err != nil {
		c.close()
		return 0, err
	}
	tx := toUint(rep.Fields["tx"])
	if _, err := c.do(wire.Request{Op: wire.OpExec, Tx: tx, SQL: "UPDATE faults_lock SET n = n + 1 WHERE id = 0"}, 10*time.Second); err != nil {
		c.close()
		return 0, err
	}
	c.send(wire.Request{Op: wire.OpQuery, Tx: tx, SQL: sleepSQL(db, 5)})
	time.Sleep(20 * time.Millisecond)
	c.close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := tryLock(ctx, e.watch(db), db, 0); err == nil {
			return time.Since(start), nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("row 0 still locked 10 s after its worker was killed")
		}
		time.Sleep(time.Millisecond)
	}
}

// tryLock takes row id's lock with NOWAIT on an independent connection, in
// a transaction it rolls back.
func tryLock(ctx context.Context, w *sql.DB, db string, id int) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "SELECT n FROM faults_lock WHERE id = "+placeholder(db, 1)+" FOR UPDATE NOWAIT", id)
	return err
}

func toUint(v any) uint64 {
	switch x := v.(type) {
	case uint64:
		return x
	case int64:
		return uint64(x)
	}
	return 0
}
