package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
