package resultcache_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-php/tether/internal/resultcache"
)

// fakeClock is a settable clock for TTLs.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func newCache(t testing.TB, maxBytes int64, clock *fakeClock) *resultcache.Cache {
	t.Helper()
	cfg := resultcache.DefaultConfig()
	cfg.MaxBytes = maxBytes
	if cfg.MaxEntryBytes > int(maxBytes) {
		cfg.MaxEntryBytes = int(maxBytes)
	}
	if clock != nil {
		cfg.Now = clock.Now
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return resultcache.New(cfg)
}

func read(sql string, tables ...string) *resultcache.Read {
	return &resultcache.Read{Key: resultcache.Key{Backend: "db", SQL: sql}, Tables: tables, TTL: time.Minute}
}

// fill runs r as a leader and completes it with value; it fails if r does
// not lead.
func fill(t testing.TB, c *resultcache.Cache, r *resultcache.Read, value string) {
	t.Helper()
	o, _, tk := c.Begin(r, nil)
	if o != resultcache.Lead {
		t.Fatalf("Begin(%q) = %v, want Lead", r.SQL, o)
	}
	c.Complete(tk, []byte(value), nil)
}

// get returns r's cached value, or "" on a miss (a lead it abandons).
func get(c *resultcache.Cache, r *resultcache.Read) (string, bool) {
	o, v, tk := c.Begin(r, nil)
	if o == resultcache.Hit {
		return string(v), true
	}
	if tk != nil {
		c.Abandon(tk)
	}
	return "", false
}

// waiter records what it was served.
type waiter struct {
	n     int
	value []byte
	err   error
}

func (w *waiter) Served(v []byte, err error) {
	w.n++
	w.value, w.err = append([]byte(nil), v...), err
}

func TestCache_Begin(t *testing.T) {
	t.Run("HitAfterFill", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT v FROM t WHERE id = ?", "t")
		r.Params = []any{int64(1)}
		fill(t, c, r, "one")
		if v, ok := get(c, r); !ok || v != "one" {
			t.Fatalf("got %q %v, want a hit on one", v, ok)
		}
	})
	t.Run("KeyParts", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		base := read("SELECT ?", "t")
		base.Params = []any{int64(1)}
		fill(t, c, base, "base")
		type profile struct{ tz string }
		p1, p2 := &profile{"UTC"}, &profile{"Europe/Paris"}
		variants := map[string]func(r *resultcache.Read){
			"string param":   func(r *resultcache.Read) { r.Params = []any{"1"} },
			"float param":    func(r *resultcache.Read) { r.Params = []any{1.0} },
			"bytes param":    func(r *resultcache.Read) { r.Params = []any{[]byte("1")} },
			"true param":     func(r *resultcache.Read) { r.Params = []any{true} },
			"nil param":      func(r *resultcache.Read) { r.Params = []any{nil} },
			"two params":     func(r *resultcache.Read) { r.Params = []any{int64(1), nil} },
			"no params":      func(r *resultcache.Read) { r.Params = nil },
			"backend":        func(r *resultcache.Read) { r.Backend = "db2" },
			"sql":            func(r *resultcache.Read) { r.SQL = "SELECT  ?" },
			"profile":        func(r *resultcache.Read) { r.Profile = p1 },
			"columnar":       func(r *resultcache.Read) { r.Columnar = true },
			"time format":    func(r *resultcache.Read) { r.TimeFormat = "sql" },
			"sql/backend":    func(r *resultcache.Read) { r.Backend, r.SQL = "dbS", "ELECT ?" },
			"param boundary": func(r *resultcache.Read) { r.SQL, r.Params = "SELECT ?\x00", nil },
		}
		for name, change := range variants {
			r := *base
			change(&r)
			if v, ok := get(c, &r); ok {
				t.Errorf("%s: hit %q, want a miss", name, v)
			}
		}
		// int and int64 of one value are one key; so are two equal profiles.
		r := *base
		r.Params = []any{1}
		if _, ok := get(c, &r); !ok {
			t.Error("int(1): miss, want the int64(1) entry")
		}
		r.Profile = p1
		fill(t, c, &r, "p1")
		r.Profile = p2
		if v, ok := get(c, &r); ok {
			t.Errorf("other profile: hit %q", v)
		}
		r.Profile = p1
		if v, ok := get(c, &r); !ok || v != "p1" {
			t.Errorf("same profile: %q %v", v, ok)
		}
	})
	t.Run("OptOut", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT 1")
		fill(t, c, r, "x")
		r.TTL = 0
		if _, ok := get(c, r); ok {
			t.Fatal("TTL 0 read served from the cache")
		}
		r2 := read("SELECT 2")
		r2.TTL = 0
		fill(t, c, r2, "y")
		r2.TTL = time.Minute
		if _, ok := get(c, r2); ok {
			t.Fatal("TTL 0 read was stored")
		}
	})
	t.Run("UnkeyableParam", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT ?", "t")
		r.Params = []any{time.Now()}
		fill(t, c, r, "x")
		fill(t, c, r, "x") // not merged, not stored: leads again
		if s := c.Stats(); s.RefusedUncacheable != 2 || s.Entries != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("CachingOff", func(t *testing.T) {
		c := newCache(t, 0, nil)
		r := read("SELECT 1")
		fill(t, c, r, "x")
		fill(t, c, r, "x")
		if s := c.Stats(); s.Stores != 0 || s.Entries != 0 || s.Bytes != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestCache_Bounds(t *testing.T) {
	t.Run("LRU", func(t *testing.T) {
		c := newCache(t, 4096, nil)
		var rs []*resultcache.Read
		for i := 0; ; i++ {
			r := read(fmt.Sprintf("SELECT %d", i), "t")
			fill(t, c, r, "0123456789")
			rs = append(rs, r)
			if c.Stats().Evictions > 0 {
				break
			}
			// Keep the first one recently used.
			if _, ok := get(c, rs[0]); !ok {
				t.Fatalf("entry 0 gone at %d", i)
			}
		}
		if _, ok := get(c, rs[0]); !ok {
			t.Error("the most recently used entry was evicted")
		}
		if _, ok := get(c, rs[1]); ok {
			t.Error("the least recently used entry was kept")
		}
	})
	t.Run("NeverOver", func(t *testing.T) {
		const max = 64 << 10
		c := newCache(t, max, nil)
		for i := 0; i < 5000; i++ {
			size := 1 + (i*7919)%8000
			if i%10 == 0 {
				size = 20000 + i // over MaxEntryBytes (max/8 below) or not
			}
			r := read(fmt.Sprintf("SELECT %d", i%700), fmt.Sprintf("t%d", i%13))
			o, _, tk := c.Begin(r, nil)
			if o == resultcache.Lead {
				c.Complete(tk, bytes.Repeat([]byte{'x'}, size), nil)
			}
			if i%97 == 0 {
				c.Invalidate("db", []string{fmt.Sprintf("t%d", i%13)}, resultcache.CauseWrite)
			}
			s := c.Stats()
			if s.Bytes > max || s.Bytes < 0 {
				t.Fatalf("op %d: %d bytes, max %d", i, s.Bytes, max)
			}
		}
		s := c.Stats()
		if s.Evictions == 0 || s.Stores == 0 {
			t.Fatalf("no evictions: %+v", s)
		}
	})
	t.Run("MaxEntryBytes", func(t *testing.T) {
		cfg := resultcache.DefaultConfig()
		cfg.MaxBytes, cfg.MaxEntryBytes = 1<<20, 100
		c := resultcache.New(cfg)
		fill(t, c, read("SELECT big"), string(make([]byte, 101)))
		fill(t, c, read("SELECT small"), string(make([]byte, 100)))
		if _, ok := get(c, read("SELECT big")); ok {
			t.Error("a value over MaxEntryBytes was stored")
		}
		if _, ok := get(c, read("SELECT small")); !ok {
			t.Error("a value of MaxEntryBytes was not stored")
		}
		if s := c.Stats(); s.RefusedTooLarge != 1 || s.Stores != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestCache_TTL(t *testing.T) {
	clock := newClock()
	c := newCache(t, 1<<20, clock)
	short, long := read("SELECT short", "t"), read("SELECT long", "t")
	short.TTL, long.TTL = time.Second, time.Hour
	fill(t, c, short, "s")
	fill(t, c, long, "l")
	clock.Advance(999 * time.Millisecond)
	if _, ok := get(c, short); !ok {
		t.Fatal("expired before its TTL")
	}
	clock.Advance(time.Millisecond)
	if _, ok := get(c, short); ok {
		t.Fatal("served at its expiry")
	}
	if s := c.Stats(); s.Expired != 1 || s.Entries != 1 {
		t.Fatalf("lazy expiry: %+v", s)
	}
	// Sweep drops what nobody asks for.
	for i := 0; i < 50; i++ {
		r := read(fmt.Sprintf("SELECT %d", i), "t")
		r.TTL = time.Duration(1+i) * time.Minute
		fill(t, c, r, "v")
	}
	clock.Advance(25*time.Minute + time.Second)
	if n := c.Sweep(); n != 25 {
		t.Fatalf("Sweep dropped %d, want 25", n)
	}
	if s := c.Stats(); s.Entries != 26 || s.Expired != 26 {
		t.Fatalf("after Sweep: %+v", s)
	}
	if _, ok := get(c, long); !ok {
		t.Fatal("Sweep dropped a live entry")
	}
	// A read that accepts less staleness than the one that stored the
	// entry is not served it, and replaces it.
	strict := *long
	strict.TTL = time.Minute
	if _, ok := get(c, &strict); ok {
		t.Fatal("served an entry older than the read's TTL")
	}
	fill(t, c, &strict, "fresh")
	if v, ok := get(c, long); !ok || v != "fresh" {
		t.Fatalf("got %q %v", v, ok)
	}
}

func TestCache_Invalidate(t *testing.T) {
	t.Run("ByTable", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		ab, b, cc := read("SELECT ab", "a", "b"), read("SELECT b", "b"), read("SELECT c", "c")
		other := read("SELECT ab", "a", "b")
		other.Backend = "db2"
		unknown := read("SELECT ?")
		unknown.AllTables = true
		none := read("SELECT 1")
		for _, r := range []*resultcache.Read{ab, b, cc, other, unknown, none} {
			fill(t, c, r, r.SQL)
		}
		c.Invalidate("db", []string{"a"}, resultcache.CauseWrite)
		for r, want := range map[*resultcache.Read]bool{ab: false, b: true, cc: true, other: true, unknown: false, none: true} {
			if _, ok := get(c, r); ok != want {
				t.Errorf("%s %q: cached %v, want %v", r.Backend, r.SQL, ok, want)
			}
		}
		c.InvalidateBackend("db", resultcache.CauseAdmin)
		for r, want := range map[*resultcache.Read]bool{b: false, cc: false, other: true, none: false} {
			if _, ok := get(c, r); ok != want {
				t.Errorf("backend-wide: %s %q: cached %v, want %v", r.Backend, r.SQL, ok, want)
			}
		}
		s := c.Stats()
		if s.Invalidations[resultcache.CauseWrite] != 1 || s.Dropped[resultcache.CauseWrite] != 2 ||
			s.Invalidations[resultcache.CauseAdmin] != 1 || s.Dropped[resultcache.CauseAdmin] != 3 {
			t.Errorf("stats %+v", s)
		}
		if s.Entries != 1 {
			t.Errorf("%d entries, want 1", s.Entries)
		}
	})
	t.Run("DuringRead", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT v FROM t", "t", "u")
		_, _, tk := c.Begin(r, nil)
		c.Invalidate("db", []string{"u"}, resultcache.CauseWrite)
		c.Complete(tk, []byte("old"), nil)
		if v, ok := get(c, r); ok {
			t.Fatalf("a read that began before the write was stored: %q", v)
		}
		if s := c.Stats(); s.RefusedInvalidated != 1 {
			t.Fatalf("stats %+v", s)
		}
		// Invalidating another table, or another backend, refuses nothing.
		_, _, tk = c.Begin(r, nil)
		c.Invalidate("db", []string{"v"}, resultcache.CauseWrite)
		c.Invalidate("db2", []string{"t"}, resultcache.CauseWrite)
		c.Complete(tk, []byte("new"), nil)
		if v, ok := get(c, r); !ok || v != "new" {
			t.Fatalf("got %q %v", v, ok)
		}
		// Backend-wide, during the read.
		c.Invalidate("db", []string{"t"}, resultcache.CauseWrite)
		_, _, tk = c.Begin(r, nil)
		c.InvalidateBackend("db", resultcache.CauseChangeStream)
		c.Complete(tk, []byte("old"), nil)
		if _, ok := get(c, r); ok {
			t.Fatal("stored across a backend-wide invalidation")
		}
	})
	t.Run("NoJoinAfterWrite", func(t *testing.T) {
		// A read that begins after a write was acknowledged must not be
		// served by a read that began before it.
		c := newCache(t, 1<<20, nil)
		r := read("SELECT v FROM t", "t")
		_, _, old := c.Begin(r, nil)
		w1 := &waiter{}
		if o, _, _ := c.Begin(r, w1); o != resultcache.Wait {
			t.Fatalf("identical read: %v, want Wait", o)
		}
		c.Invalidate("db", []string{"t"}, resultcache.CauseWrite)
		w2 := &waiter{}
		o, _, fresh := c.Begin(r, w2)
		if o != resultcache.Lead {
			t.Fatalf("read after the write: %v, want Lead", o)
		}
		w3 := &waiter{}
		if o, _, _ := c.Begin(r, w3); o != resultcache.Wait {
			t.Fatalf("read after the new leader: %v, want Wait", o)
		}
		c.Complete(old, []byte("old"), nil)
		c.Complete(fresh, []byte("new"), nil)
		if string(w1.value) != "old" || string(w3.value) != "new" || w2.n != 0 {
			t.Fatalf("w1 %q, w3 %q, w2 served %d times", w1.value, w3.value, w2.n)
		}
		if v, _ := get(c, r); v != "new" {
			t.Fatalf("cached %q", v)
		}
	})
	t.Run("Prune", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT", "t1")
		_, _, tk := c.Begin(r, nil)
		for i := 0; i < 100; i++ {
			c.Invalidate("db", []string{fmt.Sprintf("x%d", i)}, resultcache.CauseWrite)
		}
		if c.Stats().Bytes == 0 {
			t.Fatal("table states not counted")
		}
		c.Sweep()
		c.Sweep() // tables idle since the previous Sweep go
		if s := c.Stats(); s.Bytes != 0 {
			t.Fatalf("%d bytes after pruning", s.Bytes)
		}
		// A read in flight across the pruning of tables invalidated since it
		// began is refused (conservatively: it did not read them).
		c.Complete(tk, []byte("x"), nil)
		if s := c.Stats(); s.Stores != 0 {
			t.Fatalf("stats %+v", s)
		}
		fill(t, c, r, "y")
		if v, _ := get(c, r); v != "y" {
			t.Fatalf("got %q", v)
		}
	})
}

func TestCache_Merge(t *testing.T) {
	for _, maxBytes := range []int64{1 << 20, 0} {
		t.Run(fmt.Sprintf("MaxBytes=%d", maxBytes), func(t *testing.T) {
			c := newCache(t, maxBytes, nil)
			r := read("SELECT v FROM t WHERE id = ?", "t")
			r.Params = []any{int64(7)}
			var leader *resultcache.Ticket
			ws := make([]*waiter, 0, 99)
			for i := 0; i < 100; i++ {
				w := &waiter{}
				switch o, _, tk := c.Begin(r, w); o {
				case resultcache.Lead:
					if leader != nil {
						t.Fatalf("read %d leads too", i)
					}
					leader = tk
				case resultcache.Wait:
					ws = append(ws, w)
				default:
					t.Fatalf("read %d: %v", i, o)
				}
			}
			if leader == nil || len(ws) != 99 || c.Waiters(leader) != 99 {
				t.Fatalf("%d waiters", len(ws))
			}
			c.Complete(leader, []byte("row 7"), nil)
			for i, w := range ws {
				if w.n != 1 || string(w.value) != "row 7" || w.err != nil {
					t.Fatalf("waiter %d: served %d times, %q, %v", i, w.n, w.value, w.err)
				}
			}
			s := c.Stats()
			if s.Leads != 1 || s.Merged != 99 {
				t.Fatalf("stats %+v", s)
			}
			c.Complete(leader, []byte("again"), nil) // a second Complete does nothing
			if w := ws[0]; w.n != 1 {
				t.Fatal("served twice")
			}
			_, hit := get(c, r)
			if hit != (maxBytes > 0) {
				t.Fatalf("cached: %v", hit)
			}
		})
	}
	t.Run("Off", func(t *testing.T) {
		cfg := resultcache.DefaultConfig()
		cfg.Merge = false
		c := resultcache.New(cfg)
		r := read("SELECT 1")
		_, _, t1 := c.Begin(r, &waiter{})
		o, _, t2 := c.Begin(r, &waiter{})
		if o != resultcache.Lead {
			t.Fatalf("%v, want Lead with merging off", o)
		}
		c.Complete(t2, []byte("b"), nil)
		c.Complete(t1, []byte("a"), nil)
		if v, _ := get(c, r); v != "a" {
			t.Fatalf("got %q", v)
		}
	})
	t.Run("LeaderFails", func(t *testing.T) {
		c := newCache(t, 1<<20, nil)
		r := read("SELECT 1")
		_, _, tk := c.Begin(r, nil)
		w := &waiter{}
		c.Begin(r, w)
		boom := errors.New("table t does not exist")
		c.Complete(tk, nil, boom)
		if w.n != 1 || !errors.Is(w.err, boom) {
			t.Fatalf("waiter got %v", w.err)
		}
		if _, ok := get(c, r); ok {
			t.Fatal("an error was stored")
		}
	})
	t.Run("LeaderAbandons", func(t *testing.T) {
		// The leader's own deadline passed: the waiters run the read again,
		// merged among themselves.
		c := newCache(t, 1<<20, nil)
		r := read("SELECT 1")
		_, _, tk := c.Begin(r, nil)
		var mu sync.Mutex
		var leads []*resultcache.Ticket
		served := 0
		var retry func() resultcache.Waiter
		retry = func() resultcache.Waiter {
			var w waiterFunc
			w = func(v []byte, err error) {
				if errors.Is(err, resultcache.ErrRetry) {
					switch o, _, tk := c.Begin(r, w); o {
					case resultcache.Lead:
						mu.Lock()
						leads = append(leads, tk)
						mu.Unlock()
					case resultcache.Hit:
						served++
					}
					return
				}
				served++
			}
			return w
		}
		for i := 0; i < 10; i++ {
			if o, _, _ := c.Begin(r, retry()); o != resultcache.Wait {
				t.Fatalf("%v", o)
			}
		}
		c.Abandon(tk)
		if len(leads) != 1 {
			t.Fatalf("%d new leaders, want 1", len(leads))
		}
		c.Complete(leads[0], []byte("v"), nil)
		if served != 9 {
			t.Fatalf("%d served, want 9 (and the new leader)", served)
		}
		if s := c.Stats(); s.Retries != 10 || s.Merged != 9 {
			t.Fatalf("stats %+v", s)
		}
	})
}

type waiterFunc func(v []byte, err error)

func (f waiterFunc) Served(v []byte, err error) { f(v, err) }

func TestCache_Stats(t *testing.T) {
	c := newCache(t, 1<<20, nil)
	r := read("SELECT 1", "t")
	fill(t, c, r, "v") // miss, lead, store
	get(c, r)          // hit
	_, _, tk := c.Begin(read("SELECT 2", "t"), nil)
	c.Begin(read("SELECT 2", "t"), &waiter{})
	c.Invalidate("db", []string{"t"}, resultcache.CauseTxCommit) // drops SELECT 1
	c.Complete(tk, []byte("x"), nil)                             // refused, 1 merged
	c.Invalidate("db", []string{"t"}, resultcache.CauseKeyAPI)
	s := c.Stats()
	want := resultcache.Stats{Hits: 1, Misses: 3, Merged: 1, Leads: 2, Stores: 1, RefusedInvalidated: 1}
	want.Invalidations[resultcache.CauseTxCommit] = 1
	want.Dropped[resultcache.CauseTxCommit] = 1
	want.Invalidations[resultcache.CauseKeyAPI] = 1
	s.Bytes = 0 // the table state's
	if s != want {
		t.Fatalf("stats\n got %+v\nwant %+v", s, want)
	}
	for _, cause := range resultcache.Causes() {
		if cause.String() == "unknown" {
			t.Errorf("cause %d has no name", cause)
		}
	}
}

// TestCache_Concurrent invalidates from other goroutines while one
// goroutine (the event loop's role) begins and completes reads: run with
// -race.
func TestCache_Concurrent(t *testing.T) {
	c := newCache(t, 32<<10, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%50 == 0 {
					c.InvalidateBackend("db", resultcache.CauseChangeStream)
				} else {
					c.Invalidate("db", []string{fmt.Sprintf("t%d", (i+g)%5)}, resultcache.CauseChangeStream)
				}
				if i%20 == 0 {
					c.Sweep()
					_ = c.Stats()
				}
			}
		}()
	}
	var pending []*resultcache.Ticket
	for i := 0; i < 20000; i++ {
		r := read(fmt.Sprintf("SELECT %d", i%50), fmt.Sprintf("t%d", i%5))
		if o, _, tk := c.Begin(r, &waiter{}); o == resultcache.Lead {
			pending = append(pending, tk)
		}
		if len(pending) > 8 {
			c.Complete(pending[0], []byte("value"), nil)
			pending = pending[1:]
		}
	}
	for _, tk := range pending {
		c.Complete(tk, []byte("value"), nil)
	}
	close(stop)
	wg.Wait()
	if s := c.Stats(); s.Bytes > 32<<10 {
		t.Fatalf("%d bytes", s.Bytes)
	}
}

// TestCache_ConcurrentWrites checks the invalidation property with real
// goroutines: writers commit on a fake database, Invalidate and then
// acknowledge, while one goroutine (the event loop's role) begins, runs and
// completes reads. No read may be served a version older than one
// acknowledged before it began.
func TestCache_ConcurrentWrites(t *testing.T) {
	const ntables = 4
	var (
		dbMu    sync.RWMutex
		version [ntables]uint32 // committed
		acked   [ntables]atomic.Uint32
	)
	c := newCache(t, 1<<20, nil)
	names := []string{"t0", "t1", "t2", "t3"}
	// Key i reads tables i%4 and (i+1)%4.
	reads := func(k int) []int { return []int{k % ntables, (k + 1) % ntables} }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				tb := rng.IntN(ntables)
				dbMu.Lock()
				version[tb]++
				v := version[tb]
				dbMu.Unlock()
				c.Invalidate("db", names[tb:tb+1], resultcache.CauseWrite)
				for {
					a := acked[tb].Load()
					if a >= v || acked[tb].CompareAndSwap(a, v) {
						break
					}
				}
			}
		}()
	}
	var stale atomic.Int64
	check := func(k int, need [2]uint32, v []byte) {
		if len(v) != 8 {
			t.Errorf("key %d: %d bytes", k, len(v))
			return
		}
		for i := range need {
			if binary.LittleEndian.Uint32(v[4*i:]) < need[i] {
				stale.Add(1)
			}
		}
	}
	type lead struct {
		tk   *resultcache.Ticket
		k    int
		snap []byte
	}
	var leads []*lead
	rng := rand.New(rand.NewPCG(7, 7))
	hits := 0
	for i := 0; i < 50000; i++ {
		switch p := rng.IntN(10); {
		case p < 5:
			k := rng.IntN(8)
			tb := reads(k)
			need := [2]uint32{acked[tb[0]].Load(), acked[tb[1]].Load()}
			r := read(fmt.Sprintf("SELECT %d", k), names[tb[0]], names[tb[1]])
			w := waiterFunc(func(v []byte, err error) {
				if err == nil {
					check(k, need, v)
				}
			})
			switch o, v, tk := c.Begin(r, w); o {
			case resultcache.Hit:
				hits++
				check(k, need, v)
			case resultcache.Lead:
				leads = append(leads, &lead{tk: tk, k: k})
			}
		case p < 7 && len(leads) > 0:
			l := leads[rng.IntN(len(leads))]
			if l.snap == nil {
				tb := reads(l.k)
				dbMu.RLock()
				l.snap = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, version[tb[0]]), version[tb[1]])
				dbMu.RUnlock()
			}
		case len(leads) > 0:
			j := rng.IntN(len(leads))
			l := leads[j]
			leads = append(leads[:j], leads[j+1:]...)
			if l.snap == nil {
				tb := reads(l.k)
				dbMu.RLock()
				l.snap = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, version[tb[0]]), version[tb[1]])
				dbMu.RUnlock()
			}
			c.Complete(l.tk, l.snap, nil)
		}
	}
	close(stop)
	wg.Wait()
	for _, l := range leads {
		c.Abandon(l.tk)
	}
	if n := stale.Load(); n > 0 {
		t.Fatalf("%d reads served a value older than an acknowledged write", n)
	}
	s := c.Stats()
	t.Logf("%d hits, %d merged, %d stores, %d refused as invalidated", hits, s.Merged, s.Stores, s.RefusedInvalidated)
}

// TestCache_Also: a result that depends on a second backend (a join) is
// dropped by any invalidation there, backend-wide or of any table, and a
// read in flight across one is not stored; invalidations elsewhere leave it.
func TestCache_Also(t *testing.T) {
	c := newCache(t, 1<<20, nil)
	join := func() *resultcache.Read {
		r := read("JOIN users to db2.profiles", "users")
		r.Also = "db2"
		return r
	}
	for _, tc := range []struct {
		name string
		inv  func()
		kept bool
	}{
		{"a table of the second backend", func() { c.Invalidate("db2", []string{"profiles"}, resultcache.CauseWrite) }, false},
		{"the second backend, backend-wide", func() { c.InvalidateBackend("db2", resultcache.CauseKeyAPI) }, false},
		{"its own table", func() { c.Invalidate("db", []string{"users"}, resultcache.CauseWrite) }, false},
		{"another table of its own backend", func() { c.Invalidate("db", []string{"orders"}, resultcache.CauseWrite) }, true},
		{"a third backend", func() { c.InvalidateBackend("db3", resultcache.CauseWrite) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fill(t, c, join(), "rows")
			tc.inv()
			if _, ok := get(c, join()); ok != tc.kept {
				t.Fatalf("cached %v after invalidating %s, want %v", ok, tc.name, tc.kept)
			}
			c.InvalidateBackend("db", resultcache.CauseAdmin) // start the next case empty
		})
	}
	// In flight across an invalidation of the second backend: not stored.
	o, _, tk := c.Begin(join(), nil)
	if o != resultcache.Lead {
		t.Fatalf("Begin = %v, want Lead", o)
	}
	c.Invalidate("db2", []string{"profiles"}, resultcache.CauseWrite)
	c.Complete(tk, []byte("stale rows"), nil)
	if v, ok := get(c, join()); ok {
		t.Fatalf("a read in flight across a write to its second backend was stored: %q", v)
	}
}
