package backendtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
)

// Replicated is a backend over a primary and its replicas as the router
// builds it (mysql.Replicated, postgres.Replicated).
type Replicated interface {
	tether.Backend
	Do(ctx context.Context, r *sqlpool.Request) error
	Topology() tether.TopologyStats
	CausalToken(ctx context.Context, cl *sqlpool.Client) (string, error)
	CausalAfter(cl *sqlpool.Client, pos string) error
}

// ReplicaSuite checks read/write routing over a real primary and replica
// (scripts/lib/replicas.sh's pairs): where statements run is asked of the
// servers themselves (Who), never taken from tetherd.
type ReplicaSuite struct {
	// Open returns the backend over the pair, opened, with the config
	// tweak changes (tests set a fast monitor); it is closed at cleanup.
	Open func(t *testing.T, tweak func(*tether.BackendConfig)) Replicated
	// Primary and Replica are admin connections to each server.
	Primary, Replica *sql.DB
	// Marker makes, through b, what Who reads: a table whose one row
	// differs between the servers (written on each without replicating it,
	// or unlogged: one a hot standby refuses to read).
	Marker func(t *testing.T, b Replicated)
	// Who runs, through b, for client cl in transaction tx (nil: none), a
	// replica-safe read of the marker (with FOR UPDATE when forUpdate)
	// and returns which server ran it: "primary" or "replica".
	Who func(t *testing.T, b Replicated, cl *sqlpool.Client, tx *sqlpool.Tx, forUpdate bool) string
	// P is the placeholder of the n-th parameter.
	P func(n int) string
	// SetSession changes a pooled session setting (what frameworks send
	// at connect).
	SetSession string
	// DelayApply makes the replica apply what it receives d late (0: at
	// once again).
	DelayApply func(t *testing.T, d time.Duration)
	// PauseApply stops the replica applying; ResumeApply starts it again.
	PauseApply, ResumeApply func(t *testing.T)
	// WaitCaughtUp waits until the replica has applied all of the primary.
	WaitCaughtUp func(t *testing.T)
}

// Run runs every check as a subtest.
func (s *ReplicaSuite) Run(t *testing.T) {
	t.Run("ReadsOnReplicaWritesOnPrimary", s.readsAndWrites)
	t.Run("ReadYourWrites", s.readYourWrites)
	t.Run("PausedReplicaGetsNoReads", s.pausedReplica)
	t.Run("TokenAcrossClients", s.tokenAcrossClients)
	t.Run("RefuseReadsWithoutReplica", s.refuseWithoutReplica)
}

// refuseWithoutReplica: with reads_without_replica = "refuse", a read that
// may run on a replica is answered unavailable (retry) while none
// qualifies, and runs on the replica again once it does; a client's read
// held for read-your-writes still runs on the primary.
func (s *ReplicaSuite) refuseWithoutReplica(t *testing.T) {
	b := s.Open(t, func(bc *tether.BackendConfig) {
		bc.MonitorInterval = tether.Duration(50 * time.Millisecond)
		bc.MaxReplicaLag = tether.Duration(30 * time.Second)
		bc.ReadsWithoutReplica = "refuse"
	})
	s.Marker(t, b)
	tbl := s.table(t, b, "refuse")
	s.awaitReplicaReads(t, b)
	s.PauseApply(t)
	resumed := false
	defer func() {
		if !resumed {
			s.ResumeApply(t)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.Topology().Hosts[1].State == "reads" {
		if time.Now().After(deadline) {
			t.Fatalf("the paused replica still takes reads: %+v", b.Topology())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _, err := Query(b, nil, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl)
	var te *tether.Error
	if !errors.As(err, &te) || te.Code != tether.CodeUnavailable || !te.Retry {
		t.Fatalf("a read with no replica to take it: %v, want unavailable (retry)", err)
	}
	writer := &sqlpool.Client{}
	query(t, b, writer, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" (id, v) VALUES ("+s.P(1)+", "+s.P(2)+")", int64(1), int64(1))
	if got, _ := query(t, b, writer, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl); got != "1" {
		t.Errorf("the writer's read after its write: %s rows", got)
	}
	s.ResumeApply(t)
	resumed = true
	s.awaitReplicaReads(t, b)
}

// CausalPairs is how many write-then-read pairs TokenAcrossClients runs
// (TETHER_TEST_CAUSAL_PAIRS; make test's quick form, the fault suite's
// full one).
func causalPairs() int {
	if n, err := strconv.Atoi(os.Getenv("TETHER_TEST_CAUSAL_PAIRS")); err == nil && n > 0 {
		return n
	}
	return 500
}

const (
	primary = "primary"
	replica = "replica"
)

// open opens the backend with a fast monitor and makes the marker.
func (s *ReplicaSuite) open(t *testing.T) Replicated {
	b := s.Open(t, func(bc *tether.BackendConfig) {
		bc.MonitorInterval = tether.Duration(50 * time.Millisecond)
		bc.MaxReplicaLag = tether.Duration(30 * time.Second)
	})
	s.Marker(t, b)
	return b
}

// Query runs sql through b for client cl (nil: no client) in transaction tx
// (nil: none) and returns its first value as text, or the error.
func Query(b Replicated, cl *sqlpool.Client, kind sqlpool.Kind, tx *sqlpool.Tx, sql string, params ...any) (string, *sqlpool.Request, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rb := tether.NewResultBuilder(1 << 20)
	r := &sqlpool.Request{Kind: kind, SQL: sql, Params: params, Client: cl, Tx: tx}
	if kind == sqlpool.KindQuery {
		r.Sink = rb
	}
	if err := b.Do(ctx, r); err != nil {
		return "", r, err
	}
	res := rb.Result()
	if kind != sqlpool.KindQuery || len(res.Rows) == 0 || len(res.Rows[0]) == 0 {
		return "", r, nil
	}
	if v, ok := res.Rows[0][0].([]byte); ok {
		return string(v), r, nil
	}
	return fmt.Sprint(res.Rows[0][0]), r, nil
}

// query runs sql through the router for client cl (nil: no client) and
// returns its first value as text.
func query(t *testing.T, b Replicated, cl *sqlpool.Client, kind sqlpool.Kind, tx *sqlpool.Tx, sql string, params ...any) (string, *sqlpool.Request) {
	t.Helper()
	v, r, err := Query(b, cl, kind, tx, sql, params...)
	if err != nil {
		t.Fatalf("%s %q: %v", kind, sql, err)
	}
	return v, r
}

// awaitReplicaReads waits until the router sends reads to the replica (the
// monitor's first answers).
func (s *ReplicaSuite) awaitReplicaReads(t *testing.T, b Replicated) {
	t.Helper()
	// Only a probe that started after now tells the replica's state now (one
	// that ran while the test stopped and started its replication may
	// arrive later).
	since := time.Now()
	deadline := since.Add(10 * time.Second)
	for {
		h := b.Topology().Hosts[1]
		if h.State == "reads" && h.CheckedAt.After(since) && s.Who(t, b, nil, nil, false) == replica {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads still not on the replica after 10 s; hosts: %+v", b.Topology())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// table creates a table through b (as the application's user, on the
// primary) and waits until the replica has it.
func (s *ReplicaSuite) table(t *testing.T, b Replicated, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)
	query(t, b, nil, sqlpool.KindExec, nil, "CREATE TABLE "+name+" (id INT PRIMARY KEY, v INT NOT NULL)")
	t.Cleanup(func() { s.Primary.ExecContext(context.Background(), "DROP TABLE "+name) })
	s.WaitCaughtUp(t)
	return name
}

func (s *ReplicaSuite) readsAndWrites(t *testing.T) {
	b := s.open(t)
	tbl := s.table(t, b, "route")
	s.awaitReplicaReads(t, b)

	for i := 0; i < 20; i++ {
		if got := s.Who(t, b, nil, nil, false); got != replica {
			t.Fatalf("read %d outside a transaction ran on the %s, want the replica", i, got)
		}
	}
	// A write runs on the primary: the replica would refuse it (read-only).
	query(t, b, &sqlpool.Client{}, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" (id, v) VALUES ("+s.P(1)+", "+s.P(2)+")", int64(1), int64(10))
	var v int
	if err := s.Primary.QueryRow("SELECT v FROM " + tbl + " WHERE id = 1").Scan(&v); err != nil || v != 10 {
		t.Fatalf("the write is not on the primary: v = %d, %v", v, err)
	}
	// A session setting (every framework's connect) does not hold the
	// client's reads on the primary.
	setter := &sqlpool.Client{}
	query(t, b, setter, sqlpool.KindExec, nil, s.SetSession)
	if got := s.Who(t, b, setter, nil, false); got != replica {
		t.Errorf("a read after the client's %q ran on the %s, want the replica", s.SetSession, got)
	}
	// A read that asks for the primary runs there.
	before := b.Topology().Hosts[0].Writes
	rq := &sqlpool.Request{Kind: sqlpool.KindQuery, SQL: "SELECT COUNT(*) FROM " + tbl, Primary: true, Sink: tether.NewResultBuilder(1 << 10)}
	if err := b.Do(context.Background(), rq); err != nil {
		t.Fatal(err)
	}
	if got := b.Topology().Hosts[0].Writes - before; got != 1 {
		t.Errorf("a read asking for the primary: %d requests routed to the primary, want 1", got)
	}
	// A locking read runs on the primary.
	if got := s.Who(t, b, nil, nil, true); got != primary {
		t.Errorf("SELECT ... FOR UPDATE ran on the %s, want the primary", got)
	}
	// A transaction runs on the primary, its reads included.
	cl := &sqlpool.Client{}
	_, begin := query(t, b, cl, sqlpool.KindBegin, nil, "")
	tx := begin.NewTx
	if tx == nil {
		t.Fatal("begin returned no transaction")
	}
	if got := s.Who(t, b, cl, tx, false); got != primary {
		t.Errorf("a read in a transaction ran on the %s, want the primary", got)
	}
	query(t, b, cl, sqlpool.KindCommit, tx, "")

	hosts := b.Topology().Hosts
	if len(hosts) != 2 || hosts[0].State != "writes" || hosts[1].State != "reads" || hosts[1].Reads < 20 || hosts[0].Writes < 3 ||
		hosts[0].Role != "primary" || hosts[1].Role != "replica" {
		t.Errorf("hosts: %+v", hosts)
	}
}

func (s *ReplicaSuite) readYourWrites(t *testing.T) {
	b := s.open(t)
	tbl := s.table(t, b, "ryw")
	s.awaitReplicaReads(t, b)
	s.DelayApply(t, 2*time.Second)
	defer s.DelayApply(t, 0)
	s.awaitReplicaReads(t, b) // changing the delay may stop replication for a moment

	writer, bystander := &sqlpool.Client{}, &sqlpool.Client{}
	n := causalPairs()
	stale, staleWriter := 0, 0
	for i := 1; i <= n; i++ {
		query(t, b, writer, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" (id, v) VALUES ("+s.P(1)+", "+s.P(2)+")", int64(i), int64(i))
		if got, _ := query(t, b, writer, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl); got != fmt.Sprint(i) {
			staleWriter++
		}
		// Another client's reads keep going to the replica, which lags.
		if i%10 == 0 {
			if got, _ := query(t, b, bystander, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl); got != fmt.Sprint(i) {
				stale++
			}
		}
	}
	if staleWriter != 0 {
		t.Errorf("%d of %d reads right after the reader's own write did not see it", staleWriter, n)
	}
	if stale == 0 {
		t.Errorf("the bystander never read the lagging replica: the test proves nothing")
	}
	// Once the replica has applied the writes, the writer's reads spread
	// again.
	s.DelayApply(t, 0)
	s.WaitCaughtUp(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.Who(t, b, writer, nil, false) == replica {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer's reads stayed on the primary 10 s after the replica caught up; hosts: %+v", b.Topology())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d write-then-read pairs on one client: %d stale; the bystander read the lagging replica %d times of %d", n, staleWriter, stale, n/10)
}

func (s *ReplicaSuite) pausedReplica(t *testing.T) {
	b := s.open(t)
	s.awaitReplicaReads(t, b)
	s.PauseApply(t)
	resumed := false
	defer func() {
		if !resumed {
			s.ResumeApply(t)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.Who(t, b, nil, nil, false) == primary {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads still on the paused replica after 10 s; hosts: %+v", b.Topology())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		if got := s.Who(t, b, nil, nil, false); got != primary {
			t.Fatalf("read %d ran on the %s while the replica does not apply; want the primary", i, got)
		}
	}
	s.ResumeApply(t)
	resumed = true
	s.awaitReplicaReads(t, b)
}

// tokenAcrossClients: with the replica applying 2 s late, each write on one
// client is followed by a read on another (a new PHP request, maybe on
// another web host) that carries the writer's causal token: it sees the
// write every time. The same read without the token reads the lagging
// replica (so the test can fail).
func (s *ReplicaSuite) tokenAcrossClients(t *testing.T) {
	b := s.open(t)
	tbl := s.table(t, b, "token")
	s.awaitReplicaReads(t, b)
	s.DelayApply(t, 2*time.Second)
	defer s.DelayApply(t, 0)
	s.awaitReplicaReads(t, b)
	ctx := context.Background()
	writer := &sqlpool.Client{}
	n := causalPairs()
	stale, staleWithout := 0, 0
	for i := 1; i <= n; i++ {
		query(t, b, writer, sqlpool.KindExec, nil, "INSERT INTO "+tbl+" (id, v) VALUES ("+s.P(1)+", "+s.P(2)+")", int64(i), int64(i))
		token, err := b.CausalToken(ctx, writer)
		if err != nil || token == "" {
			t.Fatalf("write %d: token %q, %v", i, token, err)
		}
		reader := &sqlpool.Client{}
		if err := b.CausalAfter(reader, token); err != nil {
			t.Fatal(err)
		}
		if got, _ := query(t, b, reader, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl); got != strconv.Itoa(i) {
			stale++
		}
		if i%10 == 0 {
			if got, _ := query(t, b, &sqlpool.Client{}, sqlpool.KindQuery, nil, "SELECT COUNT(*) FROM "+tbl); got != strconv.Itoa(i) {
				staleWithout++
			}
		}
	}
	top := b.Topology()
	t.Logf("%d write-then-read pairs across clients with the token: %d stale; %d of %d reads without it stale; causal reads on the primary %d, on the replica %d",
		n, stale, staleWithout, n/10, top.CausalPrimary, top.CausalReplica)
	if stale != 0 {
		t.Errorf("%d of %d reads carrying the writer's token did not see its write", stale, n)
	}
	if staleWithout == 0 {
		t.Errorf("no read without the token was stale: the test proves nothing")
	}
}

// LockReplicaPairs serialises the tests that use the replicated pairs
// across packages (go test runs packages in parallel, and the tests pause,
// delay and promote the replicas): it holds an exclusive lock on a file
// named after the pairs until the test ends.
func LockReplicaPairs(t *testing.T) {
	t.Helper()
	key := os.Getenv("TETHER_TEST_MYSQL_PRIMARY_DSN") + "|" + os.Getenv("TETHER_TEST_POSTGRES_PRIMARY_DSN")
	path := filepath.Join(os.TempDir(), fmt.Sprintf("tether-replica-pairs-%08x.lock", crc32.ChecksumIEEE([]byte(key))))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("lock the replica pairs: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock the replica pairs: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
