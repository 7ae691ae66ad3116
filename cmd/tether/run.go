package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/server"
	"github.com/tether-php/tether/wire"
)

// Main is the tether command: flags, and one subcommand per run.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
}

// NewMain returns a Main wired to the process's streams.
func NewMain() *Main { return &Main{Stdout: os.Stdout, Stderr: os.Stderr} }

// Run parses args and runs the subcommand they name.
func (m *Main) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tether", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	configPath := fs.String("config", "", "tetherd's config file: where its sockets are (default: the embedded default's)")
	adminSocket := fs.String("admin", "", "tetherd's admin socket (default: from -config, else env TETHER_ADMIN_SOCKET, else var/tether-admin.sock)")
	socket := fs.String("socket", "", "tetherd's PHP socket, for ping and query (default: from -config, else env TETHER_SOCKET, else var/tether.sock)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for tetherd (reload: 30s, upgrade: 90s unless set)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tether [flags] status|pools|clients|stats|reload|upgrade|ping|query [-backend NAME] SQL [PARAM...]\n       tether check [--connect] CONFIG\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if cmd == "check" {
		return m.check(ctx, rest)
	}
	cfg := tether.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = tether.ReadConfigFile(*configPath); err != nil {
			return err
		}
	}
	admin := firstOf(*adminSocket, pick(*configPath != "", cfg.Admin.SocketPath(cfg.Server), ""), os.Getenv("TETHER_ADMIN_SOCKET"),
		cfg.Admin.SocketPath(cfg.Server))
	php := firstOf(*socket, pick(*configPath != "", cfg.Server.Socket, ""), os.Getenv("TETHER_SOCKET"), cfg.Server.Socket)
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	if !timeoutSet {
		// tetherd may take this long itself: new backends to open (reload,
		// 20 s), a new process to get ready (upgrade, 60 s).
		switch cmd {
		case "reload":
			*timeout = 30 * time.Second
		case "upgrade":
			*timeout = 90 * time.Second
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch cmd {
	case "status", "pools", "stats":
		if admin == "" {
			return errors.New("no admin socket: set -admin, or admin.socket in tetherd's config")
		}
		snap, raw, err := fetchStatus(ctx, admin)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := m.Stdout.Write(raw)
			return err
		}
		switch cmd {
		case "status":
			m.printStatus(snap)
		case "pools":
			m.printPools(snap)
		default:
			m.printCache(snap)
		}
		return nil
	case "clients":
		if admin == "" {
			return errors.New("no admin socket: set -admin, or admin.socket in tetherd's config")
		}
		return m.clients(ctx, admin, *asJSON)
	case "reload":
		if admin == "" {
			return errors.New("no admin socket: set -admin, or admin.socket in tetherd's config")
		}
		return m.reload(ctx, admin, *asJSON)
	case "upgrade":
		if admin == "" {
			return errors.New("no admin socket: set -admin, or admin.socket in tetherd's config")
		}
		return m.upgrade(ctx, admin, *asJSON)
	case "ping":
		return m.ping(ctx, php, admin, *asJSON)
	case "query":
		return m.query(ctx, php, rest, *asJSON)
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

// check is `tether check [--connect] CONFIG`: it runs `tetherd -check
// [-connect] -config CONFIG`, which validates the config, builds every backend
// (each DSN and option parsed, each file read) and with -connect logs in to
// each, printing a line per backend. The backends are tetherd's to build:
// this tool links none of them (SQLite's driver needs cgo, and all six would
// make a small admin tool seven times its size), so it finds the tetherd
// binary: -tetherd, else $TETHERD, else the tetherd beside this binary, else
// the one on PATH. It fails when tetherd -check fails, or cannot be run.
func (m *Main) check(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tether check", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	connect := fs.Bool("connect", false, "also log in to each backend (one connection each, closed at once)")
	tetherd := fs.String("tetherd", "", "the tetherd binary to check with (default: $TETHERD, else beside tether, else on PATH)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tether check [--connect] [--tetherd PATH] CONFIG\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := fs.Arg(0)
	if fs.NArg() > 1 { // flags after the file: tether check CONFIG --connect
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	} else {
		fs.Parse(nil)
	}
	if path == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("usage: tether check [--connect] CONFIG")
	}
	bin, err := findTetherd(*tetherd)
	if err != nil {
		return err
	}
	argv := []string{"-check"}
	if *connect {
		argv = append(argv, "-connect")
	}
	cmd := exec.CommandContext(ctx, bin, append(argv, "-config", path)...)
	cmd.Stdout, cmd.Stderr = m.Stdout, m.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("check %s: %s %s: %w", path, bin, strings.Join(argv, " "), err)
	}
	fmt.Fprintf(m.Stdout, "%s: config ok\n", path)
	return nil
}

// findTetherd returns the tetherd binary tether check runs: flag, else
// $TETHERD, else a tetherd beside this binary, else one on PATH.
func findTetherd(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if p := os.Getenv("TETHERD"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "tetherd")
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	p, err := exec.LookPath("tetherd")
	if err != nil {
		return "", fmt.Errorf("find tetherd for tether check (give -tetherd PATH or set TETHERD): %w", err)
	}
	return p, nil
}

// adminClient is an HTTP client whose every request goes to the admin socket.
func adminClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

func adminGet(ctx context.Context, socket, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://tetherd"+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := adminClient(socket).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("admin socket %s: %w (is tetherd running, with admin.socket on?)", socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// adminPost POSTs to path on the admin socket and returns the body of a 200
// answer, or the error the answer gives.
func adminPost(ctx context.Context, socket, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://tetherd"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := adminClient(socket).Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w (is tetherd running, with admin.socket on?)", socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, errors.New(e.Error)
		}
		return nil, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// upgrade asks tetherd to start its binary anew and hand it the sockets, and
// prints which process serves now.
func (m *Main) upgrade(ctx context.Context, socket string, asJSON bool) error {
	b, err := adminPost(ctx, socket, "/upgrade")
	if err != nil {
		return err
	}
	var rep struct {
		OldPID int    `json:"old_pid"`
		Took   string `json:"took"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("/upgrade: %w", err)
	}
	// The admin socket is the new process's now (the old one stops
	// accepting on it a moment after its answer).
	var snap server.Snapshot
	for {
		snap, _, err = fetchStatus(ctx, socket)
		if err != nil {
			return fmt.Errorf("upgraded, but the new tetherd does not answer: %w", err)
		}
		if snap.PID != rep.OldPID {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("upgraded, but pid %d still answers on %s", rep.OldPID, socket)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if asJSON {
		return json.NewEncoder(m.Stdout).Encode(map[string]any{"old_pid": rep.OldPID, "new_pid": snap.PID, "version": snap.Version, "took": rep.Took})
	}
	fmt.Fprintf(m.Stdout, "upgraded in %s: tetherd %s (pid %d) serves; pid %d hands its clients over and exits\n",
		rep.Took, snap.Version, snap.PID, rep.OldPID)
	return nil
}

// reload asks tetherd to reload its config file, and prints what changed.
func (m *Main) reload(ctx context.Context, socket string, asJSON bool) error {
	b, err := adminPost(ctx, socket, "/reload")
	if err != nil {
		return err
	}
	if asJSON {
		_, err := m.Stdout.Write(b)
		return err
	}
	var rep server.ReloadReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("/reload: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "reloaded\tin %s\n", rep.Took)
	for _, row := range []struct {
		what  string
		names []string
	}{{"added", rep.Added}, {"changed", rep.Changed}, {"removed", rep.Removed}, {"unchanged", rep.Unchanged},
		{"need a restart", rep.NeedRestart}} {
		if len(row.names) > 0 {
			fmt.Fprintf(tw, "%s\t%s\n", row.what, strings.Join(row.names, ", "))
		}
	}
	return tw.Flush()
}

func fetchStatus(ctx context.Context, socket string) (server.Snapshot, []byte, error) {
	var snap server.Snapshot
	code, b, err := adminGet(ctx, socket, "/status.json")
	if err != nil {
		return snap, nil, err
	}
	if code != http.StatusOK {
		return snap, nil, fmt.Errorf("/status.json: HTTP %d: %s", code, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &snap); err != nil {
		return snap, nil, fmt.Errorf("/status.json: %w", err)
	}
	return snap, b, nil
}

func (m *Main) printStatus(s server.Snapshot) {
	state := "ready"
	switch {
	case s.Draining:
		state = "draining"
	case !s.Ready:
		state = "starting"
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "tetherd\t%s\n", s.Version)
	fmt.Fprintf(tw, "state\t%s\n", state)
	if !s.Started.IsZero() {
		fmt.Fprintf(tw, "up\t%s (since %s)\n", time.Since(s.Started).Round(time.Second), s.Started.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "clients\t%d\n", s.Clients)
	fmt.Fprintf(tw, "requests in flight\t%d\n", s.InFlight)
	fmt.Fprintf(tw, "transactions open\t%d\n", s.Transactions)
	tw.Flush()
	fmt.Fprintln(m.Stdout)
	m.printPools(s)
	fmt.Fprintln(m.Stdout)
	m.printCache(s)
}

func (m *Main) printPools(s server.Snapshot) {
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTYPE\tOPEN\tIN USE\tIDLE\tWAITS\tRESETS\tCACHE BY TABLE\tMAX\tMIN\tACQUIRE\tIDLE TIMEOUT\tTX IDLE\tSTMT CACHE\t")
	for _, p := range s.Pools {
		byTable := "-"
		if s.Cache != nil && p.TableAware {
			byTable = pick(p.CacheByTable, "yes", "no")
		}
		name := p.Backend
		if p.Retiring {
			name += " (retiring)"
		}
		l := p.Limits
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t\n", name, p.Type, p.Stats.Open, p.Stats.InUse, p.Stats.Idle,
			p.Stats.Waiting, p.Stats.Resets, byTable, l.MaxConns, l.MinConns, l.AcquireTimeout, l.IdleTimeout, l.TxIdleTimeout, l.StmtCacheSize)
	}
	tw.Flush()
	for _, p := range s.Pools {
		if p.Topology != nil {
			fmt.Fprintln(m.Stdout)
			m.printTopology(p.Backend, p.Topology)
		}
	}
}

// printTopology prints a replicated backend's hosts (what each says it is,
// what routing does with it, its lag and routed requests), its routing
// counters and its failovers, oldest first.
func (m *Main) printTopology(backend string, t *tether.TopologyStats) {
	fmt.Fprintf(m.Stdout, "%s: hosts\n", backend)
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOST\tROLE\tSTATE\tLAG\tREADS\tWRITES\tSHUNNED\tOPEN\tIN USE\tCHECKED\tWHY\t")
	for _, h := range t.Hosts {
		lag, checked := "-", "-"
		if h.LagKnown {
			lag = fmt.Sprintf("%.3fs", h.LagSeconds)
		}
		if !h.CheckedAt.IsZero() {
			checked = h.CheckedAt.UTC().Format("15:04:05.000")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", h.Addr, h.Role, h.State, lag, h.Reads, h.Writes,
			h.Shunned, h.Pool.Open, h.Pool.InUse, checked, pick(h.Why != "", h.Why, "-"))
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "  reads after a client's write: %d on the primary, %d on a replica that had it\n", t.CausalPrimary, t.CausalReplica)
	fmt.Fprintf(m.Stdout, "  waits for a primary: %d (%d timed out)\n", t.PrimaryWaits, t.PrimaryWaitTimeouts)
	fmt.Fprintf(m.Stdout, "  failovers: %d\n", t.FailoversTotal)
	if len(t.Failovers) == 0 {
		return
	}
	if uint64(len(t.Failovers)) < t.FailoversTotal {
		fmt.Fprintf(m.Stdout, "  the last %d:\n", len(t.Failovers))
	}
	tw = tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	for _, f := range t.Failovers {
		fmt.Fprintf(tw, "    %s\t%s -> %s\t%s\n", f.At.UTC().Format("2006-01-02 15:04:05.000"), pick(f.From != "", f.From, "(none)"),
			pick(f.To != "", f.To, "(none)"), f.Why)
	}
	tw.Flush()
}

// clients prints tetherd's client connections.
func (m *Main) clients(ctx context.Context, socket string, asJSON bool) error {
	code, b, err := adminGet(ctx, socket, "/clients.json")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/clients.json: HTTP %d: %s", code, strings.TrimSpace(string(b)))
	}
	if asJSON {
		_, err := m.Stdout.Write(b)
		return err
	}
	var list []server.ClientSnapshot
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("/clients.json: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONN\tPEER\tCONNECTED\tIDLE\tREQUESTS\tIN FLIGHT\tTX\t")
	now := time.Now()
	for _, c := range list {
		peer := c.Addr
		if !c.TCP {
			peer = fmt.Sprintf("pid %d (uid %d)", c.PID, c.UID)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t\n", c.Conn, peer, now.Sub(c.Connected).Round(time.Second),
			now.Sub(c.LastActive).Round(time.Second), c.Requests, c.InFlight, c.Transactions)
	}
	fmt.Fprintf(tw, "%d clients\n", len(list))
	return tw.Flush()
}

func (m *Main) printCache(s server.Snapshot) {
	c := s.Cache
	if c == nil {
		fmt.Fprintln(m.Stdout, "result cache: off")
		return
	}
	rate := "-"
	if n := c.Hits + c.Misses; n > 0 {
		rate = fmt.Sprintf("%.1f%%", 100*float64(c.Hits)/float64(n))
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "result cache\t%d entries, %d bytes\n", c.Entries, c.Bytes)
	fmt.Fprintf(tw, "hits / misses\t%d / %d (hit rate %s)\n", c.Hits, c.Misses, rate)
	fmt.Fprintf(tw, "merged reads\t%d\n", c.Merged)
	fmt.Fprintf(tw, "stored / evicted / expired\t%d / %d / %d\n", c.Stores, c.Evictions, c.Expired)
	fmt.Fprintf(tw, "invalidations\t%s\n", counts(c.Invalidations))
	fmt.Fprintf(tw, "not stored\t%s\n", counts(c.Refused))
	tw.Flush()
}

// counts formats a map of counters as "a 1, b 2", by name.
func counts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// ping times a round trip on the PHP socket and asks /readyz.
func (m *Main) ping(ctx context.Context, php, admin string, asJSON bool) error {
	c, err := dial(ctx, php)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	rep, err := roundTrip(c, &wire.Request{ID: 1, Op: wire.OpPing})
	rtt := time.Since(start)
	if err != nil {
		return err
	}
	if e := rep.Error(); e != nil {
		return fmt.Errorf("ping: %v", e)
	}
	ready := "unknown (no admin socket)"
	if admin != "" {
		if code, b, err := adminGet(ctx, admin, "/readyz"); err == nil {
			ready = strings.TrimSpace(string(b))
			_ = code
		}
	}
	if asJSON {
		return json.NewEncoder(m.Stdout).Encode(map[string]any{"socket": php, "rtt_us": rtt.Microseconds(), "readyz": ready})
	}
	fmt.Fprintf(m.Stdout, "pong from %s in %s; %s\n", php, rtt.Round(time.Microsecond), ready)
	return nil
}

// query runs one SQL statement on the PHP socket and prints its rows.
func (m *Main) query(ctx context.Context, php string, args []string, asJSON bool) error {
	fs := flag.NewFlagSet("tether query", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	backend := fs.String("backend", "", "the backend (default: tetherd's default_backend)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: tether query [-backend NAME] SQL [PARAM...]")
	}
	params := make([]any, 0, fs.NArg()-1)
	for _, p := range fs.Args()[1:] {
		params = append(params, p)
	}
	c, err := dial(ctx, php)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := roundTrip(c, &wire.Request{ID: 1, Op: wire.OpQuery, Backend: *backend, SQL: fs.Arg(0), Params: params})
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(m.Stdout).Encode(rep.Fields)
	}
	if e := rep.Error(); e != nil {
		return fmt.Errorf("%v: %v", e["code"], e["message"])
	}
	cols, _ := rep.Fields["columns"].([]any)
	rows, _ := rep.Fields["rows"].([]any)
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	for i, col := range cols {
		fmt.Fprint(tw, pick(i > 0, "\t", ""), col)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, v := range r.([]any) {
			if v == nil {
				v = "NULL"
			}
			fmt.Fprint(tw, pick(i > 0, "\t", ""), v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "(%d rows)\n", len(rows))
	return nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("tetherd's socket %s: %w", socket, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	return c, nil
}

// roundTrip sends one request frame and reads its reply (docs/protocol.md).
func roundTrip(c net.Conn, r *wire.Request) (*wire.Reply, error) {
	b, st := wire.BeginFrame(nil)
	if _, err := c.Write(wire.EndFrame(wire.AppendRequest(b, r), st)); err != nil {
		return nil, err
	}
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(c, p); err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	return wire.DecodeReply(p)
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}
