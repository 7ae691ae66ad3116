package topology_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-php/tether/backend/topology"
)

// fakeProber is a host whose answers a test scripts (fault injection: hangs,
// errors, role changes). Each call takes the next step of script, the last
// one repeating; a step with hang set blocks until release closes, ignoring
// its context, or, with honorCtx, until the context ends.
type fakeProber struct {
	mu      sync.Mutex
	script  []step
	calls   int
	probed  chan time.Time // one send per call, when not nil
	release chan struct{}
	closed  atomic.Bool
}

type step struct {
	role     topology.Role
	err      error
	hang     bool
	honorCtx bool
}

func (f *fakeProber) Probe(ctx context.Context) (topology.HostStatus, error) {
	f.mu.Lock()
	s := f.script[min(f.calls, len(f.script)-1)]
	f.calls++
	f.mu.Unlock()
	if f.probed != nil {
		f.probed <- time.Now()
	}
	if s.hang {
		if s.honorCtx {
			<-ctx.Done()
			return topology.HostStatus{}, ctx.Err()
		}
		<-f.release
	}
	if s.err != nil {
		return topology.HostStatus{}, s.err
	}
	return topology.HostStatus{Role: s.role, ReadOnly: s.role == topology.RoleReplica, LagKnown: true}, nil
}

func (f *fakeProber) Close() error {
	f.closed.Store(true)
	return nil
}

func (f *fakeProber) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type change struct{ old, new topology.HostStatus }

func newMonitor(t *testing.T, cfg topology.MonitorConfig, hosts ...topology.Host) *topology.Monitor {
	t.Helper()
	m, err := topology.NewMonitor(cfg, hosts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestMonitor_Interval: probes come at once, then one per interval, not
// faster.
func TestMonitor_Interval(t *testing.T) {
	const interval = 40 * time.Millisecond
	f := &fakeProber{script: []step{{role: topology.RolePrimary}}, probed: make(chan time.Time, 16)}
	m := newMonitor(t, topology.MonitorConfig{Interval: interval}, topology.Host{Addr: "a", Prober: f})
	start := time.Now()
	m.Start()
	var at []time.Time
	for len(at) < 5 {
		select {
		case ts := <-f.probed:
			at = append(at, ts)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d probes in 5s with a %v interval", len(at), interval)
		}
	}
	if first := at[0].Sub(start); first > interval/2 {
		t.Errorf("first probe %v after Start, want at once", first)
	}
	for i := 1; i < len(at); i++ {
		// A ticker may deliver a tick late and the next one early, never two
		// probes much closer than the interval.
		if gap := at[i].Sub(at[i-1]); gap < interval/2 {
			t.Errorf("probes %d and %d %v apart, want about %v", i-1, i, gap, interval)
		}
	}
	if total := at[4].Sub(at[0]); total < 4*interval-interval/2 {
		t.Errorf("5 probes within %v, want at least ~%v (one per interval)", total, 4*interval)
	}
	if st, _ := m.Status("a"); st.Role != topology.RolePrimary || !st.Reachable() || st.CheckedAt.IsZero() {
		t.Errorf("status %+v, want a reachable primary with its check time", st)
	}
}

// TestMonitor_Timeout: a hung prober (one that ignores its context) is
// reported unreachable with ErrProbeTimeout when the timeout falls, not when
// it returns, and its late answer is not recorded.
func TestMonitor_Timeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	f := &fakeProber{
		script:  []step{{role: topology.RolePrimary}, {role: topology.RolePrimary, hang: true}},
		probed:  make(chan time.Time, 16),
		release: make(chan struct{}),
	}
	changes := make(chan change, 16)
	m := newMonitor(t, topology.MonitorConfig{Interval: 100 * time.Millisecond, Timeout: timeout,
		OnChange: func(o, n topology.HostStatus) { changes <- change{o, n} }}, topology.Host{Addr: "a", Prober: f})
	m.Start()
	if c := <-changes; c.new.Role != topology.RolePrimary {
		t.Fatalf("first change %+v, want to primary", c.new)
	}
	<-f.probed // the first probe's
	hungAt := <-f.probed
	select {
	case c := <-changes:
		took := time.Since(hungAt)
		if !errors.Is(c.new.Err, topology.ErrProbeTimeout) || c.new.Role != topology.RoleUnknown || c.old.Role != topology.RolePrimary {
			t.Errorf("change %+v -> %+v, want primary -> unknown with ErrProbeTimeout", c.old, c.new)
		}
		if took < timeout-5*time.Millisecond || took > timeout+time.Second {
			t.Errorf("timeout reported %v after the hung probe began, want about %v", took, timeout)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change 5s after the probe hung")
	}
	if st, _ := m.Status("a"); !errors.Is(st.Err, topology.ErrProbeTimeout) {
		t.Errorf("status %+v while hung, want ErrProbeTimeout", st)
	}
	close(f.release) // its answer (a primary) comes too late to count; the next probe hangs no more
	// The hung probe's late answer is dropped: the next change is the next
	// probe's, which finds the primary again.
	select {
	case c := <-changes:
		if c.new.Role != topology.RolePrimary || !c.new.Reachable() {
			t.Errorf("change after release %+v, want primary", c.new)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change 5s after the prober was released")
	}
}

// TestMonitor_OnChange: the callback fires on each change of role or
// reachability, once, with the old and the new status, and not for a probe
// that changes neither.
func TestMonitor_OnChange(t *testing.T) {
	boom := errors.New("connection refused")
	f := &fakeProber{script: []step{
		{role: topology.RolePrimary}, {role: topology.RolePrimary}, {role: topology.RoleReplica},
		{err: boom}, {err: boom}, {role: topology.RoleReplica},
	}, probed: make(chan time.Time, 64)}
	changes := make(chan change, 16)
	m := newMonitor(t, topology.MonitorConfig{Interval: 5 * time.Millisecond,
		OnChange: func(o, n topology.HostStatus) { changes <- change{o, n} }}, topology.Host{Addr: "db1:3306", Prober: f})
	m.Start()
	type edge struct {
		oldRole, newRole topology.Role
		oldUp, newUp     bool
	}
	want := []edge{
		{topology.RoleUnknown, topology.RolePrimary, false, true},
		{topology.RolePrimary, topology.RoleReplica, true, true},
		{topology.RoleReplica, topology.RoleUnknown, true, false},
		{topology.RoleUnknown, topology.RoleReplica, false, true},
	}
	for i, w := range want {
		select {
		case c := <-changes:
			got := edge{c.old.Role, c.new.Role, c.old.Reachable(), c.new.Reachable()}
			if got != w {
				t.Errorf("change %d: %+v, want %+v", i, got, w)
			}
			if c.new.Addr != "db1:3306" || c.old.Addr != "db1:3306" {
				t.Errorf("change %d: addrs %q -> %q, want db1:3306", i, c.old.Addr, c.new.Addr)
			}
			if i == 0 && !errors.Is(c.old.Err, topology.ErrNotProbed) {
				t.Errorf("first change's old status has err %v, want ErrNotProbed", c.old.Err)
			}
			if i == 2 && !errors.Is(c.new.Err, boom) {
				t.Errorf("unreachable status has err %v, want the prober's", c.new.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d did not come within 5s", i)
		}
	}
	// The script's last step repeats: a few more probes, and no change.
	for f.Calls() < len(f.script)+3 {
		<-f.probed
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-changes:
		t.Errorf("change %+v -> %+v without a change of role or reachability", c.old, c.new)
	default:
	}
}

// TestMonitor_Close: Close returns with a probe hung (it cancels it), leaves
// no goroutine behind, closes the probers, and no probe runs after it.
func TestMonitor_Close(t *testing.T) {
	before := runtime.NumGoroutine()
	ok := &fakeProber{script: []step{{role: topology.RolePrimary}}, probed: make(chan time.Time, 1024)}
	hung := &fakeProber{script: []step{{hang: true, honorCtx: true}}, probed: make(chan time.Time, 1024)}
	m, err := topology.NewMonitor(topology.MonitorConfig{Interval: 10 * time.Second},
		[]topology.Host{{Addr: "a", Prober: ok}, {Addr: "b", Prober: hung}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	<-ok.probed
	<-hung.probed // b's probe is running, hung until its context ends
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s with a probe hung (timeout 10s)")
	}
	if !ok.closed.Load() || !hung.closed.Load() {
		t.Errorf("probers closed: a %v, b %v; want both", ok.closed.Load(), hung.closed.Load())
	}
	calls := ok.Calls() + hung.Calls()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
	if got := ok.Calls() + hung.Calls(); got != calls {
		t.Errorf("%d probes after Close", got-calls)
	}
	if st, _ := m.Status("b"); st.Reachable() || !errors.Is(st.Err, topology.ErrNotProbed) {
		t.Errorf("b's status %+v: a probe cancelled by Close must not be recorded", st)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNewMonitor_Refuses: hosts without a prober, or listed twice.
func TestNewMonitor_Refuses(t *testing.T) {
	p := &fakeProber{script: []step{{}}}
	for name, hosts := range map[string][]topology.Host{
		"NoProber": {{Addr: "a"}},
		"Twice":    {{Addr: "a", Prober: p}, {Addr: "a", Prober: p}},
	} {
		if _, err := topology.NewMonitor(topology.MonitorConfig{}, hosts); err == nil {
			t.Errorf("%s: NewMonitor accepted %+v", name, hosts)
		}
	}
}
