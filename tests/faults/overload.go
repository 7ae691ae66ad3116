package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-php/tether/wire"
)

// Overload at ten times the pool: 40 clients on a pool of 4, each running a
// statement that takes 20 ms on the server back to back, so that the pool
// could serve 200 a second and the clients ask for far more. Three phases per
// database:
//
//  1. No deadlines: the requests rely on acquire_timeout (100 ms here), so
//     the overflow gets busy and retries at once.
//  2. Deadlines: timeout_ms on every request (acquire_timeout 10 s, never
//     reached), so the overflow gets timeout: 100 ms, under the queue's
//     wait, and 1 s, over it.
//  3. Fairness: one greedy client keeps 64 requests in flight (the default
//     max_client_requests) while four polite ones send one at a time.
//
// Each statement is accounted for on the server: it takes a number from a
// sequence as it starts (sequences are not transactional: a cancelled
// statement keeps its number) and inserts its request's id as it ends, so
// the campaign knows which statements started, which completed, and for
// which requests, and compares that with what each client was told.
//
// On MariaDB the 20 ms are a wait for a user lock that a watcher holds
// (GET_LOCK with a timeout), not SLEEP(): a KILL QUERY of a thread in
// SLEEP() retries for up to 2 s to take the mutex that every SLEEP() shares
// (THD::abort_current_cond_wait), and meanwhile no SLEEP() on the server
// returns, which would measure MariaDB rather than tetherd.
func init() {
	register(campaign{name: "overload", title: "Overload: ten times the pool, with and without deadlines", run: runOverload})
}

const (
	overloadMaxConns = 4
	overloadClients  = 40                     // ten times the pool
	overloadStmt     = 20 * time.Millisecond  // what one statement takes on the server
	overloadAcquire  = 100 * time.Millisecond // acquire_timeout of phase 1
	overloadDeadline = 100 * time.Millisecond // timeout_ms of phase 2, under the queue's wait
	overloadLong     = time.Second            // and over it
	// overloadSlack is how late past its deadline (or acquire_timeout) an
	// answer may come, beyond the worst stall of the machine itself in the
	// same phase (this process's own oversleep): the machine is a shared
	// 2-vCPU VM.
	overloadSlack = 500 * time.Millisecond
	// overloadCalm is the most a 5 ms sleep of this process may oversleep
	// in a second that counts for goodput: a second in which the machine
	// stalled this process longer says nothing about tetherd.
	overloadCalm = 50 * time.Millisecond
	// overloadGoodput is the least share of the pool's capacity that must
	// be statements answered ok, however overloaded.
	overloadGoodput = 0.70
	// overloadWasted is the largest share of the statements started on the
	// server that may be for requests whose clients were told they failed.
	overloadWasted = 0.20
	overloadGreedy = 64 // the greedy client's requests in flight: max_client_requests' default
	overloadPolite = 4
)

// overloadCapacity is what the pool can serve a second: max_conns
// statements of overloadStmt at a time.
var overloadCapacity = float64(overloadMaxConns) / overloadStmt.Seconds()

func runOverload(e *env, r *report) error {
	d := time.Duration(e.scale(15, 3)) * time.Second
	r.say("Pool max_conns %d on MariaDB and PostgreSQL, %d clients (ten times the pool), each on its own connection to "+
		"tetherd, running back to back for %s a statement that takes %s on the server: capacity %.0f statements/s. "+
		"Each statement takes a number from a sequence as it starts (kept even when it is cancelled) and inserts its "+
		"request's id as it ends, so every statement the server started or completed is matched with what its client "+
		"was told (the wait is `pg_sleep` on PostgreSQL, and on MariaDB `GET_LOCK` on a lock a watcher holds, with a "+
		"timeout: a KILL QUERY of a `SLEEP()` can stall every `SLEEP()` on the server for 2 s). *Without deadlines* the "+
		"requests carry no `timeout_ms` and the pools' acquire_timeout is %s: the overflow gets `busy` and retries at "+
		"once. *With deadlines* every request carries `timeout_ms`, %d (under the ~%d ms a request would wait in the "+
		"queue) or %d (over it), and acquire_timeout is 10 s. *Fairness*: one greedy client keeps %d requests in flight on one connection "+
		"(max_client_requests' default) while %d polite clients send one %s statement at a time. tetherd's sessions on "+
		"each server are counted every 5 ms throughout.",
		overloadMaxConns, overloadClients, d, overloadStmt, overloadCapacity, overloadAcquire, overloadDeadline.Milliseconds(),
		(time.Duration(overloadClients/overloadMaxConns-1) * overloadStmt).Milliseconds(), overloadLong.Milliseconds(),
		overloadGreedy, overloadPolite, overloadStmt)
	for _, db := range []string{"maria", "pg"} {
		if err := overloadPrepare(e, db); err != nil {
			return fmt.Errorf("%s: prepare: %w", db, err)
		}
	}
	release, err := overloadHoldLock(e)
	if err != nil {
		return err
	}
	defer release()

	// 1. Without deadlines: acquire_timeout decides.
	if err := ovStartTetherd(e, overloadMaxConns, overloadAcquire); err != nil {
		return err
	}
	var rows [][]string
	for i, db := range []string{"maria", "pg"} {
		a, err := overloadPhase(e, db, d, 0, int64(1+i)*1e9)
		if err != nil {
			return fmt.Errorf("%s, without deadlines: %w", db, err)
		}
		rows = append(rows, a.judgeBusy(r))
	}
	r.say("**Without deadlines** (acquire_timeout %s):", overloadAcquire)
	r.table([]string{"database", "ok/s (share of capacity)", "ok in each second", "answers: ok / busy / other", "ok answered after: p50 / p99 / max ms",
		"busy answered after: min / p50 / p99 / max ms", "started on the server: for ok / for failed requests", "tetherd sessions, most at once (allowed)", ovStallsHeader}, rows)
	r.check(e.alive(), "tetherd is still running after the phase without deadlines")

	// 2. With deadlines: the env's pools, whose acquire_timeout (10 s) is
	// never reached.
	if err := e.startTetherd(overloadMaxConns, ""); err != nil {
		return err
	}
	rows = nil
	base := int64(3e9)
	for _, db := range []string{"maria", "pg"} {
		for _, deadline := range []time.Duration{overloadDeadline, overloadLong} {
			a, err := overloadPhase(e, db, d, deadline, base)
			if err != nil {
				return fmt.Errorf("%s, with deadlines: %w", db, err)
			}
			base += 1e9
			rows = append(rows, a.judgeDeadline(r))
		}
	}
	r.say("**With deadlines** (`timeout_ms` on every request). A timeout *before sent* is tetherd's `retry: true` one (the " +
		"request expired waiting for a connection, or had less time left than its statement takes here when a connection " +
		"came free, and was answered then; the statement did not run), *after sent* the one whose statement was " +
		"cancelled on the server. An ok answered after *t* ms waited *t* - 20 ms for its connection.")
	r.table([]string{"database", "timeout_ms", "ok/s (share of capacity)", "ok in each second", "answers: ok / timeout before sent / timeout after sent / other",
		"ok answered after: p50 / p99 / max ms", "timeouts answered after: min / p50 / p99 / max ms", "latest answer past its deadline ms",
		"started on the server: for ok / for failed requests (share)", "completed for failed requests", "tetherd sessions, most at once (allowed)", ovStallsHeader}, rows)

	// 3. Fairness, on the same tetherd.
	rows = nil
	for _, db := range []string{"maria", "pg"} {
		row, err := overloadFairness(e, r, db, d)
		if err != nil {
			return fmt.Errorf("%s, fairness: %w", db, err)
		}
		rows = append(rows, row)
	}
	fifo := time.Duration(overloadGreedy/overloadMaxConns) * overloadStmt
	r.say("**Fairness**: a polite client queued first come, first served behind the greedy client's %d would wait about "+
		"%s ms per statement; its fair share, served in turn, is about one statement's time.", overloadGreedy, ms(fifo))
	r.table([]string{"database", "a statement alone: p50 ms", "greedy: ok/s, answered after p50 / p99 ms",
		"polite (each): ok/s, answered after p50 / p99 / max ms", "other answers", "tetherd sessions, most at once (allowed)"}, rows)
	r.check(e.alive(), "tetherd is still running")
	return nil
}

// overloadSQL returns the statement each request runs on db, with the
// request's id as its one parameter: it takes a number from the sequence
// faults_overload_started, waits overloadStmt, then inserts the id. A
// statement cancelled in its wait keeps its number and inserts nothing.
func overloadSQL(db string) string {
	if db == "maria" {
		return "INSERT INTO faults_overload (req) SELECT ? FROM DUAL WHERE NEXTVAL(faults_overload_started) > 0 AND " + overloadWait + " = 0"
	}
	// The lateral subquery runs after, and only with, the number taken.
	return fmt.Sprintf("INSERT INTO faults_overload (req) SELECT $1::bigint FROM (SELECT nextval('faults_overload_started') AS n) a, "+
		"LATERAL (SELECT pg_sleep(%g) WHERE a.n > 0) b", overloadStmt.Seconds())
}

// overloadWait is MariaDB's wait of overloadStmt: for the lock that
// overloadHoldLock holds, so it times out and returns 0.
var overloadWait = fmt.Sprintf("GET_LOCK('faults_overload_hold', %g)", overloadStmt.Seconds())

// overloadHoldLock takes the lock overloadWait waits for, on a watcher's
// connection, and returns the function that lets it go.
func overloadHoldLock(e *env) (release func(), err error) {
	ctx := context.Background()
	conn, err := e.mysqlWatch.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('faults_overload_hold', 0)").Scan(&got); err != nil || got != 1 {
		conn.Close()
		return nil, fmt.Errorf("take the lock the statements wait for: got %d, %v", got, err)
	}
	return func() {
		conn.ExecContext(ctx, "DO RELEASE_LOCK('faults_overload_hold')")
		conn.Close()
	}, nil
}

// overloadPrepare creates the table of completed statements and the
// sequence of started ones.
func overloadPrepare(e *env, db string) error {
	ctx := context.Background()
	qs := []string{"DROP TABLE IF EXISTS faults_overload", "DROP SEQUENCE IF EXISTS faults_overload_started",
		"CREATE TABLE faults_overload (req BIGINT PRIMARY KEY)"}
	if db == "maria" {
		qs = append(qs, "CREATE SEQUENCE faults_overload_started NOCACHE")
	} else {
		qs = append(qs, "CREATE SEQUENCE faults_overload_started")
	}
	for _, q := range qs {
		if _, err := e.watch(db).ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// overloadStarted returns the sequence's next number (the watcher's own
// take counts one).
func overloadStarted(e *env, db string) (int64, error) {
	q := "SELECT nextval('faults_overload_started')"
	if db == "maria" {
		q = "SELECT NEXTVAL(faults_overload_started)"
	}
	var n int64
	err := e.watch(db).QueryRowContext(context.Background(), q).Scan(&n)
	return n, err
}

// ovShot is one request and what its client was told.
type ovShot struct {
	req   int64
	took  time.Duration // from send to answer, as the client saw it
	at    time.Time     // when answered
	code  string        // error code, "" for ok; "lost: ..." when the connection failed
	retry bool
}

// ovPhase is one database's run of one phase, and what the server did.
type ovPhase struct {
	db      string
	d       time.Duration
	start   time.Time
	timeout time.Duration // timeout_ms of every request, 0 for none
	shots   []ovShot
	started int64          // statements started on the server
	done    map[int64]bool // requests whose statement completed
	most    int            // tetherd's sessions, most at once
	stalls  ovStalls
}

const ovStallsHeader = "stalls: slowest tetherd ping / worst oversleep of this process, ms"

// ovStalls measures, while a phase runs, how long tetherd takes to answer a
// ping (answered by the daemon itself, no pool involved) and how late this
// process's own 5 ms sleeps wake up: when both are late, the machine was
// busy, not the pool.
type ovStalls struct {
	ping, oversleep time.Duration   // the worst of each
	perSecond       []time.Duration // the worst oversleep in each second of the phase
	start           time.Time
	stop, done      chan struct{}
}

// ovWatchStalls starts measuring the stalls of a phase that starts at start
// and lasts d, on a connection of its own; end stops it.
func ovWatchStalls(e *env, start time.Time, d time.Duration) (*ovStalls, error) {
	c, err := e.dial()
	if err != nil {
		return nil, err
	}
	s := &ovStalls{start: start, perSecond: make([]time.Duration, int(d/time.Second)), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer c.close()
		for {
			t0 := time.Now()
			if _, err := ovCall(c, wire.Request{Op: wire.OpPing}); err == nil {
				s.ping = max(s.ping, time.Since(t0))
			}
			t1 := time.Now()
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			over := time.Since(t1) - 5*time.Millisecond
			s.oversleep = max(s.oversleep, over)
			// A stall counts in every second it spans.
			for i := int(t1.Sub(s.start) / time.Second); i <= int(time.Since(s.start)/time.Second) && i < len(s.perSecond); i++ {
				if i >= 0 {
					s.perSecond[i] = max(s.perSecond[i], over)
				}
			}
		}
	}()
	return s, nil
}

func (s *ovStalls) end() { close(s.stop); <-s.done }

func (s ovStalls) String() string { return ms(s.ping) + " / " + ms(s.oversleep) }

// overloadPhase runs overloadClients closed-loop clients on db for d, each
// request with timeout_ms timeout (0: none), numbering requests from base,
// and returns what clients were told and what the server did.
func overloadPhase(e *env, db string, d, timeout time.Duration, base int64) (*ovPhase, error) {
	s0, err := overloadStarted(e, db)
	if err != nil {
		return nil, err
	}
	sampler := e.sampleSessions(db)
	p := &ovPhase{db: db, d: d, timeout: timeout, start: time.Now()}
	stalls, err := ovWatchStalls(e, p.start, d)
	if err != nil {
		sampler.stop()
		return nil, err
	}
	end := p.start.Add(d)
	var next atomic.Int64
	next.Store(base)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var lost atomic.Value
	for i := 0; i < overloadClients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := e.dial()
			if err != nil {
				lost.CompareAndSwap(nil, err)
				return
			}
			defer c.close()
			var mine []ovShot
			for time.Now().Before(end) {
				s := ovShot{req: next.Add(1)}
				req := wire.Request{Op: wire.OpExec, Backend: db, SQL: overloadSQL(db), Params: []any{s.req}, TimeoutMS: uint32(timeout.Milliseconds())}
				t0 := time.Now()
				rep, err := ovCall(c, req)
				s.at = time.Now()
				s.took = s.at.Sub(t0)
				if err != nil {
					s.code = "lost: " + err.Error()
					mine = append(mine, s)
					break
				}
				s.code, s.retry = errCode(rep), ovRetry(rep)
				mine = append(mine, s)
			}
			mu.Lock()
			p.shots = append(p.shots, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	stalls.end()
	p.stalls = *stalls
	// Cancels take milliseconds; give the last ones time to land before
	// the server's side is counted.
	time.Sleep(time.Second)
	if p.most, err = sampler.stop(); err != nil {
		return nil, err
	}
	if err, _ := lost.Load().(error); err != nil {
		return nil, fmt.Errorf("dial tetherd: %w", err)
	}
	s1, err := overloadStarted(e, db)
	if err != nil {
		return nil, err
	}
	p.started = s1 - s0 - 1
	p.done = map[int64]bool{}
	rs, err := e.watch(db).QueryContext(context.Background(), "SELECT req FROM faults_overload WHERE req > "+placeholder(db, 1)+" AND req <= "+placeholder(db, 2), base, base+1e9)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		p.done[id] = true
	}
	return p, rs.Err()
}

// ovCall sends r on c and reads its reply.
func ovCall(c *client, r wire.Request) (*wire.Reply, error) {
	id, err := c.send(r)
	if err != nil {
		return nil, err
	}
	rep, err := c.recv(60 * time.Second)
	if err != nil {
		return nil, err
	}
	if rep.ID != id {
		return nil, fmt.Errorf("reply to request %d, want %d", rep.ID, id)
	}
	return rep, nil
}

func ovRetry(rep *wire.Reply) bool {
	b, _ := rep.Error()["retry"].(bool)
	return b
}

// ovTally is a phase's answers, counted.
type ovTally struct {
	ok, busy, sentTimeout, waitTimeout int
	other                              map[string]int
	okTook, busyTook, timeoutTook      []time.Duration
	sentTimeoutTook                    []time.Duration // of the timeouts after sent (statement cancelled)
	late                               time.Duration   // the latest answer past its deadline
	okInWindow                         int             // ok answered within the phase's time
	perSecond                          []int           // ok answered in each second of it
	missing                            int             // ok answers whose statement did not complete
	ranAnyway                          int             // requests told "not sent" (busy, timeout before sent) whose statement completed
	completedFailed                    int             // failed requests whose statement completed
}

func (p *ovPhase) count() ovTally {
	t := ovTally{other: map[string]int{}, perSecond: make([]int, int(p.d/time.Second))}
	end := p.start.Add(p.d)
	for _, s := range p.shots {
		if p.timeout > 0 {
			t.late = max(t.late, s.took-p.timeout)
		}
		switch {
		case s.code == "":
			t.ok++
			t.okTook = append(t.okTook, s.took)
			if !s.at.After(end) {
				t.okInWindow++
				if i := int(s.at.Sub(p.start) / time.Second); i < len(t.perSecond) {
					t.perSecond[i]++
				}
			}
			if !p.done[s.req] {
				t.missing++
			}
			continue
		case s.code == "busy":
			t.busy++
			t.busyTook = append(t.busyTook, s.took)
		case s.code == "timeout" && s.retry:
			t.waitTimeout++
			t.timeoutTook = append(t.timeoutTook, s.took)
		case s.code == "timeout":
			t.sentTimeout++
			t.timeoutTook = append(t.timeoutTook, s.took)
			t.sentTimeoutTook = append(t.sentTimeoutTook, s.took)
		default:
			t.other[s.code]++
		}
		if p.done[s.req] {
			t.completedFailed++
			if s.code == "busy" || s.code == "timeout" && s.retry {
				t.ranAnyway++
			}
		}
	}
	return t
}

// seconds returns the ok answered in each second, space-separated.
func (t ovTally) seconds() string {
	parts := make([]string, len(t.perSecond))
	for i, n := range t.perSecond {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, " ")
}

func (t ovTally) otherString() string {
	if len(t.other) == 0 {
		return "0"
	}
	var parts []string
	for c, n := range t.other {
		parts = append(parts, fmt.Sprintf("%d %s", n, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// judgeCommon judges what every phase must keep and returns the goodput's
// share of capacity.
func (p *ovPhase) judgeCommon(r *report, t ovTally, what string) float64 {
	share := float64(t.okInWindow) / p.d.Seconds() / overloadCapacity
	// Judged over the seconds in which the machine did not stall this
	// process, if there are enough of them.
	calm, ok := 0, 0
	for i, n := range t.perSecond {
		if p.stalls.perSecond[i] <= overloadCalm {
			calm++
			ok += n
		}
	}
	judged, over := share, "every second"
	if calm*2 >= len(t.perSecond) && calm < len(t.perSecond) {
		judged = float64(ok) / float64(calm) / overloadCapacity
		over = fmt.Sprintf("the %d of %d seconds in which this process overslept at most %s ms", calm, len(t.perSecond), ms(overloadCalm))
	}
	r.check(judged >= overloadGoodput, "%s, %s: goodput at least %.0f%% of capacity (%.0f%% over %s)", p.db, what,
		overloadGoodput*100, judged*100, over)
	r.check(len(t.other) == 0, "%s, %s: every error typed, busy or timeout (others: %s)", p.db, what, t.otherString())
	r.check(t.missing == 0, "%s, %s: every statement answered ok completed on the server (%d did not)", p.db, what, t.missing)
	r.check(t.ranAnyway == 0 && p.started <= int64(t.ok+t.sentTimeout),
		"%s, %s: no statement ran for a request answered busy or timeout before it was sent (%d answered so completed; "+
			"%d started on the server, %d ok + %d timed out after sent)", p.db, what, t.ranAnyway, p.started, t.ok, t.sentTimeout)
	limit := sessionLimit(p.db, overloadMaxConns)
	r.check(p.most <= limit, "%s, %s: tetherd's sessions within max_conns (%d allowed, at most %d at once)", p.db, what, limit, p.most)
	return share
}

// judgeBusy judges phase 1 and returns its table row.
func (p *ovPhase) judgeBusy(r *report) []string {
	t := p.count()
	share := p.judgeCommon(r, t, "without deadlines")
	bmin := time.Duration(0)
	if len(t.busyTook) > 0 {
		bmin = ovMin(t.busyTook)
	}
	b50, b99, bmax := durations(t.busyTook)
	r.check(len(t.busyTook) == 0 || bmin >= overloadAcquire && bmax <= overloadAcquire+overloadSlack+p.stalls.oversleep,
		"%s, without deadlines: busy answered after acquire_timeout (%s ms) and at most %s ms past it beyond the machine's "+
			"own worst stall (%s ms): from %s to %s ms", p.db, ms(overloadAcquire), ms(overloadSlack), ms(p.stalls.oversleep), ms(bmin), ms(bmax))
	o50, o99, omax := durations(t.okTook)
	return []string{p.db, fmt.Sprintf("%.0f (%.0f%%)", float64(t.okInWindow)/p.d.Seconds(), share*100), t.seconds(),
		fmt.Sprintf("%d / %d (%.0f%%) / %s", t.ok, t.busy, 100*float64(t.busy)/float64(max(1, len(p.shots))), t.otherString()),
		ms(o50) + " / " + ms(o99) + " / " + ms(omax),
		ms(bmin) + " / " + ms(b50) + " / " + ms(b99) + " / " + ms(bmax),
		fmt.Sprintf("%d / %d", t.ok, p.started-int64(t.ok)),
		fmt.Sprintf("%d (%d)", p.most, sessionLimit(p.db, overloadMaxConns)), p.stalls.String()}
}

// judgeDeadline judges phase 2 and returns its table row.
func (p *ovPhase) judgeDeadline(r *report) []string {
	t := p.count()
	what := fmt.Sprintf("timeout_ms %d", p.timeout.Milliseconds())
	share := p.judgeCommon(r, t, what)
	r.check(t.late <= overloadSlack+p.stalls.oversleep, "%s, %s: every request answered at most %s ms past its deadline beyond "+
		"the machine's own worst stall (%s ms): the latest %s ms past it", p.db, what, ms(overloadSlack), ms(p.stalls.oversleep), ms(t.late))
	tmin := time.Duration(0)
	if len(t.timeoutTook) > 0 {
		tmin = ovMin(t.timeoutTook)
	}
	// A request that waited until less time was left than its statement
	// takes is answered timeout at once, not sent (retry: true): that one
	// may come before the deadline. One whose statement was sent and
	// cancelled must not.
	smin, earliest := time.Duration(0), "none was cancelled"
	if len(t.sentTimeoutTook) > 0 {
		smin = ovMin(t.sentTimeoutTook)
		earliest = "the earliest after " + ms(smin) + " ms"
	}
	r.check(len(t.sentTimeoutTook) == 0 || smin >= p.timeout, "%s, %s: no statement cancelled before its deadline (%s)", p.db, what, earliest)
	wasted := p.started - int64(t.ok)
	wshare := float64(wasted) / float64(max(1, p.started))
	r.check(wshare <= overloadWasted, "%s, %s: at most %.0f%% of the statements started on the server are for "+
		"requests whose clients were told they failed (%.1f%%: %d of %d)", p.db, what, overloadWasted*100, wshare*100, wasted, p.started)
	o50, o99, omax := durations(t.okTook)
	t50, t99, tmax := durations(t.timeoutTook)
	return []string{p.db, fmt.Sprint(p.timeout.Milliseconds()), fmt.Sprintf("%.0f (%.0f%%)", float64(t.okInWindow)/p.d.Seconds(), share*100), t.seconds(),
		fmt.Sprintf("%d / %d / %d / %s", t.ok, t.waitTimeout, t.sentTimeout, t.otherString()),
		ms(o50) + " / " + ms(o99) + " / " + ms(omax),
		ms(tmin) + " / " + ms(t50) + " / " + ms(t99) + " / " + ms(tmax),
		ms(t.late),
		fmt.Sprintf("%d / %d (%.1f%%)", t.ok, wasted, wshare*100),
		fmt.Sprint(t.completedFailed),
		fmt.Sprintf("%d (%d)", p.most, sessionLimit(p.db, overloadMaxConns)), p.stalls.String()}
}

func ovMin(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds[1:] {
		m = min(m, d)
	}
	return m
}

// overloadFairness runs one greedy client, overloadGreedy requests in flight,
// against overloadPolite polite ones, one request at a time each, for d on
// db, and judges the polite ones' latency.
func overloadFairness(e *env, r *report, db string, d time.Duration) ([]string, error) {
	q := wire.Request{Op: wire.OpQuery, Backend: db, SQL: sleepSQL(db, overloadStmt.Seconds())}
	if db == "maria" {
		q.SQL = "SELECT " + overloadWait
	}
	// A statement alone, for comparison.
	c, err := e.dial()
	if err != nil {
		return nil, err
	}
	var alone []time.Duration
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		rep, err := ovCall(c, q)
		if err != nil || errCode(rep) != "" {
			c.close()
			return nil, fmt.Errorf("a statement alone: %v %s", err, errCode(rep))
		}
		alone = append(alone, time.Since(t0))
	}
	c.close()

	sampler := e.sampleSessions(db)
	start := time.Now()
	end := start.Add(d)
	var mu sync.Mutex
	other := map[string]int{}
	var greedyTook, politeTook []time.Duration
	var greedyOK, politeOK int
	var wg sync.WaitGroup
	errc := make(chan error, overloadPolite+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := e.dial()
		if err != nil {
			errc <- err
			return
		}
		defer c.close()
		sent := map[uint32]time.Time{}
		for i := 0; i < overloadGreedy; i++ {
			id, err := c.send(q)
			if err != nil {
				errc <- err
				return
			}
			sent[id] = time.Now()
		}
		for len(sent) > 0 {
			rep, err := c.recv(60 * time.Second)
			if err != nil {
				errc <- fmt.Errorf("greedy client: %w", err)
				return
			}
			t0, ok := sent[rep.ID]
			if !ok {
				errc <- fmt.Errorf("greedy client: a reply to request %d, never sent or answered twice", rep.ID)
				return
			}
			delete(sent, rep.ID)
			now := time.Now()
			mu.Lock()
			if code := errCode(rep); code != "" {
				other[code]++
			} else if !now.After(end) {
				greedyOK++
				greedyTook = append(greedyTook, now.Sub(t0))
			}
			mu.Unlock()
			if now.Before(end) {
				id, err := c.send(q)
				if err != nil {
					errc <- err
					return
				}
				sent[id] = time.Now()
			}
		}
	}()
	// The polite clients start once the greedy client's window is queued.
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < overloadPolite; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := e.dial()
			if err != nil {
				errc <- err
				return
			}
			defer c.close()
			for time.Now().Before(end) {
				t0 := time.Now()
				rep, err := ovCall(c, q)
				if err != nil {
					errc <- fmt.Errorf("polite client: %w", err)
					return
				}
				took := time.Since(t0)
				mu.Lock()
				if code := errCode(rep); code != "" {
					other[code]++
				} else {
					politeOK++
					politeTook = append(politeTook, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	most, err := sampler.stop()
	if err != nil {
		return nil, err
	}
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	secs := d.Seconds()
	politeSecs := (d - 50*time.Millisecond).Seconds()
	g50, g99, _ := durations(greedyTook)
	p50, p99, pmax := durations(politeTook)
	a50, _, _ := durations(alone)
	bound := time.Duration(overloadGreedy/overloadMaxConns) * overloadStmt / 2
	r.check(p99 <= bound, "%s, fairness: the polite clients' p99 under half what first come, first served behind the greedy "+
		"client would give (%s ms; p99 %s ms, max %s ms)", db, ms(bound), ms(p99), ms(pmax))
	t := ovTally{other: other}
	r.check(len(other) == 0, "%s, fairness: no error (%s)", db, t.otherString())
	share := (float64(greedyOK)/secs + float64(politeOK)/politeSecs) / overloadCapacity
	r.check(share >= overloadGoodput, "%s, fairness: goodput at least %.0f%% of capacity (%.0f%%)", db, overloadGoodput*100, share*100)
	limit := sessionLimit(db, overloadMaxConns)
	r.check(most <= limit, "%s, fairness: tetherd's sessions within max_conns (%d allowed, at most %d at once)", db, limit, most)
	return []string{db, ms(a50),
		fmt.Sprintf("%.0f, %s / %s", float64(greedyOK)/secs, ms(g50), ms(g99)),
		fmt.Sprintf("%.0f, %s / %s / %s", float64(politeOK)/politeSecs/overloadPolite, ms(p50), ms(p99), ms(pmax)),
		t.otherString(), fmt.Sprintf("%d (%d)", most, limit)}, nil
}

// ovStartTetherd starts a tetherd as env.startTetherd does, with only
// the backends maria and pg, whose acquire_timeout is acquire: the env's
// pools wait 10 s for a connection, which no overload of 20 ms statements
// reaches.
func ovStartTetherd(e *env, maxConns int, acquire time.Duration) error {
	e.stopTetherd()
	cfg := fmt.Sprintf(`[server]
socket = %q
default_backend = "maria"
shutdown_grace = "5s"
default_timeout = "30s"

[log]
level = "info"

[backends.maria]
type = "mysql"
dsn = %q
max_conns = %d
min_conns = %d
acquire_timeout = %q

[backends.pg]
type = "postgres"
dsn = %q
max_conns = %d
min_conns = %d
acquire_timeout = %q
`, e.socket, e.mysqlDSN, maxConns, maxConns, acquire.String(), e.pgDSN, maxConns, maxConns, acquire.String())
	path := filepath.Join(e.dir, "tetherd-overload.toml")
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
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return err
	}
	e.tetherd = cmd
	for i := 0; i < 300; i++ {
		if fi, err := os.Stat(e.socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		if !e.alive() {
			return fmt.Errorf("tetherd exited at start; see %s", e.logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("tetherd's socket never appeared")
}
