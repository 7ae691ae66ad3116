package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	httpup "github.com/tether-php/tether/backend/http"
	"github.com/tether-php/tether/wire"
)

// fanoutUpstream is a real HTTP server whose /wait endpoint answers only when
// want requests are in flight at once (or after 5 s): a batch that did not run
// its calls in parallel cannot pass, however fast the machine.
type fanoutUpstream struct {
	*httptest.Server
	inFlight, peak atomic.Int64
}

func newFanoutUpstream(t *testing.T, want int64) *fanoutUpstream {
	u := &fanoutUpstream{}
	all := make(chan struct{})
	var closed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) {
		n := u.inFlight.Add(1)
		defer u.inFlight.Add(-1)
		for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
		}
		if n >= want && closed.CompareAndSwap(false, true) {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprintf(w, "call %s", r.URL.Query().Get("i"))
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/status/503", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Retry-After", "1")
		http.Error(w, "try later", http.StatusServiceUnavailable)
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

func startServerWithUpstream(t *testing.T, url string) *client {
	t.Helper()
	bc := tether.DefaultBackendConfig("http", url)
	bc.MaxConns = 16
	up, err := httpup.New(bc)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, func(cfg *tether.Config) { cfg.Backends["api"] = bc }, map[string]tether.Backend{"api": up})
	return dial(t, ts)
}

func TestServer_HTTP(t *testing.T) {
	up := newFanoutUpstream(t, 10)
	c := startServerWithUpstream(t, up.URL)

	rep := c.ok(wire.Request{ID: 1, Op: wire.OpHTTP, Backend: "api", Path: "/status/503"})
	if toUint(rep.Fields["status"]) != 503 || fmt.Sprint(rep.Fields["headers"].(map[string]any)["retry-after"]) != "[1]" ||
		string(rep.Fields["body"].([]byte)) != "try later\n" {
		t.Fatalf("a 503 is a reply: %v", rep.Fields)
	}
	errCode(t, c.do(wire.Request{ID: 2, Op: wire.OpHTTP, Backend: "api"}), tether.CodeBadRequest)                          // no path
	errCode(t, c.do(wire.Request{ID: 3, Op: wire.OpHTTP, Backend: "api", Path: "//evil.example/"}), tether.CodeBadRequest) // no open proxy
	errCode(t, c.do(wire.Request{ID: 4, Op: wire.OpHTTP, Backend: "main", Path: "/x"}), tether.CodeUnsupported)
	errCode(t, c.do(wire.Request{ID: 5, Op: wire.OpHTTP, Backend: "nope", Path: "/x"}), tether.CodeUnknownBackend)

	t.Run("BatchRunsCallsInParallel", func(t *testing.T) {
		ops := make([]wire.Request, 10)
		for i := range ops {
			ops[i] = wire.Request{Op: wire.OpHTTP, Backend: "api", Path: fmt.Sprintf("/wait?i=%d", i)}
		}
		start := time.Now()
		rep := c.ok(wire.Request{ID: 10, Op: wire.OpBatch, Ops: ops})
		for i, r := range rep.Fields["results"].([]any) {
			m := r.(map[string]any)
			if toUint(m["status"]) != 200 || string(m["body"].([]byte)) != fmt.Sprintf("call %d", i) {
				t.Fatalf("result %d: %v", i, m)
			}
		}
		if p := up.peak.Load(); p != 10 {
			t.Fatalf("at most %d calls were in flight at once (after %s), want 10", p, time.Since(start))
		}
	})

	t.Run("DeadlinesExpireMidway", func(t *testing.T) {
		// The batch deadline passes while the slow call runs: it times out, the
		// others keep their outcomes, in request order.
		rep := c.ok(wire.Request{ID: 20, Op: wire.OpBatch, TimeoutMS: 300, Ops: []wire.Request{
			{Op: wire.OpHTTP, Backend: "api", Path: "/sleep"},
			{Op: wire.OpQuery, SQL: "SELECT 7 AS n"},
			{Op: wire.OpHTTP, Backend: "api", Path: "/status/503"},
			{Op: wire.OpHTTP, Backend: "api", Path: "/sleep", TimeoutMS: 50},
			{Op: wire.OpHTTP, Backend: "api", Path: "http://evil.example/"},
		}})
		res := rep.Fields["results"].([]any)
		code := func(i int) any {
			e, _ := res[i].(map[string]any)["error"].(map[string]any)
			return e["code"]
		}
		if code(0) != "timeout" || fmt.Sprint(res[1].(map[string]any)["rows"]) != "[[7]]" ||
			toUint(res[2].(map[string]any)["status"]) != 503 || code(3) != "timeout" || code(4) != "bad_request" {
			t.Fatalf("results: %v", res)
		}
		// The server goes on serving the same upstream.
		rep = c.ok(wire.Request{ID: 21, Op: wire.OpHTTP, Backend: "api", Path: "/status/503"})
		if toUint(rep.Fields["status"]) != 503 {
			t.Fatalf("after the timeouts: %v", rep.Fields)
		}
	})
}
