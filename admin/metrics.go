package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	tether "github.com/tether-php/tether"
)

// collector turns a Snapshot into Prometheus metrics at each scrape. Names
// follow Prometheus's conventions: the tether_ prefix, base units, _total on
// counters; labels are bounded (backends come from the config, causes and
// reasons are fixed sets).
type collector struct {
	src Source

	buildInfo, started, ready, draining, clients, inFlight, txs *prometheus.Desc
	poolConns, poolWaits, poolResets, cacheByTable              *prometheus.Desc
	cacheHits, cacheMisses, cacheMerged, cacheStores            *prometheus.Desc
	cacheEvictions, cacheExpired, cacheRefused                  *prometheus.Desc
	cacheInvalidations, cacheDropped, cacheBytes, cacheEntries  *prometheus.Desc
	requests, duration                                          *prometheus.Desc
	poolDials, poolDialErrors, poolCancels, poolsRetiring       *prometheus.Desc
	poolIllegalMoves                                            *prometheus.Desc
	rollbacks, loopBusy, loopTurns, panics                      *prometheus.Desc
	poolMaxConns                                                *prometheus.Desc

	// A replicated backend's hosts (tether.TopologyReporter), labelled by
	// backend and host (its address: from the config, so bounded).
	hostUp, hostRole, hostState, hostLag, hostChecked *prometheus.Desc
	hostRouted, hostShunned, hostPoolConns, hostWaits *prometheus.Desc
	hostDials, hostDialErrors                         *prometheus.Desc
	failovers, lastFailover, causalReads              *prometheus.Desc
	primaryWaits, primaryWaitTimeouts                 *prometheus.Desc
}

// hostRoles and hostStates are every value tether.HostStats' Role and State
// take: tether_host_role and tether_host_state give each its own series, 1
// for the current one and 0 for the others, so that a move shows as two
// series changing rather than one vanishing.
var (
	hostRoles  = []string{"primary", "replica", "unknown"}
	hostStates = []string{"writes", "reads", "shunned", "unreachable", "unprobed", "standby"}
)

// panicSource is a Source that counts the panics it recovered from.
type panicSource interface {
	Panics() []tether.PanicStats
}

func newCollector(src Source) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("tether_"+name, help, labels, nil)
	}
	c := &collector{src: src,
		buildInfo:          d("build_info", "tetherd's version (always 1).", "version"),
		started:            d("start_time_seconds", "When tetherd started serving, in seconds since the Unix epoch."),
		ready:              d("ready", "1 when every backend is open and tetherd is not draining."),
		draining:           d("draining", "1 while tetherd drains before it exits."),
		clients:            d("clients", "Client connections (PHP workers' sockets) open."),
		inFlight:           d("requests_in_flight", "Requests being served."),
		txs:                d("transactions_open", "Transactions open."),
		poolConns:          d("pool_connections", "Backend connections of a pool, by state (open = in_use + idle).", "backend", "type", "state"),
		poolWaits:          d("pool_waits_total", "Requests that waited for a free backend connection.", "backend"),
		poolResets:         d("pool_resets_total", "Backend connections reset because a statement left session state that cannot follow its client.", "backend"),
		cacheByTable:       d("cache_by_table", "1 when writes drop only the cached results that read their tables (the backend's catalog is known), 0 when they drop its whole cache.", "backend"),
		cacheHits:          d("cache_hits_total", "Reads answered from the result cache."),
		cacheMisses:        d("cache_misses_total", "Reads that asked for the cache and found no live result."),
		cacheMerged:        d("cache_merged_total", "Reads answered by an identical read in flight."),
		cacheStores:        d("cache_stores_total", "Results stored in the cache."),
		cacheEvictions:     d("cache_evictions_total", "Cached results dropped to stay within cache.max_bytes."),
		cacheExpired:       d("cache_expired_total", "Cached results dropped past their TTL."),
		cacheRefused:       d("cache_refused_total", "Results not stored, by reason.", "reason"),
		cacheInvalidations: d("cache_invalidations_total", "Invalidations, by cause.", "cause"),
		cacheDropped:       d("cache_invalidated_entries_total", "Cached results dropped by invalidations, by cause.", "cause"),
		cacheBytes:         d("cache_bytes", "Memory the result cache counts against cache.max_bytes."),
		cacheEntries:       d("cache_entries", "Results in the cache."),
		requests:           d("requests_total", "Requests answered, by operation, backend (empty for ping, batch and join) and result (ok or the error code).", "op", "backend", "code"),
		duration:           d("request_duration_seconds", "Time from a request's arrival to its answer, by operation and backend.", "op", "backend"),
		poolDials:          d("pool_dials_total", "Backend connections opened.", "backend"),
		poolDialErrors:     d("pool_dial_errors_total", "Backend connections that could not be opened.", "backend"),
		poolCancels:        d("pool_cancels_total", "Statements cancelled on the backend (their deadline passed, or their client went away).", "backend"),
		poolIllegalMoves:   d("pool_illegal_moves_total", "Moves of a backend connection that the pool's state table refused: each is a tetherd bug, logged with its stack.", "backend"),
		poolsRetiring:      d("pools_retiring", "Pools a reload replaced or removed that still serve what began before it."),
		poolMaxConns:       d("pool_max_connections", "A pool's max_conns in force (in use against it: tether_pool_connections).", "backend"),
		rollbacks:          d("transaction_rollbacks_total", "Transactions tetherd rolled back on its own, by cause (client_gone, idle_timeout, shutdown).", "cause"),
		loopBusy:           d("event_loop_busy_seconds_total", "Time the event loop spent serving events rather than waiting for them; its rate near 1 is a loop at saturation."),
		loopTurns:          d("event_loop_turns_total", "Turns of the event loop (each serves every event ready at once)."),
		panics:             d("panics_total", "Panics recovered while serving requests (each answered internal, its stack logged), by backend and op (or place: conn_read, event_loop).", "backend", "op"),
	}
	// A replicated backend's hosts and routing (tether.TopologyReporter).
	c.hostUp = d("host_up", "1 when a host of a replicated backend answered its last probe with its role, 0 when it did not (unreachable) or was not probed yet.", "backend", "host")
	c.hostRole = d("host_role", "What a host of a replicated backend last said it is: 1 for its role (primary, replica, unknown), 0 for the others.", "backend", "host", "role")
	c.hostState = d("host_state", "What routing does with a host of a replicated backend: 1 for its state (writes, reads, shunned, unreachable, unprobed, standby), 0 for the others.", "backend", "host", "state")
	c.hostLag = d("replica_lag_seconds", "A replica's delay behind its source as it last reported it (absent while it cannot say, and for a host that says it is the primary).", "backend", "host")
	c.hostChecked = d("host_last_probe_timestamp_seconds", "When a host of a replicated backend was last probed (answered or not), in seconds since the Unix epoch.", "backend", "host")
	c.hostRouted = d("host_routed_total", "Requests routed to a host of a replicated backend, by kind: read (a replica-safe read served as a replica), write (anything sent to it as the primary).", "backend", "host", "kind")
	c.hostShunned = d("host_shunned_total", "Times a replica was taken out of reads (unreachable, not replicating, past max_replica_lag, or no longer a replica).", "backend", "host")
	c.hostPoolConns = d("host_pool_connections", "Connections of a replicated backend's host's own pool, by state (open = in_use + idle).", "backend", "host", "state")
	c.hostWaits = d("host_pool_waits_total", "Requests that waited for a free connection of a host's pool.", "backend", "host")
	c.hostDials = d("host_pool_dials_total", "Connections a host's pool opened.", "backend", "host")
	c.hostDialErrors = d("host_pool_dial_errors_total", "Connections a host's pool could not open.", "backend", "host")
	c.failovers = d("failovers_total", "Moves of a replicated backend's writes from one host to another, or to none while no host takes writes, or back from none.", "backend")
	c.lastFailover = d("last_failover_timestamp_seconds", "When a replicated backend's writes last moved, in seconds since the Unix epoch (absent before any move).", "backend")
	c.causalReads = d("causal_reads_total", "Reads of clients after their own write (read-your-writes), by where they went: primary (no replica had the write yet), replica (one had it).", "backend", "to")
	c.primaryWaits = d("primary_waits_total", "Requests that needed the primary while no host took writes, and waited for one (primary_wait).", "backend")
	c.primaryWaitTimeouts = d("primary_wait_timeouts_total", "Requests answered unavailable because no host took writes within primary_wait.", "backend")
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.started, c.ready, c.draining, c.clients, c.inFlight, c.txs,
		c.poolConns, c.poolWaits, c.poolResets, c.cacheByTable, c.cacheHits, c.cacheMisses, c.cacheMerged,
		c.cacheStores, c.cacheEvictions, c.cacheExpired, c.cacheRefused, c.cacheInvalidations, c.cacheDropped,
		c.cacheBytes, c.cacheEntries, c.requests, c.duration, c.poolDials, c.poolDialErrors, c.poolCancels, c.poolIllegalMoves,
		c.poolsRetiring, c.rollbacks, c.loopBusy, c.loopTurns, c.panics, c.poolMaxConns,
		c.hostUp, c.hostRole, c.hostState, c.hostLag, c.hostChecked, c.hostRouted, c.hostShunned, c.hostPoolConns,
		c.hostWaits, c.hostDials, c.hostDialErrors, c.failovers, c.lastFailover, c.causalReads, c.primaryWaits,
		c.primaryWaitTimeouts} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.buildInfo, 1, s.Version)
	if !s.Started.IsZero() {
		gauge(c.started, float64(s.Started.UnixNano())/1e9)
	}
	gauge(c.ready, b2f(s.Ready))
	gauge(c.draining, b2f(s.Draining))
	gauge(c.clients, float64(s.Clients))
	gauge(c.inFlight, float64(s.InFlight))
	gauge(c.txs, float64(s.Transactions))
	retiring := 0
	for _, p := range s.Pools {
		if p.Retiring { // its successor has the backend's name and labels
			retiring++
			continue
		}
		counter(c.poolDials, float64(p.Stats.Dials), p.Backend)
		counter(c.poolDialErrors, float64(p.Stats.DialErrors), p.Backend)
		counter(c.poolCancels, float64(p.Stats.Cancels), p.Backend)
		counter(c.poolIllegalMoves, float64(p.Stats.IllegalMoves), p.Backend)
		gauge(c.poolConns, float64(p.Stats.Open), p.Backend, p.Type, "open")
		gauge(c.poolConns, float64(p.Stats.InUse), p.Backend, p.Type, "in_use")
		gauge(c.poolConns, float64(p.Stats.Idle), p.Backend, p.Type, "idle")
		counter(c.poolWaits, float64(p.Stats.Waiting), p.Backend)
		counter(c.poolResets, float64(p.Stats.Resets), p.Backend)
		gauge(c.poolMaxConns, float64(p.Limits.MaxConns), p.Backend)
		if s.Cache != nil && p.TableAware {
			gauge(c.cacheByTable, b2f(p.CacheByTable), p.Backend)
		}
		if p.Topology != nil {
			c.collectTopology(p.Backend, p.Topology, gauge, counter)
		}
	}
	gauge(c.poolsRetiring, float64(retiring))
	for cause, n := range s.Rollbacks {
		counter(c.rollbacks, float64(n), cause)
	}
	if ps, ok := c.src.(panicSource); ok {
		for _, p := range ps.Panics() {
			counter(c.panics, float64(p.Count), p.Backend, p.Op)
		}
	}
	counter(c.loopBusy, s.EventLoop.BusySeconds)
	counter(c.loopTurns, float64(s.EventLoop.Turns))
	for _, r := range s.Requests {
		for code, n := range r.Outcomes {
			counter(c.requests, float64(n), r.Op, r.Backend, code)
		}
		ch <- prometheus.MustNewConstHistogram(c.duration, r.Count, r.SumSeconds, r.Buckets, r.Op, r.Backend)
	}
	if cs := s.Cache; cs != nil {
		counter(c.cacheHits, float64(cs.Hits))
		counter(c.cacheMisses, float64(cs.Misses))
		counter(c.cacheMerged, float64(cs.Merged))
		counter(c.cacheStores, float64(cs.Stores))
		counter(c.cacheEvictions, float64(cs.Evictions))
		counter(c.cacheExpired, float64(cs.Expired))
		for reason, n := range cs.Refused {
			counter(c.cacheRefused, float64(n), reason)
		}
		for cause, n := range cs.Invalidations {
			counter(c.cacheInvalidations, float64(n), cause)
		}
		for cause, n := range cs.Dropped {
			counter(c.cacheDropped, float64(n), cause)
		}
		gauge(c.cacheBytes, float64(cs.Bytes))
		gauge(c.cacheEntries, float64(cs.Entries))
	}
}

// collectTopology emits a replicated backend's hosts and routing counters.
func (c *collector) collectTopology(backend string, t *tether.TopologyStats, gauge, counter func(*prometheus.Desc, float64, ...string)) {
	for _, h := range t.Hosts {
		// Role is "unknown" until the host answers, and again after each
		// probe it fails: a primary that stopped answering keeps state
		// "writes" (it keeps the writes until another host takes them), so
		// State alone cannot tell.
		gauge(c.hostUp, b2f(h.Role != "unknown"), backend, h.Addr)
		for _, role := range hostRoles {
			gauge(c.hostRole, b2f(h.Role == role), backend, h.Addr, role)
		}
		for _, state := range hostStates {
			gauge(c.hostState, b2f(h.State == state), backend, h.Addr, state)
		}
		if h.LagKnown && h.Role != "primary" { // a primary's 0 would only clutter lag dashboards
			gauge(c.hostLag, h.LagSeconds, backend, h.Addr)
		}
		if !h.CheckedAt.IsZero() {
			gauge(c.hostChecked, float64(h.CheckedAt.UnixNano())/1e9, backend, h.Addr)
		}
		counter(c.hostRouted, float64(h.Reads), backend, h.Addr, "read")
		counter(c.hostRouted, float64(h.Writes), backend, h.Addr, "write")
		counter(c.hostShunned, float64(h.Shunned), backend, h.Addr)
		gauge(c.hostPoolConns, float64(h.Pool.Open), backend, h.Addr, "open")
		gauge(c.hostPoolConns, float64(h.Pool.InUse), backend, h.Addr, "in_use")
		gauge(c.hostPoolConns, float64(h.Pool.Idle), backend, h.Addr, "idle")
		counter(c.hostWaits, float64(h.Pool.Waiting), backend, h.Addr)
		counter(c.hostDials, float64(h.Pool.Dials), backend, h.Addr)
		counter(c.hostDialErrors, float64(h.Pool.DialErrors), backend, h.Addr)
	}
	counter(c.failovers, float64(t.FailoversTotal), backend)
	if n := len(t.Failovers); n > 0 {
		gauge(c.lastFailover, float64(t.Failovers[n-1].At.UnixNano())/1e9, backend)
	}
	counter(c.causalReads, float64(t.CausalPrimary), backend, "primary")
	counter(c.causalReads, float64(t.CausalReplica), backend, "replica")
	counter(c.primaryWaits, float64(t.PrimaryWaits), backend)
	counter(c.primaryWaitTimeouts, float64(t.PrimaryWaitTimeouts), backend)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
