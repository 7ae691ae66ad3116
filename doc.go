// Package tether is the domain that tetherd's backends and its server share:
// the Backend interface and its capabilities (Querier, Transactor, KeyValue,
// WideColumn, Upstream, ...), the configuration and the registry of backend
// types, the typed errors that cross the wire (Error, Code), and results with
// the row-sink contract (Result, RowSink, ResultBuilder).
//
// It imports nothing of tetherd's own: the backends (backend/...) build on
// it, and the server (package server) on them both; cmd/tetherd wires them.
package tether
