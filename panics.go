package tether

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
)

// A panic while serving one request is recovered at the edge of that
// request (a worker goroutine, a callback of the event loop, a pool's
// connection): the request gets an internal error, the log gets the stack,
// tether_panics_total moves, and a backend connection the panic may have
// left in an unknown state is closed, never reused. tetherd goes on serving
// everyone else.

// PanicStats counts the panics recovered at one place.
type PanicStats struct {
	// Backend is the backend the request was for ("" for none, or not known
	// where the panic was caught).
	Backend string `json:"backend"`
	// Op is the request's operation ("query", "batch", ...) or, for a panic
	// caught outside any one request, the place: "conn_read" (a pool's
	// server connection), "event_loop".
	Op    string `json:"op"`
	Count uint64 `json:"count"`
}

// panics counts the panics recovered in this process, by backend and op:
// they are rare, so a lock will do.
var panics struct {
	mu sync.Mutex
	n  map[[2]string]uint64
}

// RecoverPanic turns v, recovered from a panic while serving op on backend,
// into the error to answer with (code internal, not safe to retry: what the
// request did before the panic is unknown). It logs v with the stack of the
// panic (call it from the deferred function that recovered, so that the stack
// is the panicking goroutine's) and counts it. Safe from any goroutine.
func RecoverPanic(log *slog.Logger, backend, op string, v any) *Error {
	return recordPanic(log, backend, op, v, debug.Stack())
}

// RecordPanic is RecoverPanic for a panic whose stack was taken already.
func RecordPanic(log *slog.Logger, backend, op string, v any, stack []byte) *Error {
	return recordPanic(log, backend, op, v, stack)
}

func recordPanic(log *slog.Logger, backend, op string, v any, stack []byte) *Error {
	if log == nil {
		log = slog.Default()
	}
	panics.mu.Lock()
	if panics.n == nil {
		panics.n = map[[2]string]uint64{}
	}
	panics.n[[2]string{backend, op}]++
	panics.mu.Unlock()
	log.Error("panic recovered: the request gets an internal error, tetherd goes on", "backend", backend, "op", op,
		"panic", fmt.Sprint(v), "stack", string(stack))
	return &Error{Code: CodeInternal, Err: ErrPanic,
		Message: fmt.Sprintf("%s: tetherd hit an internal error serving this request (a panic, logged with its stack); it may or may not have run", op)}
}

// Panics returns the panics recovered in this process so far, by backend and
// op, in a stable order. Safe from any goroutine.
func Panics() []PanicStats {
	panics.mu.Lock()
	out := make([]PanicStats, 0, len(panics.n))
	for k, n := range panics.n {
		out = append(out, PanicStats{Backend: k[0], Op: k[1], Count: n})
	}
	panics.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Backend != out[j].Backend {
			return out[i].Backend < out[j].Backend
		}
		return out[i].Op < out[j].Op
	})
	return out
}
