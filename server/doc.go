// Package server is tetherd's server: it serves the frames of PHP workers
// from one event loop and runs them on the backends, which it reaches only
// through the domain's interfaces (package tether) and, for the loop-driven
// SQL pools, backend/sqlpool's request contract.
//
// Files by concern: server.go (Server and its lifecycle), dispatch.go (the
// loop's handler, a frame's dispatch), batch.go, execute.go (an operation on
// a backend capability), sqlloop.go (SQL on a loop-driven pool), session.go,
// transaction.go (open transactions, their reaper), cache*.go and
// changestream.go (the shared result cache and what invalidates it),
// reload.go (the backend set and its swap), limits.go (client bounds),
// join.go, metrics.go, statements.go, snapshot.go (what operators see),
// tlsfront.go, handover.go (binary upgrades), panics.go, workers.go.
package server
