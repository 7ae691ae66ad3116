package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/cloudflare/tableflip"
	"github.com/coreos/go-systemd/v22/daemon"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/admin"
	"github.com/tether-php/tether/server"
)

// Main is tetherd's program: flags, config, signals, and the server's lifecycle.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Signals delivers the shutdown signals; tests may replace it.
	Signals chan os.Signal
	// Upgrades: the process can be replaced by a new one that inherits its
	// sockets (SIGUSR2, tether upgrade). Only one per process: off in tests
	// that run several Mains.
	Upgrades bool
	// OnReady, when set, is called once tetherd is ready (when it tells
	// systemd so): its PHP and admin sockets listen and its pid file is
	// written. Tests wait on it rather than poll for the socket file.
	OnReady func()
}

// NewMain returns a Main wired to the process's streams and signals.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Upgrades: true}
}

// upgradeTimeout bounds how long a new process may take to serve before an
// upgrade is given up (and the old process goes on as before).
const upgradeTimeout = 60 * time.Second

// Run parses args, loads the config (the embedded default when none is
// given), opens the backends, serves until SIGTERM or SIGINT, then drains
// within the configured grace period. A second signal exits at once.
//
// With -check it validates the config and builds every backend (each DSN
// and option parsed, each file read, nothing connected), prints what it found
// and exits; with -check -connect it also logs in to each backend. Either
// returns an error naming every backend that failed.
//
// An error that ends a run once the log is set up (a backend refusing the
// login at start, a socket in use) is also logged, at error level, to
// log.file when one is configured: main prints it to standard error too.
func (m *Main) Run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("tetherd", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	configPath := fs.String("config", "", "path of the TOML config file; none runs the embedded default (SQLite at ./var/tether.db, socket ./var/tether.sock)")
	check := fs.Bool("check", false, "validate the config and build every backend (parse each DSN and option, read TLS files; connect nothing), then exit")
	connect := fs.Bool("connect", false, "with -check: also log in to each backend, and say which failed and why")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tetherd [-config FILE] [-check [-connect]]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *connect && !*check {
		return errors.New("-connect goes with -check: tetherd -check -connect")
	}

	cfg := tether.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = tether.ReadConfigFile(*configPath); err != nil {
			return err
		}
	}
	if err := cfg.Validate(); err != nil {
		if !*check {
			logToFile(cfg.Log, "start failed: invalid config", err)
		}
		return err
	}
	if *check {
		return checkBackends(ctx, m.Stdout, &cfg, *connect)
	}
	logOut := io.Writer(m.Stderr)
	var logFile *reopenFile
	if cfg.Log.File != "" {
		f, err := openLogFile(cfg.Log.File)
		if err != nil {
			return err
		}
		defer f.Close()
		logFile, logOut = f, f
	}
	level := new(slog.LevelVar)
	level.UnmarshalText([]byte(cfg.Log.Level))
	log := newLogger(logOut, cfg.Log, level)
	slog.SetDefault(log) // backends log through it too
	isReady := false
	if logFile != nil {
		// Where the operator looks: the PHP side only sees that tetherd is
		// not there, and standard error may go nowhere anyone reads.
		defer func() {
			if err == nil {
				return
			}
			if isReady {
				log.Error("tetherd exits on an error", "err", err)
			} else {
				log.Error("start failed", "err", err)
			}
		}()
	}
	if *configPath == "" {
		log.Info("no -config given: running the embedded default", "sqlite", tether.DefaultSQLitePath, "socket", cfg.Server.AbsSocket())
	}
	if err := os.MkdirAll(dirOf(cfg.Server.Socket), 0o755); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}

	if os.Getenv("GOMAXPROCS") == "" && cfg.Server.MaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.Server.MaxProcs)
	}

	// A binary upgrade (docs/operations.md): the new process, started by
	// the old one with tableflip, inherits the listening sockets; tableflip
	// is the field's library for it (Cloudflare's), and passes the
	// descriptors and the readiness handshake between the two.
	var upg *tableflip.Upgrader
	var upgraded <-chan struct{} // closed once a new process serves in this one's place
	ready := false
	var listen server.ListenFunc
	if m.Upgrades {
		var err error
		if upg, err = tableflip.New(tableflip.Options{UpgradeTimeout: upgradeTimeout}); err != nil {
			return fmt.Errorf("upgrades: %w", err)
		}
		// Stopped on the way out, which removes the socket files it knows,
		// unless this is a new process that never got ready: the sockets
		// are its parent's, which goes on serving on them.
		defer func() {
			if ready || !upg.HasParent() {
				upg.Stop()
			}
		}()
		upgraded, listen = upg.Exit(), upg.ListenWithCallback
		if upg.HasParent() {
			log.Info("started by an upgrade: taking over the sockets of the running tetherd")
		}
	}

	backends, err := cfg.NewBackends()
	if err != nil {
		return err
	}
	srv := server.New(cfg, backends, log)
	srv.ListenWith = listen
	openCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = srv.Open(openCtx)
	cancel()
	if err != nil {
		return err
	}
	// The admin API goes when a shutdown's drain begins (with the socket
	// files, see below), or to the new process after an upgrade.
	adminCfg := cfg.Admin
	adminCfg.Socket = cfg.Admin.SocketPath(cfg.Server)
	if adminCfg.Socket != "" {
		if err := os.MkdirAll(dirOf(adminCfg.Socket), 0o755); err != nil {
			shutdownNow(srv)
			return fmt.Errorf("create admin socket directory: %w", err)
		}
	}
	ctl := &control{srv: srv, path: *configPath, level: level, log: log, upg: upg}
	adm, err := admin.ListenWith(adminCfg, ctl, listen)
	if err != nil {
		shutdownNow(srv)
		return err
	}
	handedOff := false
	defer func() {
		if handedOff {
			return
		}
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		adm.Close(actx)
		cancel()
	}()
	pid, err := preparePIDFile(cfg.Server.PIDFile)
	if err != nil {
		shutdownNow(srv)
		return err
	}
	defer func() {
		if !handedOff { // else the file is the new process's
			pid.remove()
		}
	}()
	if upg != nil {
		// The parent, if any, hands its clients over from here on.
		if err := upg.Ready(); err != nil {
			shutdownNow(srv)
			return fmt.Errorf("upgrades: %w", err)
		}
		ready = true
	}
	// systemd (Type=notify, NotifyAccess=all): ready, and after an upgrade
	// this process is the service's main one.
	daemon.SdNotify(false, fmt.Sprintf("READY=1\nMAINPID=%d", os.Getpid()))
	isReady = true
	if err := pid.commit(); err != nil {
		// The sockets may be this process's alone by now (an upgrade's
		// parent is handing over): serve on, without a pid file.
		log.Error("write the pid file; serving without one", "err", err)
	}
	log.Info("ready", "pid", os.Getpid(), "backends", len(backends), "gomaxprocs", runtime.GOMAXPROCS(0),
		"admin", adminCfg.Socket, "admin_tcp", adminCfg.TCPListen, "pid_file", cfg.Server.PIDFile)
	if m.OnReady != nil {
		m.OnReady()
	}

	sigs := m.Signals
	if sigs == nil {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2)
		defer signal.Stop(sigs)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	// handOver: a new process serves on the sockets. The admin socket is
	// its now (the request that asked for the upgrade gets its answer, and
	// nothing more comes here); the clients are handed over, the socket
	// files left to it, and this process exits.
	handOver := func() error {
		handedOff = true
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		adm.HandOff(actx)
		acancel()
		grace := time.Duration(cfg.Server.ShutdownGrace)
		log.Info("upgraded: a new tetherd serves; handing the clients over", "grace", grace)
		hctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := srv.HandOver(hctx); err != nil {
			return err
		}
		if !pid.handedOver(2 * time.Second) {
			log.Warn("the new process has not written its pid to the pid file", "pid_file", cfg.Server.PIDFile)
		}
		log.Info("stopped after the upgrade")
		return nil
	}

wait:
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-upgraded:
			return handOver()
		case sig := <-sigs:
			if sig == syscall.SIGUSR2 {
				go func() {
					if _, err := ctl.Upgrade(context.Background()); err != nil {
						log.Error("SIGUSR2: upgrade failed; this process goes on serving", "err", err)
					}
				}()
				continue
			}
			if sig != syscall.SIGHUP {
				log.Info("shutting down", "signal", sig.String(), "grace", cfg.Server.ShutdownGrace)
				break wait
			}
			// SIGHUP reopens the log file (for logrotate) and reloads the
			// config, as `tether reload` does.
			if logFile != nil {
				if err := logFile.Reopen(); err != nil {
					log.Error("SIGHUP: reopen the log file", "file", cfg.Log.File, "err", err)
				} else {
					log.Info("SIGHUP: log reopened; reloading the config", "file", cfg.Log.File)
				}
			}
			go func() {
				if _, err := ctl.Reload(context.Background()); err != nil {
					log.Error("SIGHUP: reload failed; the running config stays as it was", "err", err)
				}
			}()
		}
	}
	if upg != nil {
		// An upgrade that has just completed wins over the signal: the
		// sockets are the new process's, and must not be removed.
		if ctl.upgradeDone(false) {
			return handOver()
		}
		// tableflip holds a copy of every listening socket, to pass on: it
		// closes them and removes the socket files now, so that a client is
		// refused at once instead of waiting in a backlog nobody accepts
		// from (the admin socket goes too: readiness fails from here on).
		// An upgrade under way is given up (its new process killed).
		upg.Stop()
		<-upg.Exit()
		if ctl.upgradeDone(true) { // it completed just before the stop
			return handOver()
		}
	}
	grace := time.Duration(cfg.Server.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(sctx) }()
	select {
	case err := <-done:
		if cfg.Server.Socket != "" {
			removeSocket(cfg.Server.Socket)
		}
		if err != nil {
			return err
		}
		log.Info("stopped")
		return nil
	case sig := <-second(sigs, log):
		// Exit at once, but leave no socket file behind.
		if cfg.Server.Socket != "" {
			removeSocket(cfg.Server.Socket)
		}
		return errors.New("second signal (" + sig.String() + "): exiting at once")
	}
}

// second passes on the next SIGTERM or SIGINT from sigs, during a drain; a
// SIGHUP (logrotate) or SIGUSR2 then is logged and ignored.
func second(sigs <-chan os.Signal, log *slog.Logger) <-chan os.Signal {
	out := make(chan os.Signal, 1)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				out <- sig
				return
			}
			log.Info("draining: signal ignored", "signal", sig.String())
		}
	}()
	return out
}

// shutdownNow stops a server that never served (its admin API could not
// start), without waiting for anyone.
func shutdownNow(srv *server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// control is what the admin API reaches of tetherd: the server's state, and
// the reload of its config file.
type control struct {
	srv   *server.Server
	path  string // the config file; "" for the embedded default
	level *slog.LevelVar
	log   *slog.Logger
	upg   *tableflip.Upgrader // nil: upgrades off
	mu    sync.Mutex

	// upgradeMu is held while an upgrade runs; upgraded says one completed.
	upgradeMu sync.Mutex
	upgraded  bool
}

// upgradeDone reports whether an upgrade has completed. With wait, it waits
// for one under way to end (tableflip ends it at once once stopped);
// without, one under way counts as not done.
func (c *control) upgradeDone(wait bool) bool {
	if wait {
		c.upgradeMu.Lock()
	} else if !c.upgradeMu.TryLock() {
		return false
	}
	defer c.upgradeMu.Unlock()
	return c.upgraded
}

// readConfig reads and validates the config file tetherd was started with.
func (c *control) readConfig() (tether.Config, error) {
	cfg, err := tether.ReadConfigFile(c.path)
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Upgrade starts tetherd's binary anew (the one now on disk, with the same
// arguments) and returns once it serves on this process's sockets, which then
// hands its clients over and exits. If the new process fails or is not ready
// within upgradeTimeout, this one goes on as before.
func (c *control) Upgrade(ctx context.Context) (admin.UpgradeReport, error) {
	if c.upg == nil {
		return admin.UpgradeReport{}, errors.New("upgrade: this tetherd runs without upgrades")
	}
	if c.path != "" {
		// The new process reads the file anew: a broken one fails here, not there.
		if _, err := c.readConfig(); err != nil {
			return admin.UpgradeReport{}, fmt.Errorf("upgrade: %s: %w (nothing changed)", c.path, err)
		}
	}
	start := time.Now()
	c.log.Info("upgrade: starting a new tetherd", "binary", os.Args[0])
	c.upgradeMu.Lock()
	err := c.upg.Upgrade()
	c.upgraded = c.upgraded || err == nil
	c.upgradeMu.Unlock()
	if err != nil {
		return admin.UpgradeReport{}, fmt.Errorf("upgrade: %w (this process goes on serving)", err)
	}
	took := time.Since(start).Round(time.Millisecond)
	c.log.Info("upgrade: the new tetherd serves", "took", took)
	return admin.UpgradeReport{OldPID: os.Getpid(), Took: took.String()}, nil
}

func (c *control) Snapshot() server.Snapshot { return c.srv.Snapshot() }

func (c *control) Clients(ctx context.Context) ([]server.ClientSnapshot, error) {
	return c.srv.Clients(ctx)
}

// reloadOpenTimeout bounds how long a reload waits for its new backends to
// open (the admin API's replies are cut at 30 s).
const reloadOpenTimeout = 20 * time.Second

// Reload reads the config file again, validates it, and applies it: the log
// level, then the backends (server.Server.Reload). An error leaves everything
// as it was.
func (c *control) Reload(ctx context.Context) (server.ReloadReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		return server.ReloadReport{}, errors.New("reload: tetherd runs the embedded default (no -config): there is no file to reload")
	}
	cfg, err := c.readConfig()
	if err != nil {
		return server.ReloadReport{}, fmt.Errorf("reload %s: %w (nothing changed)", c.path, err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return server.ReloadReport{}, fmt.Errorf("reload %s: log.level: %w (nothing changed)", c.path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, reloadOpenTimeout)
	defer cancel()
	rep, err := c.srv.Reload(ctx, cfg, tether.NewBackend)
	if err != nil {
		return rep, err
	}
	c.level.Set(level)
	return rep, nil
}

func newLogger(w io.Writer, c tether.LogConfig, level *slog.LevelVar) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			if i == 0 {
				return "/"
			}
			return path[:i]
		}
	}
	return "."
}

// removeSocket removes path if it is a socket (never another kind of file).
func removeSocket(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
}

// reopenFile is an append-only log file that SIGHUP reopens (logrotate moves
// the old one away first).
type reopenFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openLogFile(path string) (*reopenFile, error) {
	r := &reopenFile{path: path}
	if err := r.Reopen(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reopen opens the path anew and closes the file it replaces.
func (r *reopenFile) Reopen() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	r.mu.Lock()
	old := r.f
	r.f = f
	r.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (r *reopenFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Write(p)
}

// Close closes the file.
func (r *reopenFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}

// checkBackends is -check: it builds every backend of cfg (and with connect
// opens each), prints one line per backend to w, and returns an error naming
// each that failed.
func checkBackends(ctx context.Context, w io.Writer, cfg *tether.Config, connect bool) error {
	checks := tether.CheckBackends(ctx, cfg, connect)
	if err := tether.WriteBackendChecks(w, checks, connect); err != nil {
		return err
	}
	fmt.Fprintln(w, "config ok")
	return nil
}

// logToFile records a start failure found before the logger exists (an
// invalid config) in the log file the config names, if any and if it can:
// where the operator looks, besides standard error.
func logToFile(c tether.LogConfig, msg string, err error) {
	if c.File == "" {
		return
	}
	f, ferr := os.OpenFile(c.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if ferr != nil {
		return
	}
	defer f.Close()
	if c.Format != "json" {
		c.Format = "text"
	}
	level := new(slog.LevelVar)
	newLogger(f, c, level).Error(msg, "err", err)
}
