package admin

import (
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/tether-php/tether/server"
)

// The status page (GET /status): the Snapshot at a glance, for a person with a
// browser. One HTML document, no script, no external asset (the admin API may
// be reached over an SSH tunnel or from a host without internet access); it
// reloads itself every 5 s.

type pageData struct {
	server.Snapshot
	State    string
	Uptime   string
	HitRate  string
	Requests []pageRequest
	Now      string
}

type pageRequest struct {
	Op, Backend string
	Count       uint64
	Errors      uint64
	MeanMS      string
}

func (h *statusPage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s := h.src.Snapshot()
	d := pageData{Snapshot: s, State: "ready", HitRate: "-", Now: time.Now().UTC().Format(time.RFC3339)}
	switch {
	case s.Draining:
		d.State = "draining"
	case !s.Ready:
		d.State = "starting"
	}
	if !s.Started.IsZero() {
		d.Uptime = time.Since(s.Started).Round(time.Second).String()
	}
	if c := s.Cache; c != nil && c.Hits+c.Misses > 0 {
		d.HitRate = percent(c.Hits, c.Hits+c.Misses)
	}
	for _, r := range s.Requests {
		pr := pageRequest{Op: r.Op, Backend: r.Backend, Count: r.Count, Errors: r.Count - r.Outcomes["ok"], MeanMS: "-"}
		if r.Count > 0 {
			pr.MeanMS = ms(time.Duration(r.SumSeconds / float64(r.Count) * 1e9))
		}
		d.Requests = append(d.Requests, pr)
	}
	sort.Slice(d.Requests, func(i, j int) bool { return d.Requests[i].Count > d.Requests[j].Count })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	pageTemplate.Execute(w, d)
}

type statusPage struct{ src Source }

func percent(a, b uint64) string {
	return strconv.FormatFloat(100*float64(a)/float64(b), 'f', 1, 64) + "%"
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + " ms"
}

var pageTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"ms":   ms,
	"secs": func(s float64) string { return ms(time.Duration(s * 1e9)) },
	"when": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"day":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"lag":  func(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) + " s" },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>tetherd {{.State}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff;min-width:30em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.state-ready{color:#1a7f37}.state-draining,.state-starting{color:#b35900}
code{font-size:12px;white-space:pre-wrap;word-break:break-all}.muted{color:#777}
.grid{display:flex;gap:2em;flex-wrap:wrap}.client{white-space:nowrap}
.host-writes,.host-reads{color:#1a7f37}.host-shunned,.host-standby,.host-unprobed{color:#b35900}.host-unreachable{color:#c00}
</style></head><body>
<h1>tetherd <span class="state-{{.State}}">{{.State}}</span></h1>
<div class="muted">version {{.Version}}{{if .Uptime}} · up {{.Uptime}}{{end}} · {{.Now}} · reloads every 5 s</div>
<div class="grid">
<div><h2>Now</h2><table>
<tr><th>clients</th><td class="n" id="clients">{{.Clients}}</td></tr>
<tr><th>requests in flight</th><td class="n">{{.InFlight}}</td></tr>
<tr><th>transactions open</th><td class="n">{{.Transactions}}</td></tr>
<tr><th>event loop busy</th><td class="n">{{printf "%.3f" .EventLoop.BusySeconds}} s in {{.EventLoop.Turns}} turns</td></tr>
</table></div>
<div><h2>Result cache</h2>{{with .Cache}}<table>
<tr><th>hit rate</th><td class="n" id="hit-rate">{{$.HitRate}}</td></tr>
<tr><th>hits / misses</th><td class="n">{{.Hits}} / {{.Misses}}</td></tr>
<tr><th>merged reads</th><td class="n">{{.Merged}}</td></tr>
<tr><th>entries</th><td class="n">{{.Entries}} ({{.Bytes}} bytes)</td></tr>
<tr><th>evicted / expired</th><td class="n">{{.Evictions}} / {{.Expired}}</td></tr>
</table>{{else}}<p>off</p>{{end}}</div>
</div>
<h2>Pools</h2><table id="pools"><tr><th>backend</th><th>type</th><th>open</th><th>in use</th><th>idle</th><th>waits</th><th>resets</th><th>cache by table</th><th>max conns</th><th>min conns</th><th>acquire timeout</th><th>idle timeout</th><th>tx idle timeout</th><th>statement cache</th></tr>
{{range .Pools}}<tr><td>{{.Backend}}{{if .Retiring}} <span class="muted">(retiring)</span>{{end}}</td><td>{{.Type}}</td><td class="n">{{.Stats.Open}}</td><td class="n">{{.Stats.InUse}}</td><td class="n">{{.Stats.Idle}}</td><td class="n">{{.Stats.Waiting}}</td><td class="n">{{.Stats.Resets}}</td><td>{{if .CacheByTable}}yes{{else}}-{{end}}</td><td class="n max-conns">{{.Limits.MaxConns}}</td><td class="n">{{.Limits.MinConns}}</td><td class="n">{{.Limits.AcquireTimeout}}</td><td class="n">{{.Limits.IdleTimeout}}</td><td class="n">{{.Limits.TxIdleTimeout}}</td><td class="n">{{.Limits.StmtCacheSize}}</td></tr>
{{end}}</table>
{{range .Pools}}{{if .Topology}}{{$b := .Backend}}{{with .Topology}}<h2>Hosts of {{$b}}</h2>
<table class="hosts" id="hosts-{{$b}}"><tr><th>host</th><th>role</th><th>state</th><th>why</th><th>lag</th><th>position</th><th>checked</th><th>reads</th><th>writes</th><th>shunned</th><th>open</th><th>in use</th><th>waits</th></tr>
{{range .Hosts}}<tr><td>{{.Addr}}</td><td>{{.Role}}</td><td class="host-{{.State}}">{{.State}}</td><td>{{.Why}}</td><td class="n">{{if .LagKnown}}{{lag .LagSeconds}}{{else}}-{{end}}</td><td><code>{{.Position}}</code></td><td>{{if not .CheckedAt.IsZero}}{{when .CheckedAt}}{{else}}-{{end}}</td><td class="n">{{.Reads}}</td><td class="n">{{.Writes}}</td><td class="n">{{.Shunned}}</td><td class="n">{{.Pool.Open}}</td><td class="n">{{.Pool.InUse}}</td><td class="n">{{.Pool.Waiting}}</td></tr>
{{end}}</table>
<p>reads after a client's own write: {{.CausalPrimary}} on the primary, {{.CausalReplica}} on a replica that had it · waits for a primary: {{.PrimaryWaits}} ({{.PrimaryWaitTimeouts}} timed out) · failovers: {{.FailoversTotal}}</p>
{{if .Failovers}}<table class="failovers" id="failovers-{{$b}}"><tr><th>when</th><th>from</th><th>to</th><th>what the hosts said</th></tr>
{{range .Failovers}}<tr><td>{{day .At}}</td><td>{{or .From "(none)"}}</td><td>{{or .To "(none)"}}</td><td>{{.Why}}</td></tr>
{{end}}</table>{{end}}{{end}}{{end}}{{end}}
<h2>Most frequent operations</h2>{{if .Requests}}<table id="requests"><tr><th>operation</th><th>backend</th><th>requests</th><th>errors</th><th>mean</th></tr>
{{range .Requests}}<tr><td>{{.Op}}</td><td>{{.Backend}}</td><td class="n">{{.Count}}</td><td class="n">{{.Errors}}</td><td class="n">{{.MeanMS}}</td></tr>
{{end}}</table>{{else}}<p class="muted">none yet</p>{{end}}
<h2>Most frequent statements</h2>{{if .Frequent}}<table id="frequent"><tr><th>runs (est.)</th><th>errors (est.)</th><th>mean</th><th>backend</th><th>SQL</th></tr>
{{range .Frequent}}<tr><td class="n">{{.Count}}</td><td class="n">{{.Errors}}</td><td class="n">{{secs .MeanSeconds}}</td><td>{{.Backend}}</td><td><code>{{.SQL}}</code></td></tr>
{{end}}</table><p class="muted">Estimated from one statement in 16.</p>{{else}}<p class="muted">none yet</p>{{end}}
<h2>Slowest statements</h2>{{if .Slowest}}<table id="slowest"><tr><th>took</th><th>when</th><th>operation</th><th>backend</th><th>result</th><th>SQL</th><th>client</th></tr>
{{range .Slowest}}<tr><td class="n">{{ms .Took}}</td><td>{{when .At}}</td><td>{{.Op}}</td><td>{{.Backend}}</td><td>{{.Code}}</td><td><code>{{.SQL}}</code></td><td class="client">{{with .Client}}{{.}}{{end}}</td></tr>
{{end}}</table>{{else}}<p class="muted">none yet</p>{{end}}
<h2>Recent errors</h2>{{if .RecentErrors}}<table id="errors"><tr><th>when</th><th>operation</th><th>backend</th><th>code</th><th>message</th><th>SQL</th><th>client</th></tr>
{{range .RecentErrors}}<tr><td>{{when .At}}</td><td>{{.Op}}</td><td>{{.Backend}}</td><td>{{.Code}}</td><td>{{.Message}}</td><td><code>{{.SQL}}</code></td><td class="client">{{with .Client}}{{.}}{{end}}</td></tr>
{{end}}</table>{{else}}<p class="muted">none</p>{{end}}
</body></html>
`))
