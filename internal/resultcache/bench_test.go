package resultcache_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/wire"
)

type benchProfile struct{ timeZone string }

// benchRead is a typical cacheable read: a WordPress option.
func benchRead() *resultcache.Read {
	return &resultcache.Read{
		Key: resultcache.Key{Backend: "wordpress", SQL: "SELECT option_value FROM wp_options WHERE option_name = ? LIMIT 1",
			Params: []any{"siteurl"}, Profile: &benchProfile{"+00:00"}, TimeFormat: "sql"},
		Tables: []string{"wp_options"}, TTL: time.Hour,
	}
}

func benchBody() []byte { return encoder(wire.Head{ID: 1}, false).AppendBody(nil) }

// BenchmarkCache_Hit is the hit path: Begin on a stored key.
func BenchmarkCache_Hit(b *testing.B) {
	c := resultcache.New(resultcache.DefaultConfig())
	r := benchRead()
	fill(b, c, r, string(benchBody()))
	b.ReportAllocs()
	for b.Loop() {
		if o, _, _ := c.Begin(r, nil); o != resultcache.Hit {
			b.Fatal(o)
		}
	}
}

// BenchmarkCache_HitReply is a hit and its reply, as the server would write
// it (AppendCachedResult) into a reused buffer.
func BenchmarkCache_HitReply(b *testing.B) {
	c := resultcache.New(resultcache.DefaultConfig())
	r := benchRead()
	fill(b, c, r, string(benchBody()))
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	id := uint32(0)
	for b.Loop() {
		_, v, _ := c.Begin(r, nil)
		id++
		buf = wire.AppendCachedResult(buf[:0], wire.Head{ID: id}, false, v)
	}
}

// BenchmarkCache_HitParallel is the hit path from many goroutines at once:
// the mutex contended (tetherd calls Begin from its one loop goroutine).
func BenchmarkCache_HitParallel(b *testing.B) {
	c := resultcache.New(resultcache.DefaultConfig())
	r := benchRead()
	fill(b, c, r, string(benchBody()))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Begin(r, nil)
		}
	})
}

// BenchmarkCache_Store is a miss: Begin (lead) and Complete storing a
// result, over more keys than fit, so each store also evicts.
func BenchmarkCache_Store(b *testing.B) {
	cfg := resultcache.DefaultConfig()
	cfg.MaxBytes = 4 << 20
	c := resultcache.New(cfg)
	rs := make([]*resultcache.Read, 1<<16)
	for i := range rs {
		rs[i] = benchRead()
		rs[i].Params = []any{fmt.Sprintf("option_%d", i)}
	}
	body := benchBody()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _, tk := c.Begin(rs[i&(len(rs)-1)], nil)
		c.Complete(tk, body, nil)
		i++
	}
	b.ReportMetric(float64(c.Stats().Evictions)/float64(b.N), "evictions/op")
}

// BenchmarkCache_Merge is one leader and 9 waiters served.
func BenchmarkCache_Merge(b *testing.B) {
	cfg := resultcache.DefaultConfig()
	cfg.MaxBytes = 0
	c := resultcache.New(cfg)
	r := benchRead()
	body := benchBody()
	ws := make([]*waiter, 9)
	for i := range ws {
		ws[i] = &waiter{}
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _, tk := c.Begin(r, nil)
		for _, w := range ws {
			c.Begin(r, w)
		}
		c.Complete(tk, body, nil)
	}
}

// BenchmarkCache_Invalidate is a write's invalidation of one table.
func BenchmarkCache_Invalidate(b *testing.B) {
	b.Run("NoEntries", func(b *testing.B) {
		c := resultcache.New(resultcache.DefaultConfig())
		tables := []string{"wp_options"}
		b.ReportAllocs()
		for b.Loop() {
			c.Invalidate("wordpress", tables, resultcache.CauseWrite)
		}
	})
	b.Run("OneEntry", func(b *testing.B) {
		// Store then invalidate; BenchmarkCache_Store less this is the
		// drop's cost.
		c := resultcache.New(resultcache.DefaultConfig())
		r := benchRead()
		body := benchBody()
		b.ReportAllocs()
		for b.Loop() {
			_, _, tk := c.Begin(r, nil)
			c.Complete(tk, body, nil)
			c.Invalidate("wordpress", r.Tables, resultcache.CauseWrite)
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		// From other goroutines (change stream followers), contended.
		c := resultcache.New(resultcache.DefaultConfig())
		tables := []string{"wp_options"}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Invalidate("wordpress", tables, resultcache.CauseChangeStream)
			}
		})
	})
}

// BenchmarkMutex is the uncontended cost of the cache's lock, for scale.
func BenchmarkMutex(b *testing.B) {
	var mu sync.Mutex
	for b.Loop() {
		mu.Lock()
		mu.Unlock() //nolint:staticcheck // the cost measured
	}
}
