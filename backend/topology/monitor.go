package topology

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Host is one host a Monitor probes.
type Host struct {
	// Addr names the host in statuses and callbacks; it is the key of
	// Monitor.Status.
	Addr   string
	Prober Prober
}

// MonitorConfig sets a Monitor's pace and what it tells.
type MonitorConfig struct {
	// Interval between the starts of two probes of one host (default 1s).
	// A probe that takes longer delays the next; probes never overlap.
	Interval time.Duration
	// Timeout bounds one probe (default Interval; it may be longer, as
	// probes of a host never overlap: the next waits): past it the
	// host's status is ErrProbeTimeout, recorded at once, whatever the
	// Prober does.
	Timeout time.Duration
	// OnChange, when set, is called with the old and the new status each
	// time a host's role or reachability changes, the first answer
	// included (the old status then is the ErrNotProbed one). It runs on
	// that host's goroutine, after the new status is recorded, one call at a
	// time per host (hosts may call it concurrently): it should return
	// quickly, as the host's next probe waits for it.
	OnChange func(old, new HostStatus)
}

// Monitor probes hosts on an interval and keeps each one's latest status.
//
// Its life: NewMonitor (no goroutine, no I/O); Start (one goroutine per
// host, each probing at once and then every Interval); Status and Statuses
// from any goroutine; Close (stops the goroutines, waits for them and any
// probe running, and closes the Probers that are io.Closers).
type Monitor struct {
	cfg   MonitorConfig
	hosts []Host

	mu     sync.Mutex
	status map[string]HostStatus

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
	closed  bool
}

// NewMonitor returns a Monitor of hosts (their Addrs must differ) that is not
// started yet. Every host's status is RoleUnknown with ErrNotProbed until its
// first probe answers.
func NewMonitor(cfg MonitorConfig, hosts []Host) (*Monitor, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Interval
	}
	m := &Monitor{cfg: cfg, hosts: append([]Host(nil), hosts...), status: make(map[string]HostStatus, len(hosts))}
	for _, h := range hosts {
		if h.Prober == nil {
			return nil, fmt.Errorf("new monitor: host %q has no prober", h.Addr)
		}
		if _, dup := m.status[h.Addr]; dup {
			return nil, fmt.Errorf("new monitor: host %q listed twice", h.Addr)
		}
		m.status[h.Addr] = HostStatus{Addr: h.Addr, Err: ErrNotProbed}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// Start starts probing, one goroutine per host. It does nothing after the
// first call or after Close.
func (m *Monitor) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	for _, h := range m.hosts {
		m.wg.Add(1)
		go m.run(h)
	}
}

// Status returns the latest status of the host named addr, and whether the
// Monitor has such a host.
func (m *Monitor) Status(addr string) (HostStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.status[addr]
	return s, ok
}

// Statuses returns every host's latest status, in the order of the hosts
// given to NewMonitor.
func (m *Monitor) Statuses() []HostStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]HostStatus, 0, len(m.hosts))
	for _, h := range m.hosts {
		out = append(out, m.status[h.Addr])
	}
	return out
}

// Close stops probing: it cancels the running probes, waits until every
// host's goroutine has returned (so no probe runs and no OnChange call is
// made after it), then closes the Probers that implement io.Closer and
// returns the first of their errors. Safe to call twice.
func (m *Monitor) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	var first error
	for _, h := range m.hosts {
		if c, ok := h.Prober.(io.Closer); ok {
			if err := c.Close(); err != nil && first == nil {
				first = fmt.Errorf("close prober of %s: %w", h.Addr, err)
			}
		}
	}
	return first
}

// run probes h until the Monitor closes.
func (m *Monitor) run(h Host) {
	defer m.wg.Done()
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for {
		m.probe(h)
		select {
		case <-m.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type probeResult struct {
	st  HostStatus
	err error
}

// probe runs one probe of h bounded by the timeout and records its status.
// The Prober runs on a goroutine of its own so that a timeout is recorded
// when it falls, even from a Prober slow to notice its context; probe then
// waits for it, so that one host's probes never overlap.
func (m *Monitor) probe(h Host) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Timeout)
	defer cancel()
	done := make(chan probeResult, 1)
	go func() {
		st, err := h.Prober.Probe(ctx)
		done <- probeResult{st, err}
	}()
	var r probeResult
	select {
	case r = <-done:
	case <-ctx.Done():
		if m.ctx.Err() != nil { // closing: record nothing
			<-done
			return
		}
		r.err = ErrProbeTimeout
		m.record(h, start, r)
		<-done
		return
	}
	if r.err != nil && m.ctx.Err() != nil {
		return
	}
	m.record(h, start, r)
}

// record stores r as h's status and calls OnChange when the role or the
// reachability changed.
func (m *Monitor) record(h Host, start time.Time, r probeResult) {
	st := r.st
	if r.err != nil {
		st = HostStatus{Err: fmt.Errorf("probe %s: %w", h.Addr, r.err)}
	}
	st.Addr, st.CheckedAt = h.Addr, start
	m.mu.Lock()
	old := m.status[h.Addr]
	m.status[h.Addr] = st
	m.mu.Unlock()
	if m.cfg.OnChange != nil && (old.Role != st.Role || old.Reachable() != st.Reachable()) {
		m.cfg.OnChange(old, st)
	}
}
