package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/server"
)

type fakeSource struct{ snap server.Snapshot }

func (f *fakeSource) Snapshot() server.Snapshot { return f.snap }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestReadyz: ready only when open and not draining.
func TestReadyz(t *testing.T) {
	src := &fakeSource{}
	h := Handler(src)
	for _, c := range []struct {
		ready, draining bool
		code            int
		body            string
	}{
		{false, false, 503, "not ready: starting\n"},
		{true, false, 200, "ready\n"},
		{false, true, 503, "not ready: draining\n"},
	} {
		src.snap = server.Snapshot{Ready: c.ready, Draining: c.draining}
		if code, body := get(t, h, "/readyz"); code != c.code || body != c.body {
			t.Errorf("ready %v draining %v: %d %q, want %d %q", c.ready, c.draining, code, body, c.code, c.body)
		}
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}

// TestMetrics: the snapshot's figures under their names, with bounded labels.
func TestMetrics(t *testing.T) {
	src := &fakeSource{snap: server.Snapshot{Version: "v1.2.3", Ready: true, Clients: 7, InFlight: 3, Transactions: 2,
		Pools: []server.PoolSnapshot{{Backend: "maria", Type: "mysql", Stats: tether.PoolStats{Open: 4, InUse: 1, Idle: 3, Waiting: 9, Resets: 2}, CacheByTable: true, TableAware: true}},
		Cache: &server.CacheSnapshot{Hits: 100, Misses: 5, Bytes: 4096, Entries: 3,
			Refused: map[string]uint64{"too_large": 1}, Invalidations: map[string]uint64{"write": 4}, Dropped: map[string]uint64{"write": 6}},
		Requests: []server.RequestStats{{Op: "query", Backend: "maria", Outcomes: map[string]uint64{"ok": 9, "timeout": 1}, Count: 10,
			Buckets: map[float64]uint64{0.001: 8, 1: 10}, SumSeconds: 0.5}}}}
	_, body := get(t, Handler(src), "/metrics")
	for _, want := range []string{
		`tether_build_info{version="v1.2.3"} 1`,
		"tether_clients 7", "tether_requests_in_flight 3", "tether_transactions_open 2", "tether_ready 1", "tether_draining 0",
		`tether_pool_connections{backend="maria",state="in_use",type="mysql"} 1`,
		`tether_pool_connections{backend="maria",state="idle",type="mysql"} 3`,
		`tether_pool_waits_total{backend="maria"} 9`, `tether_pool_resets_total{backend="maria"} 2`,
		`tether_cache_by_table{backend="maria"} 1`,
		"tether_cache_hits_total 100", "tether_cache_misses_total 5", "tether_cache_bytes 4096", "tether_cache_entries 3",
		`tether_cache_refused_total{reason="too_large"} 1`, `tether_cache_invalidations_total{cause="write"} 4`,
		`tether_cache_invalidated_entries_total{cause="write"} 6`,
		`tether_requests_total{backend="maria",code="ok",op="query"} 9`,
		`tether_requests_total{backend="maria",code="timeout",op="query"} 1`,
		`tether_request_duration_seconds_bucket{backend="maria",op="query",le="0.001"} 8`,
		`tether_request_duration_seconds_bucket{backend="maria",op="query",le="+Inf"} 10`,
		`tether_request_duration_seconds_sum{backend="maria",op="query"} 0.5`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics has no line %q", want)
		}
	}
	src.snap.Cache = nil
	if _, body := get(t, Handler(src), "/metrics"); strings.Contains(body, "tether_cache_hits_total") {
		t.Error("cache metrics with the cache off")
	}
}

// TestStatusPage: the page shows the snapshot, escapes what it shows, and
// loads nothing from elsewhere.
func TestStatusPage(t *testing.T) {
	src := &fakeSource{snap: server.Snapshot{Version: "v9", Ready: true, Clients: 12,
		Pools:        []server.PoolSnapshot{{Backend: "maria", Type: "mysql", Stats: tether.PoolStats{Open: 4, InUse: 2}}},
		Cache:        &server.CacheSnapshot{Hits: 3, Misses: 1},
		Requests:     []server.RequestStats{{Op: "query", Backend: "maria", Count: 10, Outcomes: map[string]uint64{"ok": 8, "busy": 2}, SumSeconds: 0.01}},
		Slowest:      []server.Event{{Op: "query", Backend: "maria", SQL: "SELECT '<script>'", Took: 1500000000, Code: "ok"}},
		RecentErrors: []server.Event{{Op: "exec", Backend: "maria", Code: "busy", Message: "no connection"}}}}
	code, body := get(t, Handler(src), "/status")
	if code != 200 {
		t.Fatalf("/status: %d", code)
	}
	for _, want := range []string{"tetherd <span class=\"state-ready\">ready</span>", "version v9", `<td class="n" id="clients">12</td>`,
		`<td class="n" id="hit-rate">75.0%</td>`, "<td>maria</td><td>mysql</td>", "1500.000 ms", "SELECT &#39;&lt;script&gt;&#39;",
		"no connection", "<td class=\"n\">2</td><td class=\"n\">1.000 ms</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("/status has no %q:\n%s", want, body)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://", "<link"} {
		if strings.Contains(body, banned) {
			t.Errorf("/status holds %q: it must load nothing and run nothing", banned)
		}
	}
	if code, _ := get(t, Handler(src), "/"); code != 302 {
		t.Errorf("/: %d, want a redirect to /status", code)
	}
}

// TestUnknownRequests: a path or a method the admin API does not serve gets a
// clear answer that says what there is.
func TestUnknownRequests(t *testing.T) {
	h := Handler(&fakeSource{})
	for _, c := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/nosuch", 404, "no admin endpoint GET /nosuch; there are: GET /metrics"},
		{"DELETE", "/metrics", 405, "DELETE /metrics: method not allowed; use GET /metrics"},
		{"GET", "/reload", 405, "GET /reload: method not allowed; use POST /reload"},
		{"POST", "/reload", 404, "POST /reload is not served by this tetherd"}, // a source that cannot reload
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, rec.Code, body, c.code, c.want)
		}
	}
}

// topologySnapshot is a replicated backend "maria" over a primary, a replica
// serving reads and a replica shunned for its lag, after one failover.
func topologySnapshot() server.Snapshot {
	at := time.Date(2026, 11, 27, 12, 0, 1, 0, time.UTC)
	return server.Snapshot{Version: "v1", Ready: true,
		Pools: []server.PoolSnapshot{{Backend: "maria", Type: "mysql", Stats: tether.PoolStats{Open: 5},
			Topology: &tether.TopologyStats{
				Hosts: []tether.HostStats{
					{Addr: "db1:3306", Role: "primary", State: "writes", LagKnown: true, Position: "0-1-42", CheckedAt: at, Writes: 17,
						Pool: tether.PoolStats{Open: 3, InUse: 1, Idle: 2, Waiting: 4, Dials: 3}},
					{Addr: "db2:3306", Role: "replica", State: "reads", LagSeconds: 0.25, LagKnown: true, Position: "0-1-41", CheckedAt: at,
						Reads: 40, Shunned: 1, Pool: tether.PoolStats{Open: 2, Idle: 2, Dials: 2}},
					{Addr: "db3:3306", Role: "replica", State: "shunned", Why: "7s behind, more than max_replica_lag 5s", LagSeconds: 7, LagKnown: true,
						CheckedAt: at, Reads: 3, Shunned: 2, Pool: tether.PoolStats{DialErrors: 1}},
					{Addr: "db4:3306", Role: "unknown", State: "unreachable", Why: "dial tcp: connection refused <x>"},
				},
				Failovers:      []tether.Failover{{At: at, From: "db0:3306", To: "db1:3306", Why: "db0:3306: replica, read-only, db1:3306: primary"}},
				FailoversTotal: 1, CausalPrimary: 6, CausalReplica: 9, PrimaryWaits: 2, PrimaryWaitTimeouts: 1,
			}}}}
}

// TestMetrics_Topology: a replicated backend's hosts in /metrics, by backend
// and host: role and state as 0/1 series, lag, routed reads and writes,
// shunned periods, their pools; its failovers and causal reads.
func TestMetrics_Topology(t *testing.T) {
	_, body := get(t, Handler(&fakeSource{snap: topologySnapshot()}), "/metrics")
	for _, want := range []string{
		`tether_host_up{backend="maria",host="db1:3306"} 1`,
		`tether_host_up{backend="maria",host="db4:3306"} 0`,
		`tether_host_role{backend="maria",host="db1:3306",role="primary"} 1`,
		`tether_host_role{backend="maria",host="db1:3306",role="replica"} 0`,
		`tether_host_role{backend="maria",host="db2:3306",role="replica"} 1`,
		`tether_host_state{backend="maria",host="db1:3306",state="writes"} 1`,
		`tether_host_state{backend="maria",host="db2:3306",state="reads"} 1`,
		`tether_host_state{backend="maria",host="db3:3306",state="shunned"} 1`,
		`tether_host_state{backend="maria",host="db3:3306",state="reads"} 0`,
		`tether_host_state{backend="maria",host="db4:3306",state="unreachable"} 1`,
		`tether_replica_lag_seconds{backend="maria",host="db2:3306"} 0.25`,
		`tether_replica_lag_seconds{backend="maria",host="db3:3306"} 7`,
		`tether_host_last_probe_timestamp_seconds{backend="maria",host="db1:3306"} 1.795780801e+09`,
		`tether_host_routed_total{backend="maria",host="db1:3306",kind="write"} 17`,
		`tether_host_routed_total{backend="maria",host="db2:3306",kind="read"} 40`,
		`tether_host_shunned_total{backend="maria",host="db3:3306"} 2`,
		`tether_host_pool_connections{backend="maria",host="db1:3306",state="in_use"} 1`,
		`tether_host_pool_connections{backend="maria",host="db2:3306",state="idle"} 2`,
		`tether_host_pool_waits_total{backend="maria",host="db1:3306"} 4`,
		`tether_host_pool_dials_total{backend="maria",host="db2:3306"} 2`,
		`tether_host_pool_dial_errors_total{backend="maria",host="db3:3306"} 1`,
		`tether_failovers_total{backend="maria"} 1`,
		`tether_last_failover_timestamp_seconds{backend="maria"} 1.795780801e+09`,
		`tether_causal_reads_total{backend="maria",to="primary"} 6`,
		`tether_causal_reads_total{backend="maria",to="replica"} 9`,
		`tether_primary_waits_total{backend="maria"} 2`,
		`tether_primary_wait_timeouts_total{backend="maria"} 1`,
		// The backend's own pool figures stay as they were.
		`tether_pool_connections{backend="maria",state="open",type="mysql"} 5`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics has no line %q", want)
		}
	}
	for _, absent := range []string{`tether_replica_lag_seconds{backend="maria",host="db1:3306"}`, `tether_replica_lag_seconds{backend="maria",host="db4:3306"}`,
		`tether_host_last_probe_timestamp_seconds{backend="maria",host="db4:3306"}`} {
		if strings.Contains(body, absent) {
			t.Errorf("/metrics has %q for a host that did not say", absent)
		}
	}
	// A primary that stopped answering keeps the writes, but is not up.
	snap := topologySnapshot()
	snap.Pools[0].Topology.Hosts[0].Role = "unknown"
	_, body = get(t, Handler(&fakeSource{snap: snap}), "/metrics")
	for _, want := range []string{`tether_host_up{backend="maria",host="db1:3306"} 0`, `tether_host_state{backend="maria",host="db1:3306",state="writes"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics with the primary not answering has no line %q", want)
		}
	}
	// A backend of one server has none of them.
	_, body = get(t, Handler(&fakeSource{snap: server.Snapshot{Pools: []server.PoolSnapshot{{Backend: "one", Type: "mysql"}}}}), "/metrics")
	if strings.Contains(body, "tether_host_") || strings.Contains(body, "tether_failovers_total{") {
		t.Errorf("host metrics for a backend without replicas:\n%s", body)
	}
}

// TestStatusPage_Topology: the status page shows each host of a replicated
// backend and its failovers, escaped.
func TestStatusPage_Topology(t *testing.T) {
	code, body := get(t, Handler(&fakeSource{snap: topologySnapshot()}), "/status")
	if code != 200 {
		t.Fatalf("/status: %d", code)
	}
	for _, want := range []string{
		`<h2>Hosts of maria</h2>`, `id="hosts-maria"`,
		`<tr><td>db1:3306</td><td>primary</td><td class="host-writes">writes</td><td></td><td class="n">0.000 s</td><td><code>0-1-42</code></td><td>12:00:01.000</td><td class="n">0</td><td class="n">17</td><td class="n">0</td><td class="n">3</td><td class="n">1</td><td class="n">4</td></tr>`,
		`<tr><td>db2:3306</td><td>replica</td><td class="host-reads">reads</td><td></td><td class="n">0.250 s</td>`,
		`<td class="host-shunned">shunned</td><td>7s behind, more than max_replica_lag 5s</td><td class="n">7.000 s</td>`,
		`<td class="host-unreachable">unreachable</td><td>dial tcp: connection refused &lt;x&gt;</td>`,
		`6 on the primary, 9 on a replica that had it`, `waits for a primary: 2 (1 timed out)`, `failovers: 1`,
		`<tr><td>2026-11-27 12:00:01.000</td><td>db0:3306</td><td>db1:3306</td><td>db0:3306: replica, read-only, db1:3306: primary</td></tr>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/status has no %q:\n%s", want, body)
		}
	}
	_, body = get(t, Handler(&fakeSource{snap: server.Snapshot{Pools: []server.PoolSnapshot{{Backend: "one", Type: "mysql"}}}}), "/status")
	if strings.Contains(body, "Hosts of") {
		t.Error("a host table for a backend without replicas")
	}
}

// TestStatusJSON_Topology: /status.json carries a replicated backend's
// topology under its pool, and none for a backend of one server.
func TestStatusJSON_Topology(t *testing.T) {
	snap := topologySnapshot()
	snap.Pools = append(snap.Pools, server.PoolSnapshot{Backend: "one", Type: "sqlite"})
	_, body := get(t, Handler(&fakeSource{snap: snap}), "/status.json")
	var got struct {
		Pools []struct {
			Backend  string          `json:"backend"`
			Topology json.RawMessage `json:"topology"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Pools) != 2 {
		t.Fatalf("/status.json: %v\n%s", err, body)
	}
	var topo tether.TopologyStats
	if err := json.Unmarshal(got.Pools[0].Topology, &topo); err != nil || len(topo.Hosts) != 4 || topo.Hosts[2].State != "shunned" ||
		topo.FailoversTotal != 1 || topo.CausalReplica != 9 || !strings.Contains(string(got.Pools[0].Topology), `"lag_seconds": 7`) {
		t.Errorf("maria's topology: %v %+v\n%s", err, topo, got.Pools[0].Topology)
	}
	if got.Pools[1].Topology != nil {
		t.Errorf("a topology for a backend of one server: %s", got.Pools[1].Topology)
	}
}
