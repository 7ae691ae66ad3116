// Package fault is tetherd's fault-injection hook for tests: code on a
// request's path calls Inject at a few named points, and a test that has Set
// a hook may panic there (or stall, or count). Without a hook, Inject is one
// atomic load.
package fault

import "sync/atomic"

// Point names a place where a test may inject a fault.
type Point uint8

// The points.
const (
	// WorkerCall: a backend call about to run on a worker goroutine
	// (a request outside a transaction, or a transaction's statement).
	// The detail is the request's SQL, or its op and table.
	WorkerCall Point = iota + 1
	// SQLConnRead: a SQL server connection driven by the event loop is
	// about to read its socket. The detail is the SQL of the oldest request
	// it has sent and not yet answered ("" for none), a tab, and the
	// connection's name ("mysql thread 42", "postgres pid 4711").
	SQLConnRead
	// BatchOp: one operation of a batch about to run on a worker goroutine.
	// The detail is its SQL, or its op and table.
	BatchOp
	// DriverCall: a database/sql driver call (a statement's or a
	// connection's query or exec) about to run, inside backend/sqldb's guard
	// around the driver. The detail is the statement's SQL.
	DriverCall
)

var hook atomic.Pointer[func(Point, string)]

// Set makes fn run at every Inject until restore is called. Tests only.
func Set(fn func(p Point, detail string)) (restore func()) {
	hook.Store(&fn)
	return func() { hook.Store(nil) }
}

// Enabled reports whether a hook is set, for callers whose detail costs
// something to build.
func Enabled() bool { return hook.Load() != nil }

// Inject runs the hook, if one is set, at p.
func Inject(p Point, detail string) {
	if h := hook.Load(); h != nil {
		(*h)(p, detail)
	}
}
