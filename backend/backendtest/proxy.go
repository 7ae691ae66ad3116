package backendtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP forwarder in front of a real backend, for fault injection:
// a test can cut every connection and refuse new ones (the backend "goes
// down"), then let them through again (it "comes back").
type Proxy struct {
	t      testing.TB
	target string

	mu    sync.Mutex
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy on a free loopback port forwarding to target.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's host:port; it stays the same across Stop and Start.
func (p *Proxy) Addr() string { return p.addr }

// Start accepts connections again after Stop.
func (p *Proxy) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", addr, err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	go p.serve(ln)
}

// Stop closes the listener and every forwarded connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go pipe(c, up)
		go pipe(up, c)
	}
}

func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}
