package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// histBuckets is the range of a histogram in 1 us buckets; later values land in the last bucket.
const histBuckets = 10_000

// histogram counts durations in 1 us buckets from 0 to 10 ms, safely for concurrent use; early counts values
// below zero (a chunk written before its deadline, which the relay never does).
type histogram struct {
	buckets [histBuckets + 1]atomic.Int64
	early   atomic.Int64
	max     atomic.Int64 // ns
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		h.early.Add(1)
		return
	}
	i := int(d / time.Microsecond)
	if i > histBuckets {
		i = histBuckets
	}
	h.buckets[i].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// count returns the number of values recorded, early ones included.
func (h *histogram) count() int64 {
	n := h.early.Load()
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

// quantile returns the upper edge of the bucket holding quantile q (0 < q <= 1) of the values at or above zero:
// the true value is within 1 us below it. It returns 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	var total int64
	for i := range h.buckets {
		total += h.buckets[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			return time.Duration(i+1) * time.Microsecond
		}
	}
	return time.Duration(h.max.Load())
}

// Stats counts what a Relay forwarded, for every connection and both directions together.
type Stats struct {
	Chunks atomic.Int64 // chunks written to a peer
	Bytes  atomic.Int64
	// Late is how long after its deadline each chunk's write began: the relay's own error on top of the delay.
	Late histogram
}

// String is a one-line summary: chunks, bytes, and how late chunks went out.
func (s *Stats) String() string {
	return fmt.Sprintf("%d chunks, %d bytes; written after their deadline by p50 %v, p99 %v, max %v; early %d",
		s.Chunks.Load(), s.Bytes.Load(), s.Late.quantile(0.5), s.Late.quantile(0.99),
		time.Duration(s.Late.max.Load()).Round(time.Microsecond), s.Late.early.Load())
}

// processCPU returns the user+system CPU time this process has used so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
