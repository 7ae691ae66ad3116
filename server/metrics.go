package server

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// Request metrics (the admin API's tether_requests_total and
// tether_request_duration_seconds): counts by operation, backend and outcome,
// and latency histograms by operation and backend, in fixed arrays of
// atomics: observing a request takes two clock reads (arrival, answer), three
// atomic adds and the load of recent.slowFloor, no lock and no allocation; only
// a failed request, or one among the slowest so far, takes recent's lock.

// latencyBuckets are the histograms' upper bounds, in seconds: a local round
// trip is tens of microseconds, a page's slow query seconds.
var latencyBuckets = [...]float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 5}

// outcomes are the result labels: "ok", then every error code.
var outcomes = [...]tether.Code{"ok", tether.CodeBadFrame, tether.CodeTooLarge, tether.CodeBadRequest, tether.CodeUnknownOp, tether.CodeUnknownBackend, tether.CodeUnknownTx,
	tether.CodeUnknownTable, tether.CodeUnauthorized, tether.CodeBackendError, tether.CodeUnavailable, tether.CodeBusy, tether.CodeTimeout, tether.CodeTxAborted,
	tether.CodeUnsupported, tether.CodeInternal}

// numOps bounds the ops counted (wire.Op values).
const numOps = int(wire.OpJoin) + 1

type metricCell struct {
	outcomes [len(outcomes)]atomic.Uint64
	buckets  [len(latencyBuckets) + 1]atomic.Uint64 // the last: over every bound
	sumNanos atomic.Uint64
}

// telemetry is what the server keeps of its requests for operators.
type telemetry struct {
	metrics  *requestMetrics // requests by operation, backend and outcome
	recent   recent          // the last errors and the slowest statements
	frequent frequent        // the most frequent statements, sampled (statements.go)
}

// requestMetrics counts requests by operation and backend. Its table only
// grows: a reload that adds a backend adds its cells (counters must not go
// back), one that removes a backend keeps them.
type requestMetrics struct {
	mu    sync.Mutex // serializes addBackends
	table atomic.Pointer[metricTable]
}

type metricTable struct {
	backend map[string]int        // backend name -> index from 1; 0: none (ping, batch, join, an unknown name)
	names   []string              // by index
	cells   []*[numOps]metricCell // by index
}

func newRequestMetrics(backends []string) *requestMetrics {
	m := &requestMetrics{}
	m.table.Store(&metricTable{backend: map[string]int{}, names: []string{""}, cells: []*[numOps]metricCell{new([numOps]metricCell)}})
	m.addBackends(backends)
	return m
}

// addBackends adds cells for the names it has none for yet.
func (m *requestMetrics) addBackends(names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.table.Load()
	t := &metricTable{backend: make(map[string]int, len(old.backend)+len(names)),
		names: append([]string(nil), old.names...), cells: append([]*[numOps]metricCell(nil), old.cells...)}
	for k, v := range old.backend {
		t.backend[k] = v
	}
	for _, name := range names {
		if _, ok := t.backend[name]; ok {
			continue
		}
		t.backend[name] = len(t.names)
		t.names = append(t.names, name)
		t.cells = append(t.cells, new([numOps]metricCell))
	}
	m.table.Store(t)
}

// observed counts a request in the metrics, keeps it among the recent errors
// or the slowest statements when it is one (the status page, naming ss's
// client; ss may be nil), and, past log.slow_statement, logs it. It returns
// the request's time, for its reply's head. Safe from any goroutine.
func (s *Server) observed(ss *session, op wire.Op, backend, sql string, err error, start time.Time) time.Duration {
	d := s.metrics.observe(op, backend, err, start)
	s.frequent.note(backend, sql, err, d)
	if err != nil || d > time.Duration(s.recent.slowFloor.Load()) {
		var client *ClientRef
		if ss != nil {
			c := ss.client // a copy: a pointer into ss would keep the whole session alive
			client = &c
		}
		s.recent.note(op, backend, sql, client, err, start, d)
	}
	if slow := time.Duration(s.set.Load().slowNanos); slow > 0 && d >= slow {
		if len(sql) > 1024 {
			sql = sql[:1024] + "..."
		}
		code := "ok"
		if err != nil {
			code = string(tether.AsError(err).Code)
		}
		s.log.Warn("slow statement", "op", op.String(), "backend", backend, "took", d.Round(time.Microsecond),
			"code", code, "sql", sql)
	}
	return d
}

// observe counts one request of op on backend ("" for none) that ended with
// err (nil: ok) and began at start, and returns how long it took. Safe from
// any goroutine.
func (m *requestMetrics) observe(op wire.Op, backend string, err error, start time.Time) time.Duration {
	d := time.Since(start)
	if int(op) >= numOps {
		return d
	}
	t := m.table.Load()
	cell := &t.cells[t.backend[backend]][op]
	o := 0
	if err != nil {
		code := tether.AsError(err).Code
		o = len(outcomes) - 1 // internal, for a code not listed
		for i, c := range outcomes {
			if c == code {
				o = i
				break
			}
		}
	}
	cell.outcomes[o].Add(1)
	secs := d.Seconds()
	b := len(latencyBuckets)
	for i, bound := range latencyBuckets {
		if secs <= bound {
			b = i
			break
		}
	}
	cell.buckets[b].Add(1)
	cell.sumNanos.Add(uint64(d))
	return d
}

// recent keeps, for the status page, the last errors and the slowest
// statements since tetherd started. Requests reach its lock only when they
// failed or were slower than the slowest kept (slowFloor).
type recent struct {
	slowFloor atomic.Int64 // nanoseconds: a request faster than this is not among the slowest
	mu        sync.Mutex
	errors    []Event // the last maxRecent, oldest first
	slowest   []Event // the maxRecent slowest, slowest first
}

// maxRecent bounds each list.
const maxRecent = 20

// Event is a request as the status page shows it.
type Event struct {
	At      time.Time     `json:"at"`
	Op      string        `json:"op"`
	Backend string        `json:"backend,omitempty"`
	SQL     string        `json:"sql,omitempty"` // cut at 512 bytes
	Took    time.Duration `json:"took_ns"`
	Code    string        `json:"code"`
	Message string        `json:"message,omitempty"`
	// Client: the connection it came from (nil for none: a batch's total).
	Client *ClientRef `json:"client,omitempty"`
}

func (r *recent) note(op wire.Op, backend, sql string, client *ClientRef, err error, start time.Time, d time.Duration) {
	if len(sql) > 512 {
		sql = sql[:512] + "..."
	}
	ev := Event{At: start, Op: op.String(), Backend: backend, SQL: sql, Took: d, Code: "ok", Client: client}
	if err != nil {
		e := tether.AsError(err)
		ev.Code, ev.Message = string(e.Code), e.Error()
		if len(ev.Message) > 512 {
			ev.Message = ev.Message[:512] + "..."
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if len(r.errors) == maxRecent {
			copy(r.errors, r.errors[1:])
			r.errors = r.errors[:maxRecent-1]
		}
		r.errors = append(r.errors, ev)
	}
	if d > time.Duration(r.slowFloor.Load()) {
		i := sort.Search(len(r.slowest), func(i int) bool { return r.slowest[i].Took < d })
		r.slowest = append(r.slowest, Event{})
		copy(r.slowest[i+1:], r.slowest[i:])
		r.slowest[i] = ev
		if len(r.slowest) > maxRecent {
			r.slowest = r.slowest[:maxRecent]
		}
		if len(r.slowest) == maxRecent {
			r.slowFloor.Store(int64(r.slowest[maxRecent-1].Took))
		}
	}
}

func (r *recent) snapshot() (errors, slowest []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	errors = make([]Event, len(r.errors))
	for i, e := range r.errors { // newest first
		errors[len(r.errors)-1-i] = e
	}
	return errors, append([]Event(nil), r.slowest...)
}

// RequestStats is one operation's requests on one backend.
type RequestStats struct {
	Op      string `json:"op"`
	Backend string `json:"backend,omitempty"`
	// Outcomes counts them by result: "ok" or the error code.
	Outcomes map[string]uint64 `json:"outcomes"`
	Count    uint64            `json:"count"`
	// Buckets are the histogram's cumulative counts by upper bound
	// (seconds), as Prometheus wants them; SumSeconds their total time.
	Buckets    map[float64]uint64 `json:"-"`
	SumSeconds float64            `json:"sum_seconds"`
}

// snapshot returns the cells that counted anything.
func (m *requestMetrics) snapshot() []RequestStats {
	var out []RequestStats
	t := m.table.Load()
	for op := 0; op < numOps; op++ {
		for bi, name := range t.names {
			cell := &t.cells[bi][op]
			// The histogram's buckets are read first and give the count, so
			// that no bucket exceeds it while requests are being counted.
			buckets := make(map[float64]uint64, len(latencyBuckets))
			var cum uint64
			for i, bound := range latencyBuckets {
				cum += cell.buckets[i].Load()
				buckets[bound] = cum
			}
			count := cum + cell.buckets[len(latencyBuckets)].Load()
			if count == 0 {
				continue
			}
			counts := map[string]uint64{}
			for i := range outcomes {
				if n := cell.outcomes[i].Load(); n > 0 {
					counts[string(outcomes[i])] = n
				}
			}
			out = append(out, RequestStats{Op: wire.Op(op).String(), Backend: name, Outcomes: counts, Count: count,
				Buckets: buckets, SumSeconds: float64(cell.sumNanos.Load()) / 1e9})
		}
	}
	return out
}
