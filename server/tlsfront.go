package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// TLS on the TCP listener. The event loop serves raw descriptors, so TLS is
// terminated in front of it by Go's crypto/tls (no hand-written TLS): each
// client's handshake runs on a goroutine, and once it is done its plaintext
// travels over a Unix socket pair, whose other end the loop serves like any
// client connection (a TCP one: hello and its token come first). It costs
// two copies per message, where a TLS client is on another host anyway.

// tlsHandshakeTimeout bounds a client's TLS handshake; maxTLSHandshakes
// bounds the handshakes under way at once, so that clients that never finish
// theirs cannot make tetherd hold more (beyond it, clients wait in the
// kernel's backlog; a peer that keeps 64 handshakes open delays the others
// by up to the timeout: put the listener where only the pod's hosts reach it).
const (
	tlsHandshakeTimeout = 5 * time.Second
	maxTLSHandshakes    = 64
)

// tlsFront accepts TLS clients and hands their plaintext to the loop.
type tlsFront struct {
	ln      net.Listener
	cfg     *tls.Config
	s       *Server
	slots   chan struct{} // handshakes under way
	wg      sync.WaitGroup
	mu      sync.Mutex
	bridges map[net.Conn]struct{} // TLS connections being bridged, closed by Close
	closed  bool
}

func newTLSFront(s *Server, ln net.Listener, cfg *tls.Config) *tlsFront {
	f := &tlsFront{ln: ln, cfg: cfg, s: s, slots: make(chan struct{}, maxTLSHandshakes), bridges: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f
}

func (f *tlsFront) accept() {
	defer f.wg.Done()
	var pause time.Duration
	for {
		// A slot first: with maxTLSHandshakes under way, new clients wait
		// in the listen backlog (bounded by the kernel), not in tetherd.
		f.slots <- struct{}{}
		nc, err := f.ln.Accept()
		if err != nil {
			<-f.slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: rest, as the loop does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			f.s.log.Warn("tls: accept failed", "err", err, "pause", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		f.wg.Add(1)
		go f.serve(nc)
	}
}

// serve runs one client's handshake, then bridges it to the loop.
func (f *tlsFront) serve(nc net.Conn) {
	defer f.wg.Done()
	tc := tls.Server(nc, f.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	<-f.slots
	if err != nil {
		f.s.log.Debug("tls: handshake failed", "client", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		f.s.log.Warn("tls: socket pair", "err", err)
		tc.Close()
		return
	}
	pf := os.NewFile(uintptr(fds[1]), "tls-bridge")
	plain, err := net.FileConn(pf) // a dup of it
	pf.Close()
	if err != nil {
		unix.Close(fds[0])
		tc.Close()
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		unix.Close(fds[0])
		plain.Close()
		tc.Close()
		return
	}
	f.bridges[tc] = struct{}{}
	f.mu.Unlock()
	f.s.loop.AddConn(fds[0], true, nc.RemoteAddr().String())
	// Both ways until either side ends; then both close.
	done := make(chan struct{}, 2)
	go func() { io.Copy(plain, tc); plain.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(tc, plain); tc.CloseWrite(); done <- struct{}{} }()
	<-done
	tc.Close()
	plain.Close()
	<-done
	f.mu.Lock()
	delete(f.bridges, tc)
	f.mu.Unlock()
}

// stopAccepting closes the listener; bridged clients go on.
func (f *tlsFront) stopAccepting() { f.ln.Close() }

// Close closes the listener and every bridged client, and waits for them.
func (f *tlsFront) Close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.bridges {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
