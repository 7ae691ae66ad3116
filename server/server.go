package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
)

// Server is tetherd: it owns the backends, the listeners and the event loop,
// and the sessions of the clients connected to it.
//
// Lifecycle:
//  1. New checks nothing and starts nothing.
//  2. Open opens every backend (in parallel) and only then creates the
//     listeners, so a socket that exists is a server that is ready.
//  3. Serve runs the event loop until Shutdown.
//  4. Shutdown closes the listeners, lets in-flight requests finish and open
//     transactions commit within the grace period, rolls back those still
//     open, closes connections and backends.
type Server struct {
	cfg tether.Config
	log *slog.Logger

	// ListenWith, when set before Open, makes the listeners (handover.go).
	ListenWith ListenFunc

	loop     *evloop.Loop
	served   chan error  // the loop's Run result
	opened   atomic.Bool // every backend open, listeners up (Snapshot.Ready)
	draining atomic.Bool // Shutdown or HandOver began: no new work
	started  time.Time
	inflight inflight // requests handed to goroutines
	workers  *workers // the goroutines that run them
	loopBuf  []byte   // reply scratch of the event loop goroutine
	// freeCalls are loop SQL calls for reuse; loop goroutine only.
	freeCalls []*sqlCall

	// One object per concern, each in the file that owns it:
	backendTable // the backends, swapped by a reload (reload.go)
	txTable      // the open transactions and their reaper (transaction.go)
	clientLimits // the sessions and the client bounds (limits.go)
	listeners    // the Unix, TCP and TLS listeners (server.go, tlsfront.go, handover.go)
	cacheState   // the shared result cache and its background work (cache.go)
	telemetry    // request metrics, recent events, frequent statements (metrics.go)
}

// listeners are the server's listening sockets.
type listeners struct {
	tcpAddr       string    // the TCP listener's address, once listening
	tls           *tlsFront // the TCP listener when it speaks TLS (tlsfront.go)
	unixListeners []*net.UnixListener
	handingOver   atomic.Bool // HandOver began (handover.go)
}

// TCPAddr returns the address the TCP listener is bound to, or "" without one.
func (s *Server) TCPAddr() string { return s.tcpAddr }

// New returns a server for cfg serving the given backends, keyed by the
// names in cfg.Backends. cfg must have been validated.
func New(cfg tether.Config, backends map[string]tether.Backend, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	live := make(map[string]*liveBackend, len(backends))
	for name, b := range backends {
		live[name] = newLiveBackend(name, cfg.Backends[name], b)
	}
	s := &Server{cfg: cfg, log: log, workers: newWorkers(),
		txTable:      txTable{txs: map[uint64]*txState{}},
		clientLimits: clientLimits{sessions: map[*session]struct{}{}, clock: time.Now().UnixNano()},
		cacheState:   cacheState{cache: newResultCache(cfg.Cache, cfg.Server.MaxMemoryBytes)},
		telemetry:    telemetry{metrics: newRequestMetrics(sortedKeys(live))},
		backendTable: backendTable{retiringSet: map[*liveBackend]struct{}{}, closing: make(chan struct{})},
	}
	s.set.Store(newBackendSet(cfg, live))
	return s
}

// Open starts the event loop, connects every backend (those driven by the
// loop run on it), then listens. It returns an error, having closed whatever
// it opened, if any backend cannot be reached or a listener cannot be
// created.
func (s *Server) Open(ctx context.Context) error {
	loop, err := evloop.New(s, s.cfg.Server.MaxClientOutputBytes)
	if err != nil {
		return fmt.Errorf("create event loop: %w", err)
	}
	s.loop = loop
	s.served = make(chan error, 1)
	go func() { s.served <- loop.Run() }()
	for _, lb := range s.backends() {
		if lb.loop != nil {
			lb.loop.UseLoop(loop)
		}
	}
	if err := s.openBackends(ctx, s.backends()); err != nil {
		s.stopLoop()
		return err
	}
	s.openVersions()
	if err := s.listen(); err != nil {
		s.closeVersions()
		closeBackends(ctx, s.backends())
		s.stopLoop()
		return err
	}
	s.started = time.Now()
	s.opened.Store(true)
	s.reaperStop, s.reaperDone = make(chan struct{}), make(chan struct{})
	go s.reapIdleTransactions()
	s.startSweeper()
	if s.cache != nil {
		s.bgCtx, s.bgStop = context.WithCancel(context.Background())
		for _, lb := range s.backends() {
			s.startBackground(lb)
		}
	}
	return nil
}

// stopLoop stops the event loop, which closes the listeners and every
// client connection, and waits for it.
func (s *Server) stopLoop() {
	s.loop.Stop()
	<-s.loop.Done()
}

// openBackends opens bs in parallel; if any fails, it closes them all and
// returns why.
func (s *Server) openBackends(ctx context.Context, bs []*liveBackend) error {
	var wg sync.WaitGroup
	errs := make([]error, 0, len(bs))
	var mu sync.Mutex
	for _, lb := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := lb.b.Open(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("open backend %s: %w", lb.name, err))
				mu.Unlock()
				return
			}
			s.log.Info("backend ready", "backend", lb.name, "type", lb.cfg.Type,
				"took", time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeBackends(ctx, bs)
		return err
	}
	return nil
}

func (s *Server) listen() error {
	sc := s.cfg.Server
	listenWith := s.ListenWith.Listen
	if sc.Socket != "" {
		ln, err := listenWith("unix", sc.Socket, func(string, string) (net.Listener, error) {
			return listenUnix(sc.Socket, sc.SocketFileMode(), sc.SocketGroup)
		})
		if err != nil {
			return err
		}
		if ul, ok := ln.(*net.UnixListener); ok {
			s.unixListeners = append(s.unixListeners, ul)
		}
		if err := s.loop.AddListener(ln); err != nil {
			ln.Close()
			return err
		}
		s.log.Info("listening", "socket", sc.AbsSocket())
	}
	if sc.TCPListen != "" {
		if !tether.IsLoopbackAddr(sc.TCPListen) && sc.TLSCert == "" {
			return fmt.Errorf("listen tcp %s: plaintext TCP is only allowed on loopback", sc.TCPListen)
		}
		ln, err := listenWith("tcp", sc.TCPListen, net.Listen)
		if err != nil {
			return fmt.Errorf("listen tcp %s: %w", sc.TCPListen, err)
		}
		if sc.TLSCert != "" {
			cfg, err := tether.LoadServerTLS(sc)
			if err != nil {
				ln.Close()
				return fmt.Errorf("listen tcp %s: tls: %w", sc.TCPListen, err)
			}
			s.tls = newTLSFront(s, ln, cfg)
			s.tcpAddr = ln.Addr().String()
			s.log.Info("listening", "tcp", s.tcpAddr, "tls", true, "client_certificates", sc.TLSClientCA != "")
			return nil
		}
		if err := s.loop.AddListener(ln); err != nil {
			ln.Close()
			return err
		}
		s.tcpAddr = ln.Addr().String()
		s.log.Info("listening", "tcp", s.tcpAddr)
	}
	return nil
}

// listenUnix listens on path, removing an old file there only if it is a
// socket, and sets the socket's mode and group.
func listenUnix(path string, mode os.FileMode, group string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen unix %s: path exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove old socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	if group != "" {
		gid, err := lookupGroup(group)
		if err == nil {
			err = os.Chown(path, -1, gid)
		}
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("chgrp socket %s to %s: %w", path, group, err)
		}
	}
	return ln, nil
}

func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// Serve waits until the event loop, started by Open, has stopped: it returns
// after Shutdown, or with the error that stopped the loop.
func (s *Server) Serve() error {
	return <-s.served
}

// Shutdown drains the server: it closes the listeners (new clients are
// refused at once) and stops new work (requests on open transactions are
// still served so that they can finish), waits until ctx is done for
// in-flight requests and for open transactions to end, rolls back those still
// open, closes all connections and then the backends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	// A reload under way ends first (its backends then retire with the
	// rest); later ones see draining. Retiring backends wait no more.
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	close(s.closing)
	s.loop.StopAccepting()
	if s.tls != nil {
		s.tls.stopAccepting()
	}
	s.log.Info("draining", "grace", time.Until(deadlineOr(ctx, time.Now())).Round(time.Millisecond),
		"in_flight", s.inflight.n.Load(), "open_transactions", s.openTxs())

	// Requests in flight finish, and open transactions may still commit (or
	// roll back), within the grace period.
	if !s.waitDrained(ctx) {
		s.log.Warn("grace period over", "in_flight", s.inflight.n.Load(), "open_transactions", s.openTxs())
	}

	// Whatever transactions are still open now are rolled back.
	s.txMu.Lock()
	open := make([]*txState, 0, len(s.txs))
	for _, t := range s.txs {
		open = append(open, t)
	}
	s.txMu.Unlock()
	for _, t := range open {
		s.abortTx(t, rollbackShutdown, "server shutting down")
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.inflight.waitZero(rctx)
	cancel()
	if len(open) > 0 {
		s.log.Info("rolled back open transactions", "count", len(open))
	}

	if s.reaperStop != nil {
		close(s.reaperStop)
		<-s.reaperDone
	}
	if s.sweepStop != nil {
		close(s.sweepStop)
		<-s.sweepDone
	}
	if s.bgStop != nil {
		s.bgStop()
		s.bg.Wait()
	}
	s.closeVersions()
	// A reload's retiring backends close now too, with the current ones.
	// The backends close before the loop stops: the loop drives some of them.
	s.retiring.Wait()
	all := s.backends()
	for _, lb := range s.retiringBackends() {
		if s.takeRetiring(lb) {
			all = append(all, lb)
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := closeBackends(cctx, all)
	if s.tls != nil {
		s.tls.Close()
	}
	s.stopLoop()
	return err
}

// waitDrained polls until nothing is in flight and no transaction is open,
// or ctx is done; it reports whether it got there.
func (s *Server) waitDrained(ctx context.Context) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.inflight.n.Load() > 0 || s.openTxs() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// closeBackends closes bs in parallel, each within ctx: one slow to drain
// leaves the others the whole of ctx for their graceful close, rather than
// what it did not use. A panic in a backend's Close is that backend's error.
func closeBackends(ctx context.Context, bs []*liveBackend) error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, lb := range bs {
		lb.closed.Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					errs[i] = fmt.Errorf("close backend %s: %w", lb.name, tether.RecoverPanic(nil, lb.name, "close", v))
				}
			}()
			if err := lb.b.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("close backend %s: %w", lb.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func deadlineOr(ctx context.Context, t time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return t
}

// inflight counts requests handed to goroutines. Unlike a sync.WaitGroup it
// may be incremented while a drain waits for it to reach zero: requests on
// open transactions are still admitted while draining.
type inflight struct{ n atomic.Int64 }

func (f *inflight) Add(d int) { f.n.Add(int64(d)) }
func (f *inflight) Done()     { f.n.Add(-1) }

// waitZero polls until nothing is in flight or ctx is done; it reports
// whether nothing was.
func (f *inflight) waitZero(ctx context.Context) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for f.n.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
