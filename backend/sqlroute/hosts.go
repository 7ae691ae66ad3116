package sqlroute

import (
	"errors"
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/topology"
)

// watch hands the monitor's statuses to the loop a few times an interval, so
// that routing follows lag as well as roles, and what waits for a primary is
// routed or answered in time.
func (r *Router) watch() {
	defer r.wg.Done()
	t := time.NewTicker(max(r.cfg.Interval/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			st := r.mon.Statuses()
			if r.loop.Post(func() { r.update(st) }) != nil {
				return
			}
		}
	}
}

// update takes the hosts' latest statuses: who takes writes, which replicas
// take reads; then routes what waits for a primary. Loop goroutine.
func (r *Router) update(st []topology.HostStatus) {
	now := time.Now()
	for i, h := range r.hosts {
		h.status = st[i]
		// A host that failed to connect is connected to again once a
		// probe made after the failure reached it.
		if !h.downAt.IsZero() && h.status.Reachable() && h.status.CheckedAt.After(h.downAt) {
			h.downAt = time.Time{}
		}
	}
	cur := r.primary.Load()
	var writable []*host
	for _, h := range r.hosts {
		switch {
		case h.status.Reachable():
			h.downSince = time.Time{}
		case answered(h.status) && h.downSince.IsZero():
			h.downSince = h.status.CheckedAt
		}
		if takesWrites(h.status) && believed(h) {
			writable = append(writable, h)
		}
	}
	next := cur
	switch {
	case cur != nil && !answered(cur.status):
		// Before its first answer the dsn's host keeps the writes.
	case cur != nil && !cur.status.Reachable() && now.Sub(cur.downSince) < primaryGrace*r.cfg.Interval:
		// A primary keeps the writes through a few failed probes (a slow or
		// loaded host): they fail by themselves if it is dead, as on a
		// backend of one host, until another host says it takes them.
	case len(writable) == 0:
		// Nothing says it takes writes. A primary that answered read-only
		// or a replica, or that has not answered for a while, gets none.
		next = nil
		if cur != nil && !cur.status.Reachable() {
			next = cur // no one else either: it keeps them, and they fail
		}
	case cur != nil && contains(writable, cur):
	default:
		next = writable[0]
		if len(writable) > 1 {
			r.log.Warn("several hosts say they take writes; writes go to the first configured",
				"backend", r.label, "hosts", addrs(writable), "primary", next.Addr)
		}
	}
	if next != cur {
		r.setPrimary(next, r.describeAll())
	}

	r.replicas = r.replicas[:0]
	r.viewMu.Lock()
	for _, h := range r.hosts {
		readable, why := r.readable(h.status)
		readable = readable && h != next
		if h.readable && !readable {
			h.shunned.Add(1)
			r.log.Warn("replica out of reads", "backend", r.label, "host", h.Addr, "why", why)
		} else if !h.readable && readable && answered(h.status) && h.shunned.Load() > 0 {
			r.log.Info("replica back in reads", "backend", r.label, "host", h.Addr)
		}
		h.readable = readable
		if readable {
			r.replicas = append(r.replicas, h)
		}
		h.state, h.why = r.stateOf(h, next, why)
	}
	r.viewMu.Unlock()
	r.routeWaiting(now)
}

// primaryGrace is how many monitor intervals of failed probes a primary
// keeps the writes through while another host says it takes them.
const primaryGrace = 3

// takesWrites reports whether a host says it takes writes: a primary, not
// read-only, and replicating from nothing (a MariaDB replica whose
// read_only was left off is not a primary).
func takesWrites(s topology.HostStatus) bool {
	return s.Reachable() && s.Role == topology.RolePrimary && !s.ReadOnly && !s.Replicating && s.ReceivedPosition == ""
}

// believed reports whether h's status may make it the primary: one made
// after its last definitive read-only refusal.
func believed(h *host) bool { return h.status.CheckedAt.After(h.demotedAt) }

// readable reports whether a host may serve reads as a replica now, and why
// not.
func (r *Router) readable(s topology.HostStatus) (bool, string) {
	switch {
	case errors.Is(s.Err, topology.ErrNotProbed):
		return false, "not probed yet"
	case !s.Reachable():
		return false, "unreachable: " + s.Err.Error()
	case s.Role != topology.RoleReplica:
		return false, "says it is " + s.Role.String()
	case !s.Replicating:
		return false, "not replicating (its replication stopped or paused)"
	case r.cfg.MaxReplicaLag > 0 && !s.LagKnown:
		return false, "cannot say its lag"
	case r.cfg.MaxReplicaLag > 0 && s.Lag > r.cfg.MaxReplicaLag:
		return false, fmt.Sprintf("%s behind, more than max_replica_lag %s", s.Lag.Round(time.Millisecond), r.cfg.MaxReplicaLag)
	}
	return true, ""
}

// stateOf is the operators' word for what routing does with h.
func (r *Router) stateOf(h, primary *host, why string) (state, because string) {
	switch {
	case h == primary:
		return "writes", ""
	case h.readable:
		return "reads", ""
	case errors.Is(h.status.Err, topology.ErrNotProbed):
		return "unprobed", ""
	case !h.status.Reachable():
		return "unreachable", h.status.Err.Error()
	case takesWrites(h.status):
		return "standby", "says it takes writes, but " + addrOf(primary) + " has them"
	}
	return "shunned", why
}

// setPrimary moves writes to next (nil: none), recording the failover.
// Loop goroutine.
func (r *Router) setPrimary(next *host, why string) {
	cur := r.primary.Load()
	switch {
	case next == nil:
		r.log.Warn("no host takes writes; what needs one waits for one", "backend", r.label, "was", addrOf(cur),
			"primary_wait", r.cfg.PrimaryWait, "hosts", why)
	case cur == nil:
		r.log.Warn("a host takes writes again", "backend", r.label, "primary", next.Addr, "hosts", why)
	default:
		r.log.Warn("writes move to a new primary", "backend", r.label, "from", cur.Addr, "to", next.Addr, "hosts", why)
	}
	r.primary.Store(next)
	if cur != nil {
		// Its sessions end (new ones resolve its name afresh); what runs
		// there finishes.
		cur.Pool.DrainIdle()
	}
	r.failoversTotal.Add(1)
	r.viewMu.Lock()
	if len(r.failovers) == maxFailovers {
		r.failovers = append(r.failovers[:0], r.failovers[1:]...)
	}
	r.failovers = append(r.failovers, tether.Failover{At: time.Now(), From: addrOf(cur), To: addrOf(next), Why: why})
	r.viewMu.Unlock()
}

// Topology reports every host, in the configured order, and what routing
// did. Any goroutine.
func (r *Router) Topology() tether.TopologyStats {
	st := r.mon.Statuses()
	out := tether.TopologyStats{
		Hosts:               make([]tether.HostStats, len(r.hosts)),
		FailoversTotal:      r.failoversTotal.Load(),
		CausalPrimary:       r.causalToPrimary.Load(),
		CausalReplica:       r.causalToReplica.Load(),
		PrimaryWaits:        r.primaryWaits.Load(),
		PrimaryWaitTimeouts: r.primaryWaitTimeouts.Load(),
	}
	r.viewMu.Lock()
	out.Failovers = append([]tether.Failover(nil), r.failovers...)
	for i, h := range r.hosts {
		s := st[i]
		out.Hosts[i] = tether.HostStats{Addr: h.Addr, Role: s.Role.String(), State: h.state, Why: h.why,
			LagSeconds: s.Lag.Seconds(), LagKnown: s.LagKnown, Position: s.Position, CheckedAt: s.CheckedAt,
			Reads: h.reads.Load(), Writes: h.writes.Load(), Shunned: h.shunned.Load(), Pool: h.Pool.Stats()}
	}
	r.viewMu.Unlock()
	return out
}

func (r *Router) describeAll() string {
	s := ""
	for i, h := range r.hosts {
		if i > 0 {
			s += ", "
		}
		s += h.Addr + ": " + describe(h.status)
	}
	return s
}

func answered(s topology.HostStatus) bool { return !errors.Is(s.Err, topology.ErrNotProbed) }

func contains(hs []*host, h *host) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

func addrs(hs []*host) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Addr
	}
	return out
}

func describe(s topology.HostStatus) string {
	switch {
	case errors.Is(s.Err, topology.ErrNotProbed):
		return "not probed yet"
	case s.Err != nil:
		return "unreachable: " + s.Err.Error()
	case s.ReadOnly:
		return s.Role.String() + ", read-only"
	}
	return s.Role.String()
}
