// Package admin is tetherd's admin API (docs/operations.md, "Watching
// tetherd"): HTTP on a Unix socket of its own, and optionally loopback TCP,
// never on the PHP socket.
//
//	GET /metrics      Prometheus text format (the official client library)
//	GET /healthz      200 while the process serves
//	GET /readyz       200 when every backend is open and tetherd is not draining, else 503
//	GET /status       the status page: the same at a glance, for a browser
//	GET /status.json  the server's Snapshot, for the tether CLI and scripts
//	GET /clients.json the client connections (tether clients): peer pid/uid or address, requests, transactions
//	POST /reload      reload the config file (tether reload); the report, or the error that left everything as it was
//	POST /upgrade     start the tetherd binary anew and hand it the sockets (tether upgrade); answered once it serves
//
// Everything it shows is read when asked (server.Server.Snapshot): a scrape
// costs the requests being served nothing.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/server"
)

// Source is what the admin API shows: a running tetherd.
type Source interface {
	Snapshot() server.Snapshot
}

// ClientLister is a Source that can list its client connections; with one,
// the admin API serves GET /clients.json (tether clients).
type ClientLister interface {
	Clients(ctx context.Context) ([]server.ClientSnapshot, error)
}

// Reloader is a Source that can reload its config (tetherd's, from its
// file); with one, the admin API serves POST /reload.
type Reloader interface {
	Reload(ctx context.Context) (server.ReloadReport, error)
}

// Upgrader is a Source that can replace its process with a new one started
// from the binary on disk; with one, the admin API serves POST /upgrade.
type Upgrader interface {
	Upgrade(ctx context.Context) (UpgradeReport, error)
}

// UpgradeReport is the body of a successful POST /upgrade.
type UpgradeReport struct {
	OldPID int    `json:"old_pid"` // the process that answered, now handing its clients over
	Took   string `json:"took"`    // from the request until the new process served
}

// ReloadError is the body of a failed POST /reload or /upgrade.
type ReloadError struct {
	Error string `json:"error"`
}

// endpoints are the admin API's routes, for the errors that list them.
var endpoints = []string{"GET /metrics", "GET /healthz", "GET /readyz", "GET /status", "GET /status.json",
	"GET /clients.json", "POST /reload", "POST /upgrade"}

// Handler returns the admin API's routes for src.
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCollector(src))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		snap := src.Snapshot()
		switch {
		case snap.Draining:
			http.Error(w, "not ready: draining", http.StatusServiceUnavailable)
		case !snap.Ready:
			http.Error(w, "not ready: starting", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ready")
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Anything no route takes: say what there is.
		for _, ep := range endpoints {
			if method, path, _ := strings.Cut(ep, " "); path == r.URL.Path {
				if method == r.Method { // a route this source does not offer
					http.Error(w, fmt.Sprintf("%s is not served by this tetherd", ep), http.StatusNotFound)
					return
				}
				w.Header().Set("Allow", method)
				http.Error(w, fmt.Sprintf("%s %s: method not allowed; use %s", r.Method, r.URL.Path, ep), http.StatusMethodNotAllowed)
				return
			}
		}
		http.Error(w, fmt.Sprintf("no admin endpoint %s %s; there are: %s", r.Method, r.URL.Path, strings.Join(endpoints, ", ")), http.StatusNotFound)
	})
	mux.Handle("GET /status", &statusPage{src: src})
	mux.Handle("GET /{$}", http.RedirectHandler("/status", http.StatusFound))
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(src.Snapshot())
	})
	if cl, ok := src.(ClientLister); ok {
		mux.HandleFunc("GET /clients.json", func(w http.ResponseWriter, r *http.Request) {
			list, err := cl.Clients(r.Context())
			if err != nil {
				http.Error(w, "clients: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.Encode(list)
		})
	}
	if rl, ok := src.(Reloader); ok {
		mux.HandleFunc("POST /reload", action(func(ctx context.Context) (any, error) { return rl.Reload(ctx) }))
	}
	if up, ok := src.(Upgrader); ok {
		mux.HandleFunc("POST /upgrade", action(func(ctx context.Context) (any, error) { return up.Upgrade(ctx) }))
	}
	return mux
}

// action serves a POST that does something: its report as JSON, or 409 and
// the error that left everything as it was.
func action(do func(context.Context) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		rep, err := do(r.Context())
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			enc.Encode(ReloadError{Error: err.Error()})
			return
		}
		enc.Encode(rep)
	}
}

// Listener is the admin API serving on its sockets.
type Listener struct {
	srv    *http.Server
	socket string
	done   chan struct{}
}

// Listen serves the admin API for src on cfg's Unix socket and TCP address
// (either may be empty; both empty returns nil). A stale socket file left
// by an earlier tetherd is replaced; a live one is an error.
func Listen(cfg tether.AdminConfig, src Source) (*Listener, error) {
	return ListenWith(cfg, src, nil)
}

// ListenWith is Listen with the listeners made by listen (nil: made here),
// which may hand over those of the process this one replaces.
func ListenWith(cfg tether.AdminConfig, src Source, listen server.ListenFunc) (*Listener, error) {
	if cfg.Socket == "" && cfg.TCPListen == "" {
		return nil, nil
	}
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	if cfg.Socket != "" {
		ln, err := listen.Listen("unix", cfg.Socket, func(string, string) (net.Listener, error) {
			return listenUnix(cfg.Socket, cfg.SocketMode)
		})
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
	}
	if cfg.TCPListen != "" {
		ln, err := listen.Listen("tcp", cfg.TCPListen, net.Listen)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("admin: listen on %s: %w", cfg.TCPListen, err)
		}
		lns = append(lns, ln)
	}
	l := &Listener{socket: cfg.Socket, done: make(chan struct{}),
		srv: &http.Server{Handler: Handler(src), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}}
	served := make(chan struct{}, len(lns))
	for _, ln := range lns {
		go func() {
			l.srv.Serve(ln)
			served <- struct{}{}
		}()
	}
	go func() {
		for range lns {
			<-served
		}
		close(l.done)
	}()
	return l, nil
}

// HandOff stops the admin API like Close but leaves the socket file: it
// belongs to the process that took over.
func (l *Listener) HandOff(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.socket = ""
	return l.Close(ctx)
}

// Close stops the admin API (requests in flight get until ctx ends) and
// removes its socket file.
func (l *Listener) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	err := l.srv.Shutdown(ctx)
	<-l.done
	if l.socket != "" {
		os.Remove(l.socket)
	}
	return err
}

// listenUnix listens on path with mode (octal, "" keeps the umask's),
// replacing a socket file nobody answers on.
func listenUnix(path, mode string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("admin: %s exists and is not a socket: not removing it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin: %s is in use by a running process", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin: remove stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("admin: %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", path, err)
	}
	if mode != "" {
		m, err := strconv.ParseUint(mode, 8, 32)
		if err == nil {
			err = os.Chmod(path, os.FileMode(m))
		}
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("admin: socket mode %s: %w", mode, err)
		}
	}
	return ln, nil
}
