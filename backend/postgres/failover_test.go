package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/sqlpool"
)

// failoverInterval is the monitor's interval here; writes must be served
// again within failoverBound of the promotion.
const (
	failoverInterval = 100 * time.Millisecond
	failoverBound    = time.Second + failoverInterval
)

// TestFailover_PrimaryKilled: writers, readers and transactions through a
// Replicated backend while the primary's postmaster is stopped at once
// (SIGQUIT, as pg_ctl stop -m immediate) and the standby promoted
// (pg_promote()): writes served again within a second of the promotion
// plus one monitor interval, every error typed (retryable, or "may have
// run" for what was in flight at the kill), and, with synchronous_commit on
// and the standby synchronous for the test, every acknowledged write on the
// new primary. The pair cannot be put back from here: the test runs only
// with TETHER_TEST_POSTGRES_PROMOTE=1 on a pair nothing uses after it
// (scripts/test.sh's last step, on a pair of its own).
func TestFailover_PrimaryKilled(t *testing.T) {
	if os.Getenv("TETHER_TEST_POSTGRES_PROMOTE") != "1" {
		t.Skip("TETHER_TEST_POSTGRES_PROMOTE=1 not set: this test kills the pair's primary and promotes its standby for good")
	}
	p := openPair(t)
	// Acknowledged means flushed on the standby too.
	mustExec(t, p.primaryAdmin, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	mustExec(t, p.primaryAdmin, "ALTER SYSTEM SET synchronous_commit = 'on'")
	mustExec(t, p.primaryAdmin, "SELECT pg_reload_conf()")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var state string
		if err := p.primaryAdmin.QueryRow("SELECT sync_state FROM pg_stat_replication").Scan(&state); err == nil && state == "sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby is not synchronous 10 s after synchronous_standby_names = '*'")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var dataDir string
	if err := p.primaryAdmin.QueryRow("SHOW data_directory").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Skipf("the primary's postmaster.pid is not readable here: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}

	bc := tether.DefaultBackendConfig("postgres", backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_PRIMARY_DSN"))
	bc.Replicas = []string{backendtest.RequireEnv(t, "TETHER_TEST_POSTGRES_REPLICA_DSN")}
	bc.MonitorInterval = tether.Duration(failoverInterval)
	bc.MaxReplicaLag = tether.Duration(30 * time.Second)
	// Longer than a standby may take to promote once its primary died
	// (seen: 5 s, its wal_retrieve_retry_interval, on a loaded machine).
	bc.PrimaryWait = tether.Duration(10 * time.Second)
	rb, err := postgres.NewReplicated(bc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rb.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer rb.Close(context.Background())
	// The table is the application user's: made through the backend.
	table := fmt.Sprintf("failover_%d", time.Now().UnixNano()%1e9)
	if _, _, err := backendtest.Query(rb, nil, sqlpool.KindExec, nil, "CREATE TABLE "+table+" (id bigint PRIMARY KEY, v bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	p.caughtUp(t)
	for h := rb.Topology().Hosts; h[0].State != "writes" || h[1].State != "reads"; h = rb.Topology().Hosts {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("hosts not primary and replica: %+v", h)
		}
		time.Sleep(10 * time.Millisecond)
	}

	l := &pgLoad{b: rb, table: table, stop: make(chan struct{}), errs: map[string]int{}}
	l.start(4, 2, 2)
	defer l.finish()
	l.waitAcks(t, 200)
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var ok bool
	if err := p.replicaAdmin.QueryRow("SELECT pg_promote(true, 30)").Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_promote: %v, %v", ok, err)
	}
	promoted := time.Now()
	t.Logf("promoted %s after the kill", promoted.Sub(killed).Round(time.Millisecond))
	l.waitAcks(t, 200)
	l.finish()

	took, served := l.firstAckAfter(promoted)
	if !served {
		t.Fatal("no write acknowledged after the promotion")
	}
	if took > failoverBound {
		t.Errorf("writes served again %s after the promotion, want within %s", took, failoverBound)
	}
	t.Logf("first write served %s after the promotion", took.Round(time.Millisecond))
	for i, err := range l.bad {
		if i == 10 {
			break
		}
		t.Errorf("a client saw an error that is neither retryable nor 'may have run': %v", err)
	}
	// What could not run waited for the new primary instead of failing,
	// when it came well within primary_wait (a slow promotion may not).
	if n := l.errs[string(tether.CodeUnavailable)+" (retry)"]; n > 0 && promoted.Sub(killed) < time.Duration(bc.PrimaryWait)-time.Second {
		t.Errorf("%d requests answered unavailable (retry) although a primary came %s after the kill, within primary_wait %s",
			n, promoted.Sub(killed).Round(time.Millisecond), time.Duration(bc.PrimaryWait))
	}
	have := map[int64]bool{}
	rows, err := p.replicaAdmin.Query("SELECT id FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	rows.Close()
	lost := 0
	for _, id := range l.acked {
		if !have[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes are not on the promoted standby", lost, len(l.acked))
	}
	if rb.PrimaryIndex() != 1 {
		t.Errorf("writes are not on the promoted standby: %+v", rb.Topology().Hosts)
	}
	t.Logf("%d writes acknowledged (%d rows on the new primary), %d reads, errors by class: %v", len(l.acked), len(have), l.reads, l.errs)
}

// pgLoad is the load a failover runs under, and what it saw (as the
// MariaDB failover tests' load).
type pgLoad struct {
	b     *postgres.Replicated
	table string
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	acked   []int64
	ackedAt []time.Time
	errs    map[string]int
	bad     []error
	reads   int
}

func (l *pgLoad) start(writers, readers, txs int) {
	for w := 0; w < writers+txs; w++ {
		l.wg.Add(1)
		go l.writer(w, w >= writers)
	}
	for i := 0; i < readers; i++ {
		l.wg.Add(1)
		go l.reader()
	}
}

func (l *pgLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *pgLoad) finish() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *pgLoad) writer(w int, tx bool) {
	defer l.wg.Done()
	cl := &sqlpool.Client{}
	ins := "INSERT INTO " + l.table + " (id, v) VALUES ($1, $2)"
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
			_, _, err = backendtest.Query(l.b, cl, sqlpool.KindQuery, t, "SELECT v FROM "+l.table+" WHERE id = $1", id)
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

func (l *pgLoad) reader() {
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

func (l *pgLoad) outcome(id int64, err error) {
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

// classify counts err by class; bad are those a client cannot act on.
func (l *pgLoad) classify(err error) {
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
	case !te.Retry && te.Code == tether.CodeUnavailable:
	default:
		l.bad = append(l.bad, fmt.Errorf("%s: %w", class, err))
	}
}

func (l *pgLoad) firstAckAfter(t time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.ackedAt {
		if at.After(t) {
			return at.Sub(t), true
		}
	}
	return 0, false
}

func (l *pgLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := len(l.acked) + n
	l.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		got, errs := len(l.acked), fmt.Sprint(l.errs)
		l.mu.Unlock()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d writes acknowledged in 10 s; errors: %s; hosts: %+v", n, errs, l.b.Topology())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
