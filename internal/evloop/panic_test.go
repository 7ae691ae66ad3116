//go:build linux

package evloop_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tether-php/tether/internal/evloop"
)

// TestLoop_PostAfterStop: once Stop is called, Post refuses with
// ErrLoopClosed (it used to drop the function silently, and a caller waiting
// for it waited forever); a function it accepted before runs.
func TestLoop_PostAfterStop(t *testing.T) {
	l, err := evloop.New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	go l.Run()
	ran := make(chan struct{})
	if err := l.Post(func() { close(ran) }); err != nil {
		t.Fatalf("Post on a running loop: %v", err)
	}
	<-ran
	l.Stop()
	if err := l.Post(func() { t.Error("a function posted after Stop ran") }); !errors.Is(err, evloop.ErrLoopClosed) {
		t.Errorf("Post right after Stop = %v, want ErrLoopClosed", err)
	}
	<-l.Done()
	if err := l.Post(func() { t.Error("a function posted after Run returned ran") }); !errors.Is(err, evloop.ErrLoopClosed) {
		t.Errorf("Post after Run returned = %v, want ErrLoopClosed", err)
	}
	if err := l.AddListener(nil); !errors.Is(err, evloop.ErrLoopClosed) {
		t.Errorf("AddListener after Run returned = %v, want ErrLoopClosed", err)
	}
}

// panicHandler echoes what its clients send, and panics on "boom".
type panicHandler struct {
	mu     sync.Mutex
	panics []string
	closed chan struct{}
}

func (h *panicHandler) OnOpen(*evloop.Conn, bool) {}
func (h *panicHandler) OnData(c *evloop.Conn, in []byte) int {
	if strings.Contains(string(in), "boom") {
		panic("injected: boom")
	}
	c.WriteLater(in)
	return len(in)
}
func (h *panicHandler) OnClose(*evloop.Conn) { h.closed <- struct{}{} }
func (h *panicHandler) OnPanic(where string, v any, stack []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.panics = append(h.panics, where+": "+v.(string)+"\n"+string(stack))
}

func (h *panicHandler) reported() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.panics...)
}

// watcher reads its socket; it panics when told to, or calls back.
type watcher struct {
	fd      int
	boom    bool
	read    chan string
	recover chan any // set: it is a Recoverer
}

func (w *watcher) OnReadable() {
	var b [64]byte
	n, _ := syscall.Read(w.fd, b[:])
	if n <= 0 {
		return
	}
	if w.boom {
		panic("injected: watcher")
	}
	w.read <- string(b[:n])
}
func (w *watcher) OnWritable() {}

type recoveringWatcher struct{ *watcher }

func (w recoveringWatcher) Recover(v any, _ []byte) { w.recover <- v }

func socketpair(t *testing.T) (mine, peer int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
	syscall.SetNonblock(fds[0], true)
	return fds[0], fds[1]
}

func watch(t *testing.T, l *evloop.Loop, fd int, w evloop.Watcher) {
	t.Helper()
	errc := make(chan error, 1)
	if err := l.Post(func() { errc <- l.Watch(fd, w) }); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5 s", what)
	}
}

// TestLoop_PanicInCallbacks: a panic in one connection's callback (a
// client's OnData, a watched descriptor's OnReadable, a posted function)
// closes that connection, or stops polling that descriptor, and is reported;
// the loop goes on serving every other one. Before, the panic ended the
// process.
func TestLoop_PanicInCallbacks(t *testing.T) {
	h := &panicHandler{closed: make(chan struct{}, 4)}
	l, err := evloop.New(h, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	go l.Run()
	defer func() { l.Stop(); <-l.Done() }()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	echo := func(c net.Conn, msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(msg))
		if _, err := c.Read(b); err != nil || string(b) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, b, err)
		}
	}
	bystander, victim := dial(), dial()
	echo(bystander, "hello")
	echo(victim, "hello")

	t.Run("ClientOnData", func(t *testing.T) {
		victim.Write([]byte("boom"))
		if n, err := victim.Read(make([]byte, 8)); err == nil {
			t.Fatalf("the connection whose OnData panicked read %d bytes, want it closed", n)
		}
		within(t, "OnClose of the connection whose OnData panicked", h.closed)
		echo(bystander, "still served")
	})

	t.Run("PostedFunction", func(t *testing.T) {
		ran := make(chan struct{})
		l.Post(func() { panic("injected: posted") })
		l.Post(func() { close(ran) })
		within(t, "the function posted after the one that panicked", ran)
		echo(bystander, "still served")
	})

	t.Run("Watcher", func(t *testing.T) {
		badFd, badPeer := socketpair(t)
		goodFd, goodPeer := socketpair(t)
		bad := &watcher{fd: badFd, boom: true}
		good := &watcher{fd: goodFd, read: make(chan string, 4)}
		watch(t, l, badFd, bad)
		watch(t, l, goodFd, good)
		syscall.Write(badPeer, []byte("x"))
		syscall.Write(goodPeer, []byte("y"))
		select {
		case got := <-good.read:
			if got != "y" {
				t.Fatalf("good watcher read %q", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the other watcher was not served after one panicked")
		}
		echo(bystander, "still served")
	})

	t.Run("Recoverer", func(t *testing.T) {
		fd, peer := socketpair(t)
		w := recoveringWatcher{&watcher{fd: fd, boom: true, recover: make(chan any, 1)}}
		watch(t, l, fd, w)
		before := len(h.reported())
		syscall.Write(peer, []byte("x"))
		select {
		case v := <-w.recover:
			if v != "injected: watcher" {
				t.Fatalf("Recover got %v", v)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the Recoverer was not told of its panic")
		}
		if n := len(h.reported()); n != before {
			t.Errorf("a Recoverer's panic went to the handler too (%d reports, was %d)", n, before)
		}
	})

	reports := h.reported()
	if len(reports) != 3 {
		t.Fatalf("%d panics reported to the handler, want 3 (OnData, posted, watcher): %q", len(reports), reports)
	}
	for _, r := range reports {
		if !strings.Contains(r, "panic_test.go") {
			t.Errorf("report without the panic's stack: %s", r)
		}
	}
}
