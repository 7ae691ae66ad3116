package server_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/wire"
)

// TestCache_MemoryBound: under a workload of many small and some large
// distinct cached results (about ten times the cache's size in all), the
// cache never counts more than max_bytes, evicts the least recently used,
// refuses results over max_entry_bytes, and the process's heap after a
// collection stays within a few times max_bytes of where it started (an
// unbounded cache would hold all of it). It logs the process's RSS before
// and after.
func TestCache_MemoryBound(t *testing.T) {
	for _, d := range loopDBs(t) {
		if d.typ != "mysql" {
			continue // the bound is the cache's, not the database's
		}
		const maxBytes = 4 << 20
		ts := d.startWith(t, nil, func(c *tether.Config) {
			c.Cache.MaxBytes, c.Cache.MaxEntryBytes = maxBytes, 512<<10
		})
		c := dial(t, ts)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		rssBefore, heapBefore := rss(), heap()
		read := func(id uint32, k int, size int) {
			t.Helper()
			rep := c.do(wire.Request{ID: id, Op: wire.OpQuery, Backend: "db", SQL: fmt.Sprintf("SELECT ? AS k, REPEAT('x', %d) AS v", size),
				Params: []any{int64(k)}, CacheTTLMS: 60000})
			if e := rep.Error(); e != nil {
				t.Fatalf("read %d: %v", k, e)
			}
		}
		var total int64
		for i := 0; i < 4000; i++ {
			read(uint32(i+1), i, 200) // small
			total += 200
			if i%40 == 0 {
				read(uint32(i+1), i, 400_000) // large, under max_entry_bytes
				read(uint32(i+1), i, 600_000) // over max_entry_bytes: never stored
				total += 400_000
			}
			if st := ts.CacheStats(); st.Bytes > maxBytes {
				t.Fatalf("after %d reads the cache counts %d bytes, over max_bytes %d", i+1, st.Bytes, maxBytes)
			}
		}
		st := ts.CacheStats()
		if st.Evictions == 0 || st.RefusedTooLarge == 0 {
			t.Errorf("stats %+v: want evictions and results refused as too large", st)
		}
		grown := int64(heap()) - int64(heapBefore)
		t.Logf("%d bytes of distinct results cached through a %d-byte cache: %d entries, %d bytes held, %d evictions; heap grew %d bytes; RSS %s -> %s",
			total, maxBytes, st.Entries, st.Bytes, st.Evictions, grown, rssBefore, rss())
		if grown > 4*maxBytes {
			t.Errorf("the heap grew %d bytes, more than 4x max_bytes (%d)", grown, maxBytes)
		}
	}
}

// rss returns the process's resident set size as /proc/self/status says it.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	return "?"
}
