package server

import (
	"context"
	"errors"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/resultcache"
)

// Snapshot is what an operator sees of a running tetherd (the admin
// listener's /status.json and /metrics, the tether CLI): read on demand, at no
// cost to requests.
type Snapshot struct {
	Version string    `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Ready: every backend open and the listeners up, and not draining.
	Ready    bool `json:"ready"`
	Draining bool `json:"draining"`
	// Clients connected, requests in flight, transactions open.
	Clients      int64          `json:"clients"`
	InFlight     int64          `json:"in_flight"`
	Transactions int            `json:"transactions"`
	Pools        []PoolSnapshot `json:"pools"`
	// Rollbacks counts the transactions tetherd rolled back on its own, by
	// cause: client_gone, idle_timeout, shutdown.
	Rollbacks map[string]uint64 `json:"rollbacks"`
	// EventLoop is the event loop's busy time (serving, not waiting for
	// events) and turns since tetherd started: busy seconds per second near
	// 1 is a loop at saturation.
	EventLoop EventLoopStats `json:"event_loop"`
	// Cache is the result cache's counters; nil when it is off.
	Cache *CacheSnapshot `json:"cache"`
	// Requests: the operations served so far, by backend.
	Requests []RequestStats `json:"requests"`
	// RecentErrors are the last requests that failed, newest first;
	// Slowest the slowest requests since tetherd started, slowest first.
	RecentErrors []Event `json:"recent_errors"`
	Slowest      []Event `json:"slowest"`
	// Frequent: the 20 most frequent statements, estimated from a sample.
	Frequent []StatementStats `json:"frequent"`
}

// EventLoopStats is the event loop's work so far.
type EventLoopStats struct {
	BusySeconds float64 `json:"busy_seconds"`
	Turns       int64   `json:"turns"`
}

// CacheSnapshot is the result cache's counters (they only grow) and size.
type CacheSnapshot struct {
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Merged    uint64 `json:"merged"`
	Stores    uint64 `json:"stores"`
	Evictions uint64 `json:"evictions"`
	Expired   uint64 `json:"expired"`
	// Refused: results not stored, by why: invalidated (a write during the
	// read), too_large, uncacheable.
	Refused map[string]uint64 `json:"refused"`
	// Invalidations by cause (write, tx_commit, key_api, change_stream,
	// admin), and the entries they dropped.
	Invalidations map[string]uint64 `json:"invalidations"`
	Dropped       map[string]uint64 `json:"dropped"`
	Bytes         int64             `json:"bytes"`
	Entries       int64             `json:"entries"`
}

// PoolSnapshot is one backend's pool.
type PoolSnapshot struct {
	Backend string `json:"backend"`
	Type    string `json:"type"`
	// Limits: the settings the pool runs with (a reload that changes them
	// shows here once its new pool serves).
	Limits PoolLimits `json:"limits"`
	// Stats: a current pool's counters count since tetherd started, those
	// of the pools a reload replaced for its backend included; a retiring
	// pool's are its own (already in its successor's).
	Stats tether.PoolStats `json:"stats"`
	// CacheByTable: writes drop only what read their tables (the
	// backend's catalog is known); false drops its whole cache.
	CacheByTable bool `json:"cache_by_table"`
	// TableAware: its type's statements can be read for their tables
	// (tether.BackendType.Tables), so CacheByTable applies to it.
	TableAware bool `json:"table_aware,omitempty"`
	// Retiring: a reload replaced or removed it; it serves the requests and
	// transactions that began before, then closes. Listed after the
	// current pools.
	Retiring bool `json:"retiring,omitempty"`
	// Topology: a backend over a primary and its replicas
	// (tether.TopologyReporter: replicas = [...]) reports each host (what
	// it says it is, what routing does with it, its lag, its routed reads
	// and writes, its own pool) and its failovers; nil for a backend of
	// one server, and for a retiring pool. Stats above sum the hosts' pools.
	Topology *tether.TopologyStats `json:"topology,omitempty"`
}

// PoolLimits are the settings in force for one pool: its [backends.NAME]
// table as tetherd last loaded it, and the server-wide tx_idle_timeout. A
// type uses those that apply to it (docs/operations.md, "Pools and their
// limits"): an http upstream, say, dials no min_conns ahead and keeps no
// prepared statements.
type PoolLimits struct {
	MaxConns       int             `json:"max_conns"`
	MinConns       int             `json:"min_conns"`
	AcquireTimeout tether.Duration `json:"acquire_timeout"` // the wait for a free connection before busy
	ConnectTimeout tether.Duration `json:"connect_timeout"`
	IdleTimeout    tether.Duration `json:"idle_timeout"`    // an idle connection past min_conns is closed after it
	TxIdleTimeout  tether.Duration `json:"tx_idle_timeout"` // server.tx_idle_timeout: an idle transaction is rolled back after it
	StmtCacheSize  int             `json:"stmt_cache_size"` // prepared statements kept per connection
}

// poolLimits returns the limits a pool built from cfg runs with.
func (s *Server) poolLimits(cfg tether.BackendConfig) PoolLimits {
	return PoolLimits{MaxConns: cfg.MaxConns, MinConns: cfg.MinConns, AcquireTimeout: cfg.AcquireTimeout,
		ConnectTimeout: cfg.ConnectTimeout, IdleTimeout: cfg.IdleTimeout, TxIdleTimeout: s.cfg.Server.TxIdleTimeout,
		StmtCacheSize: cfg.StmtCacheSize}
}

// Snapshot returns the server's state now. Safe from any goroutine.
func (s *Server) Snapshot() Snapshot {
	snap := Snapshot{Version: Version(), PID: os.Getpid(), Started: s.started, Draining: s.draining.Load() || s.handingOver.Load(),
		Clients: s.clients.Load(), InFlight: s.inflight.n.Load(), Transactions: s.openTxs()}
	if s.cache != nil {
		st := s.cache.Stats()
		c := &CacheSnapshot{Hits: st.Hits, Misses: st.Misses, Merged: st.Merged, Stores: st.Stores,
			Evictions: st.Evictions, Expired: st.Expired, Bytes: st.Bytes, Entries: st.Entries,
			Refused: map[string]uint64{"invalidated": st.RefusedInvalidated, "too_large": st.RefusedTooLarge,
				"uncacheable": st.RefusedUncacheable},
			Invalidations: map[string]uint64{}, Dropped: map[string]uint64{}}
		for _, cause := range resultcache.Causes() {
			c.Invalidations[cause.String()], c.Dropped[cause.String()] = st.Invalidations[cause], st.Dropped[cause]
		}
		snap.Cache = c
	}
	snap.Ready = s.opened.Load() && !snap.Draining
	snap.Rollbacks = s.rollbacks.snapshot()
	if s.loop != nil {
		busy, turns := s.loop.Busy()
		snap.EventLoop = EventLoopStats{BusySeconds: busy.Seconds(), Turns: turns}
	}
	snap.Requests = s.metrics.snapshot()
	snap.RecentErrors, snap.Slowest = s.recent.snapshot()
	snap.Frequent = s.frequent.top(maxRecent)
	current, retiring := s.poolSnapshots()
	live := s.backends()
	for _, p := range current {
		p.CacheByTable = s.CacheByTable(p.Backend)
		if t, ok := tether.LookupBackendType(p.Type); ok && t.Tables != 0 {
			p.TableAware = true
		}
		p.Topology = topologyOf(live, p.Backend)
		snap.Pools = append(snap.Pools, p)
	}
	snap.Pools = append(snap.Pools, retiring...)
	return snap
}

// topologyOf returns the topology of the backend named name among live, or
// nil when it reports none. Topology reads the router's counters and its
// monitor's last statuses: no request waits for it.
func topologyOf(live []*liveBackend, name string) *tether.TopologyStats {
	for _, lb := range live {
		if lb.name != name {
			continue
		}
		if tr, ok := lb.b.(tether.TopologyReporter); ok {
			t := tr.Topology()
			return &t
		}
		return nil
	}
	return nil
}

// ClientRef names the client connection a request came from, in the recent
// errors and the slowest requests: tetherd's number for the connection (the
// CONN of tether clients), and who was at its other end when it connected.
type ClientRef struct {
	Conn uint64 `json:"conn"`
	// PID and UID of the process at the other end of a Unix socket
	// (SO_PEERCRED: a php-fpm worker, an installer's php process); Addr of
	// a TCP client.
	PID  int    `json:"pid,omitempty"`
	UID  int    `json:"uid"`
	Addr string `json:"addr,omitempty"`
	TCP  bool   `json:"tcp"`
}

// String describes the client for a person: "pid 1234 uid 33, conn 7".
func (c ClientRef) String() string {
	var who string
	switch {
	case c.Addr != "":
		who = c.Addr
	case c.PID > 0:
		who = "pid " + strconv.Itoa(c.PID) + " uid " + strconv.Itoa(c.UID)
	default:
		who = "unknown peer"
	}
	return who + ", conn " + strconv.FormatUint(c.Conn, 10)
}

// ClientSnapshot is one client connection, as `tether clients` lists it
// (PgBouncer's SHOW CLIENTS).
type ClientSnapshot struct {
	Conn uint64 `json:"conn"` // tetherd's number for it (ClientRef.Conn)
	// PID and UID of the process at the other end of a Unix socket (a
	// php-fpm worker, say); Addr of a TCP client.
	PID          int       `json:"pid,omitempty"`
	UID          int       `json:"uid"`
	Addr         string    `json:"addr,omitempty"`
	TCP          bool      `json:"tcp"`
	Connected    time.Time `json:"connected"`
	LastActive   time.Time `json:"last_active"`
	Requests     uint64    `json:"requests"`     // frames received
	InFlight     int       `json:"in_flight"`    // requests not answered yet
	Transactions int       `json:"transactions"` // open
}

// maxClientsListed bounds Clients' answer.
const maxClientsListed = 10000

// Clients lists the client connections (at most maxClientsListed, the
// longest connected first), read on the event loop between two requests.
// Safe from any goroutine.
func (s *Server) Clients(ctx context.Context) ([]ClientSnapshot, error) {
	out := make(chan []ClientSnapshot, 1)
	s.loop.Post(func() {
		list := make([]ClientSnapshot, 0, min(len(s.sessions), maxClientsListed))
		for ss := range s.sessions {
			pid, uid, addr := ss.conn.Peer()
			list = append(list, ClientSnapshot{Conn: ss.client.Conn, PID: pid, UID: uid, Addr: addr, TCP: ss.tcp,
				Connected: time.Unix(0, ss.opened), LastActive: time.Unix(0, ss.lastActive), Requests: ss.served,
				InFlight: int(ss.pending.Load()), Transactions: ss.openTxs()})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Connected.Before(list[j].Connected) })
		if len(list) > maxClientsListed {
			list = list[:maxClientsListed]
		}
		out <- list
	})
	select {
	case list := <-out:
		return list, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.loop.Done():
		return nil, errors.New("the event loop has stopped")
	}
}

// buildVersion is set at link time by packages
// (-ldflags "-X github.com/tether-php/tether/server.buildVersion=1.2.3").
var buildVersion string

// Version returns tetherd's version: the one a package build set, or the
// module version it was built as, or the VCS revision go build stamped, or
// "devel".
func Version() string {
	if buildVersion != "" {
		return buildVersion
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
