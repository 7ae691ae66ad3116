package server

import (
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// frequent estimates the most frequent statements (by backend and SQL text)
// for the status page, at a cost requests do not feel: one statement in
// statementSample is counted (picked at random, so that a page's fixed
// sequence of statements cannot line up with the sampling), into a
// table of at most maxStatements entries kept by the space-saving algorithm
// (Metwally et al.): a statement not in a full table replaces the least
// counted one and inherits its count, so that a statement run often enough
// is always in it and its count is overestimated by at most the one it
// replaced. Counts are scaled back by statementSample.
type frequent struct {
	mu     sync.Mutex
	counts map[statementKey]*statementCount
}

const (
	statementSample = 16
	maxStatements   = 256
	maxStatementSQL = 512 // bytes of SQL text kept per statement
)

type statementKey struct{ backend, sql string }

type statementCount struct {
	n, errors uint64
	took      time.Duration // the sampled runs' total time
	overcount uint64        // what it inherited when it replaced another
}

// StatementStats is one of the most frequent statements, estimated.
type StatementStats struct {
	Backend     string  `json:"backend"`
	SQL         string  `json:"sql"`                   // cut at 512 bytes
	Count       uint64  `json:"count"`                 // estimated runs since tetherd started
	Errors      uint64  `json:"errors"`                // estimated runs that failed
	MeanSeconds float64 `json:"mean_seconds"`          // of the sampled runs
	Uncertainty uint64  `json:"uncertainty,omitempty"` // Count may be over by at most this
}

// note counts one run of sql on backend, sampled. Safe from any goroutine.
func (f *frequent) note(backend, sql string, err error, took time.Duration) {
	if sql == "" || rand.Uint32()%statementSample != 0 {
		return
	}
	if len(sql) > maxStatementSQL {
		sql = sql[:maxStatementSQL]
	}
	k := statementKey{backend, sql}
	// A sample is skipped rather than waited for: the event loop takes this
	// path for every request it answers, and must not stall behind a worker
	// that holds the lock (a new statement scans the table for the one to
	// evict). Which samples are skipped depends on timing, not on the
	// statement; the counts come out low by the share skipped.
	if !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	c := f.counts[k]
	if c == nil {
		if f.counts == nil {
			f.counts = make(map[statementKey]*statementCount, maxStatements)
		}
		var inherited uint64
		if len(f.counts) >= maxStatements {
			var minK statementKey
			var minC *statementCount
			for key, sc := range f.counts {
				if minC == nil || sc.n < minC.n {
					minK, minC = key, sc
				}
			}
			delete(f.counts, minK)
			inherited = minC.n
		}
		// A copy: the request's text may be a large buffer's slice.
		k.sql = strings.Clone(k.sql)
		c = &statementCount{n: inherited, overcount: inherited}
		f.counts[k] = c
	}
	c.n++
	c.took += took
	if err != nil {
		c.errors++
	}
}

// top returns the n most frequent statements, most frequent first.
func (f *frequent) top(n int) []StatementStats {
	f.mu.Lock()
	out := make([]StatementStats, 0, len(f.counts))
	for k, c := range f.counts {
		sampled := c.n - c.overcount
		mean := 0.0
		if sampled > 0 {
			mean = (c.took / time.Duration(sampled)).Seconds()
		}
		out = append(out, StatementStats{Backend: k.backend, SQL: k.sql, Count: c.n * statementSample,
			Errors: c.errors * statementSample, MeanSeconds: mean, Uncertainty: c.overcount * statementSample})
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].SQL < out[j].SQL
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
