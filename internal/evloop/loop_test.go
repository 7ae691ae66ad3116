//go:build linux

package evloop_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tether-php/tether/internal/evloop"
)

// TestLoop_AcceptAtTheDescriptorLimit: with clients waiting in the backlog
// and no descriptor left to accept them, the loop must rest, not spin on a
// listener that stays readable (a fault campaign measured 5.3 CPU-seconds
// per 10 s before), and accept again once descriptors are back. It runs in a
// child process, whose descriptor limit it lowers.
func TestLoop_AcceptAtTheDescriptorLimit(t *testing.T) {
	if os.Getenv("EVLOOP_EMFILE_CHILD") != "" {
		emfileChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoop_AcceptAtTheDescriptorLimit$", "-test.v")
	cmd.Env = append(os.Environ(), "EVLOOP_EMFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var cpuMS, pauses, accepted int
	i := strings.Index(string(out), "RESULT ")
	if i < 0 {
		t.Fatalf("child printed no result:\n%s", out)
	}
	fmt.Sscanf(string(out[i:]), "RESULT cpu_ms=%d pauses=%d accepted=%d", &cpuMS, &pauses, &accepted)
	t.Logf("at the descriptor limit for 1 s: %d ms of CPU, %d pauses; %d clients accepted once descriptors came back", cpuMS, pauses, accepted)
	if cpuMS > 200 {
		t.Errorf("the loop used %d ms of CPU in 1 s at the descriptor limit: it spins", cpuMS)
	}
	if pauses < 3 {
		t.Errorf("%d pauses in 1 s: the listener is not retried", pauses)
	}
	if accepted < 10 {
		t.Errorf("only %d of the waiting clients were accepted once descriptors came back", accepted)
	}
}

type countingHandler struct {
	opened, pauses atomic.Int64
	want           int64         // opens that close all
	all            chan struct{} // closed by the want-th open
}

func (h *countingHandler) OnOpen(*evloop.Conn, bool) {
	if h.opened.Add(1) == h.want {
		close(h.all)
	}
}
func (h *countingHandler) OnData(_ *evloop.Conn, in []byte) int { return len(in) }
func (h *countingHandler) OnClose(*evloop.Conn)                 {}
func (h *countingHandler) OnAcceptError(error, time.Duration)   { h.pauses.Add(1) }

func emfileChild() {
	fail := func(err error) { fmt.Println("FAIL", err); os.Exit(1) }
	path := filepath.Join(os.TempDir(), fmt.Sprintf("evloop-emfile-%d.sock", os.Getpid()))
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		fail(err)
	}
	defer os.Remove(path)
	// Clients wait in the backlog: connected, not accepted.
	var clients []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			fail(err)
		}
		clients = append(clients, c)
	}
	h := &countingHandler{want: int64(len(clients)), all: make(chan struct{})}
	l, err := evloop.New(h, 1<<20)
	if err != nil {
		fail(err)
	}
	go l.Run()
	// Leave no descriptor free, then let the loop try to accept.
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fds, _ := os.ReadDir("/proc/self/fd")
	low := lim
	low.Cur = uint64(len(fds)) + 1 // the listener's duplicate takes the last one
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		fail(err)
	}
	if err := l.AddListener(ln); err != nil {
		fail(err)
	}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	// The measured second: what is under test is the CPU the loop spends
	// in it, so this sleep is the behaviour's window, not a wait.
	time.Sleep(time.Second)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Millisecond
	pauses := h.pauses.Load()
	// Descriptors come back: the waiting clients are accepted.
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	select {
	case <-h.all:
	case <-time.After(10 * time.Second): // the parent reports how many were
	}
	fmt.Printf("RESULT cpu_ms=%d pauses=%d accepted=%d\n", cpu, pauses, h.opened.Load())
	for _, c := range clients {
		c.Close()
	}
	l.Stop()
	<-l.Done()
}

// TestLoop_PostAfterRunReturned: once Run has returned, its eventfd is closed
// and the number goes to the next socket opened, such as a backend
// connection's. A Post or Stop that came late (a dial finishing after its
// pool closed) used to write the eventfd's eight bytes into that socket: a
// MariaDB session read them as a command (01 00 00 00 00: "Unknown
// command"), and its stream was out of step from then on. Nothing may be
// written once the loop is gone.
func TestLoop_PostAfterRunReturned(t *testing.T) {
	l, err := evloop.New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	go l.Run()
	l.Stop()
	<-l.Done()
	// The lowest free descriptors are the loop's, just closed: these sockets
	// take their numbers.
	type pair struct{ mine, peer int }
	var pairs []pair
	for i := 0; i < 8; i++ {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fds[0])
		defer syscall.Close(fds[1])
		syscall.SetNonblock(fds[0], true)
		syscall.SetNonblock(fds[1], true)
		pairs = append(pairs, pair{fds[0], fds[1]}, pair{fds[1], fds[0]})
	}
	ran := false
	l.Post(func() { ran = true })
	l.Stop()
	// No wait: Post and Stop write the eventfd, if at all, before they
	// return (wakeLocked, under the loop's lock), and a Unix socket's peer
	// can read what was written as soon as write returns.
	for _, p := range pairs {
		var b [16]byte
		if n, err := syscall.Read(p.peer, b[:]); n > 0 || err != syscall.EAGAIN {
			t.Errorf("a socket opened after the loop stopped (fd %d) got %d bytes (%x, %v) from it", p.mine, n, b[:max(n, 0)], err)
		}
	}
	if ran {
		t.Error("a function posted after the loop stopped ran")
	}
}

// pausingHandler stops reading every connection as it opens, so that what its
// clients send stays unread in the socket.
type pausingHandler struct {
	conns  chan *evloop.Conn
	closed chan struct{} // one send per OnClose (buffered)
}

func (h *pausingHandler) OnOpen(c *evloop.Conn, _ bool) {
	c.PauseReading()
	h.conns <- c
}
func (h *pausingHandler) OnData(_ *evloop.Conn, in []byte) int { return len(in) }
func (h *pausingHandler) OnClose(*evloop.Conn)                 { h.closed <- struct{}{} }

// TestLoop_CloseAbortResetsThePeer: a connection closed by CloseAbort with
// its client's bytes unread makes the client's read fail with ECONNRESET (the
// PHP client's sign that its request never ran), always.
func TestLoop_CloseAbortResetsThePeer(t *testing.T) {
	for _, abort := range []bool{true, false} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			h := &pausingHandler{conns: make(chan *evloop.Conn, 1), closed: make(chan struct{}, 1)}
			l, err := evloop.New(h, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			go l.Run()
			defer l.Stop()
			ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.AddListener(ln); err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("unix", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conn := <-h.conns
			if _, err := c.Write([]byte("a request nobody reads")); err != nil {
				t.Fatal(err)
			}
			// No wait: on a Unix stream socket write returns once the bytes
			// are queued on the receiving socket, so they are in the
			// server's socket now, unread (reading is paused).
			if abort {
				l.Post(func() { l.CloseAbort(conn) })
			} else {
				conn.Close()
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 16))
			reset := err != nil && strings.Contains(err.Error(), "connection reset")
			if abort && !reset {
				t.Fatalf("read after CloseAbort: %v, want connection reset", err)
			}
			// Close half-closes first, so the peer usually reads EOF; if the
			// loop releases the descriptor before the peer reads, the
			// unread bytes make it a reset too (still true: never read).
			if !abort && err == nil {
				t.Fatalf("read after Close: %v, want the connection ended", err)
			}
			select {
			case <-h.closed:
			case <-time.After(5 * time.Second):
				t.Fatal("OnClose was not called")
			}
		})
	}
}
