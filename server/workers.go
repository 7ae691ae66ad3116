package server

import (
	"log/slog"
	"sync/atomic"

	tether "github.com/tether-php/tether"
)

// workers runs backend work on long-lived goroutines. A fresh goroutine per
// request starts with a small stack that grows again through database/sql and
// the driver on every request: bench/web's profile of a MariaDB point read
// found 14% of tetherd's CPU in stack growth (morestack, copystack). A worker
// keeps its grown stack from one request to the next.
type workers struct {
	ch   chan func() // unbuffered: a send succeeds only when a worker is idle
	idle atomic.Int32
}

// maxIdleWorkers bounds the workers kept waiting after a burst.
const maxIdleWorkers = 64

func newWorkers() *workers { return &workers{ch: make(chan func())} }

// workerLog is where a worker logs a panic that its function did not
// recover itself (every request's function does: this is the backstop).
var workerLog = slog.Default

// safeRun runs fn, recovering a panic in it: the worker goes on.
func safeRun(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			tether.RecoverPanic(workerLog(), "", "worker", v)
		}
	}()
	fn()
}

// run runs fn on an idle worker, or on a new one when none is idle. It never
// blocks.
func (w *workers) run(fn func()) {
	select {
	case w.ch <- fn:
	default:
		go w.work(fn)
	}
}

func (w *workers) work(fn func()) {
	for {
		safeRun(fn)
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		fn = <-w.ch
		w.idle.Add(-1)
	}
}
