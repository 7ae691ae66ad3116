package resultcache

import "sync/atomic"

// Cause is why an invalidation happened, one of a small fixed set (a label
// of the future /metrics).
type Cause uint8

// Causes of an invalidation.
const (
	CauseWrite        Cause = iota // an exec outside a transaction
	CauseTxCommit                  // a committed transaction's writes
	CauseKeyAPI                    // a key-API put, delete or mutation
	CauseChangeStream              // the database's change stream (binlog, logical replication)
	CauseAdmin                     // an operator's flush, a reload
	numCauses
)

var causeNames = [numCauses]string{"write", "tx_commit", "key_api", "change_stream", "admin"}

// String returns the cause's label ("write", "tx_commit", ...).
func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "unknown"
}

// Causes lists every cause, for exporting Stats.
func Causes() []Cause {
	return []Cause{CauseWrite, CauseTxCommit, CauseKeyAPI, CauseChangeStream, CauseAdmin}
}

// Stats is a snapshot of a cache's counters. Counters only grow; Bytes and
// Entries are the current size.
type Stats struct {
	Hits   uint64 // Begin answered Hit
	Misses uint64 // a read that opted in (TTL > 0) found no live entry (then waited or led)
	Merged uint64 // waiters served by another read's outcome (value or error)
	Leads  uint64 // Begin answered Lead
	Stores uint64 // results stored

	RefusedInvalidated uint64 // not stored: a table it read was invalidated during the read
	RefusedTooLarge    uint64 // not stored: over MaxEntryBytes, or larger than what eviction can free
	RefusedUncacheable uint64 // not stored: a parameter that cannot be keyed, or caching is off

	Retries   uint64 // waiters told to run the read themselves (Abandon)
	Evictions uint64 // entries dropped to stay within MaxBytes
	Expired   uint64 // entries dropped past their TTL (lazily or by Sweep)

	Invalidations [numCauses]uint64 // Invalidate and InvalidateBackend calls, by cause
	Dropped       [numCauses]uint64 // entries they dropped, by cause

	Bytes   int64 // entries, tables and overhead, as counted against MaxBytes
	Entries int64
}

// counters are a cache's Stats as atomics: written under the cache's mutex,
// read without it.
type counters struct {
	hits, misses, merged, leads, stores                 atomic.Uint64
	refusedInvalidated, refusedTooLarge, refusedUncache atomic.Uint64
	retries, evictions, expired                         atomic.Uint64
	invalidations, dropped                              [numCauses]atomic.Uint64
	bytes, entries                                      atomic.Int64
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Merged: c.merged.Load(), Leads: c.leads.Load(),
		Stores: c.stores.Load(), RefusedInvalidated: c.refusedInvalidated.Load(),
		RefusedTooLarge: c.refusedTooLarge.Load(), RefusedUncacheable: c.refusedUncache.Load(),
		Retries: c.retries.Load(), Evictions: c.evictions.Load(), Expired: c.expired.Load(),
		Bytes: c.bytes.Load(), Entries: c.entries.Load(),
	}
	for i := range s.Invalidations {
		s.Invalidations[i] = c.invalidations[i].Load()
		s.Dropped[i] = c.dropped[i].Load()
	}
	return s
}
