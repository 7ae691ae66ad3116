// Package topology knows what each host of a replicated SQL backend is, as
// the hosts themselves report it: a Prober (one per protocol, in
// backend/mysql and backend/postgres) asks one host its role, whether it is
// read-only and how far behind its source it is; a Monitor probes every host
// on an interval, each in its own goroutine (never on the event loop), keeps
// the latest HostStatus per host and says when a host's role or reachability
// changes. Routing (issue 21) reads what the Monitor keeps; it never decides
// a role from the configuration.
package topology

import (
	"context"
	"errors"
	"time"
)

// Role is what a host says it is.
type Role uint8

const (
	// RoleUnknown: the host has not answered (yet), or answered something
	// that names no role.
	RoleUnknown Role = iota
	// RolePrimary: the host accepts writes (MariaDB read_only off;
	// PostgreSQL not in recovery).
	RolePrimary
	// RoleReplica: the host refuses writes and applies a source's changes
	// (MariaDB read_only on; PostgreSQL in recovery).
	RoleReplica
)

// String returns "unknown", "primary" or "replica".
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleReplica:
		return "replica"
	default:
		return "unknown"
	}
}

// HostStatus is one host's answer to one probe: what the server said, never
// what the configuration says.
type HostStatus struct {
	// Addr names the host (a host:port, or a Unix socket's path).
	Addr string
	Role Role
	// ReadOnly: the server refuses writes from ordinary sessions (MariaDB
	// @@read_only; PostgreSQL transaction_read_only, on in recovery).
	ReadOnly bool
	// Replicating: the host applies its source's changes now (MariaDB: both
	// the IO and the SQL thread run; PostgreSQL: in recovery and replay not
	// paused). False on a primary.
	Replicating bool
	// Position is what the host has applied (a replica) or written (a
	// primary), in the protocol's own form: a MariaDB GTID list
	// (@@gtid_slave_pos on a replica, @@gtid_binlog_pos on a primary), a
	// PostgreSQL LSN (pg_last_wal_replay_lsn() on a replica,
	// pg_current_wal_lsn() on a primary).
	Position string
	// ReceivedPosition is, on a replica, what it has received from its
	// source, applied or not (MariaDB Gtid_IO_Pos, PostgreSQL
	// pg_last_wal_receive_lsn()); empty on a primary.
	ReceivedPosition string
	// BehindBy is how far Position trails ReceivedPosition, in the
	// protocol's unit: transactions (MariaDB, summed over the GTID domains)
	// or WAL bytes (PostgreSQL). It cannot see what the replica has not
	// received yet; comparing Position with the primary's does.
	BehindBy int64
	// Lag is the replica's delay behind its source as the server reports it
	// (MariaDB Seconds_Behind_Master; PostgreSQL now() minus the last
	// replayed transaction's commit time while WAL received waits for
	// replay, else 0). 0 on a primary. Meaningful only when LagKnown.
	Lag time.Duration
	// LagKnown is false when the server cannot say (MariaDB reports NULL
	// while its SQL thread is stopped).
	LagKnown bool
	// Err is the probe's error; nil when the host answered. A status with an
	// Err has RoleUnknown and no positions.
	Err error
	// CheckedAt is when the probe started (the Monitor sets it to when it
	// started the probe).
	CheckedAt time.Time
}

// Reachable reports whether the host answered its last probe.
func (s HostStatus) Reachable() bool { return s.Err == nil }

// Prober asks one host what it is. A protocol implements it over a small
// blocking connection of its own (never a pool's).
type Prober interface {
	// Probe returns the host's status, or an error when it could not ask
	// (the connection failed, the host did not answer, a query was
	// refused). It must return soon after ctx ends. The Monitor calls it
	// from one goroutine at a time per Prober.
	Probe(ctx context.Context) (HostStatus, error)
}

var (
	// ErrProbeTimeout is wrapped by a status's Err when the probe did not
	// answer within the Monitor's timeout.
	ErrProbeTimeout = errors.New("probe timed out")
	// ErrNotProbed is a host's Err before its first probe has answered.
	ErrNotProbed = errors.New("not probed yet")
)
