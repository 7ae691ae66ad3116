package resultcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The invalidation race, as a property: random interleavings of reads
// (begin, run on the database, complete), writes (commit on the database,
// invalidate, acknowledge), TTL and Sweep, across keys, tables and two
// backends, checked against a model of the database: no read (hit, merged
// or led) is served a value older than the latest write acknowledged before
// the read began.

type tbl struct{ backend, name string }

// modelKey is a read of the model: what the cache is told, and the tables
// the statement really reads.
type modelKey struct {
	r     Read
	reads []tbl
}

type modelLead struct {
	t        *Ticket
	k        int
	need     []uint32
	snap     []uint32
	executed bool
}

type modelWrite struct {
	tables      []tbl
	versions    []uint32 // the versions it made
	invalidated bool
}

type model struct {
	t       *testing.T
	c       *Cache
	rng     *rand.Rand
	now     time.Time
	keys    []modelKey
	version map[tbl]uint32 // committed on the database
	acked   map[tbl]uint32 // acknowledged to a client
	leads   []*modelLead
	writes  []*modelWrite
	stale   int // reads served an old value
	served  int
}

func newModel(t *testing.T, seed uint64, maxBytes int64) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: time.Unix(0, 0),
		version: map[tbl]uint32{}, acked: map[tbl]uint32{}}
	cfg := Config{MaxBytes: maxBytes, MaxEntryBytes: 1024, Merge: true, Now: func() time.Time { return m.now }}
	m.c = New(cfg)
	key := func(backend, sql string, params []any, all bool, ttl time.Duration, names ...string) {
		k := modelKey{r: Read{Key: Key{Backend: backend, SQL: sql, Params: params}, AllTables: all, TTL: ttl}}
		for _, n := range names {
			k.reads = append(k.reads, tbl{backend, n})
		}
		if !all {
			k.r.Tables = names
		}
		m.keys = append(m.keys, k)
	}
	sec := time.Second
	key("a", "SELECT x", nil, false, 5*sec, "x")
	key("a", "SELECT x JOIN y", nil, false, 3*sec, "x", "y")
	key("a", "SELECT y, z (unknown tables)", nil, true, 5*sec, "y", "z")
	key("b", "SELECT x", nil, false, 5*sec, "x")
	key("a", "SELECT z (merge only)", nil, false, 0, "z")
	key("a", "SELECT ?", []any{int64(1)}, false, 8*sec, "x")
	key("a", "SELECT ?", []any{"1"}, false, 8*sec, "y", "z")
	key("b", "SELECT x, y, z", nil, false, 2*sec, "x", "y", "z")
	key("a", "SELECT 1", nil, false, 5*sec)
	return m
}

// need returns the versions of k's tables acknowledged so far: what a read
// of k that begins now must see at least.
func (m *model) need(k int) []uint32 {
	var n []uint32
	for _, t := range m.keys[k].reads {
		n = append(n, m.acked[t])
	}
	return n
}

func (m *model) check(how string, k int, need []uint32, value []byte) {
	m.served++
	if len(value) != 4*len(need) {
		m.stale++
		m.logf("%s of key %d: value of %d bytes, want %d (another key's?)", how, k, len(value), 4*len(need))
		return
	}
	for i, n := range need {
		if got := binary.LittleEndian.Uint32(value[4*i:]); got < n {
			m.stale++
			if m.stale <= 3 {
				m.logf("%s of key %d: %v at version %d, acknowledged %d before the read began",
					how, k, m.keys[k].reads[i], got, n)
			}
		}
	}
}

// logf logs, unless the model runs without a test (Teeth).
func (m *model) logf(format string, args ...any) {
	if m.t != nil {
		m.t.Helper()
		m.t.Logf(format, args...)
	}
}

// modelWaiter is a merged read.
type modelWaiter struct {
	m    *model
	k    int
	need []uint32
}

func (w *modelWaiter) Served(v []byte, err error) {
	switch {
	case errors.Is(err, ErrRetry):
		w.m.begin(w.k, w.need)
	case err == nil:
		w.m.check("merged read", w.k, w.need, v)
	}
}

func (m *model) begin(k int, need []uint32) {
	switch o, v, t := m.c.Begin(&m.keys[k].r, &modelWaiter{m, k, need}); o {
	case Hit:
		m.check("hit", k, need, v)
	case Lead:
		m.leads = append(m.leads, &modelLead{t: t, k: k, need: need})
	}
}

func (m *model) execute(l *modelLead) {
	l.executed = true
	for _, t := range m.keys[l.k].reads {
		l.snap = append(l.snap, m.version[t])
	}
}

func (m *model) step() {
	switch p := m.rng.IntN(100); {
	case p < 25:
		k := m.rng.IntN(len(m.keys))
		m.begin(k, m.need(k))
	case p < 45 && len(m.leads) > 0:
		if l := m.leads[m.rng.IntN(len(m.leads))]; !l.executed {
			m.execute(l)
		}
	case p < 57 && len(m.leads) > 0:
		i := m.rng.IntN(len(m.leads))
		l := m.leads[i]
		m.leads = append(m.leads[:i], m.leads[i+1:]...)
		if !l.executed {
			m.execute(l)
		}
		switch q := m.rng.IntN(100); {
		case q < 4:
			m.c.Complete(l.t, nil, errors.New("deadlock"))
		case q < 8:
			m.c.Abandon(l.t)
		default:
			v := make([]byte, 0, 4*len(l.snap)+64)
			for _, s := range l.snap {
				v = binary.LittleEndian.AppendUint32(v, s)
			}
			m.check("led read", l.k, l.need, v)
			m.c.Complete(l.t, v, nil)
		}
	case p < 67:
		backend := []string{"a", "b"}[m.rng.IntN(2)]
		w := &modelWrite{}
		for _, n := range []string{"x", "y", "z"} {
			if m.rng.IntN(2) == 0 {
				t := tbl{backend, n}
				m.version[t]++
				w.tables = append(w.tables, t)
				w.versions = append(w.versions, m.version[t])
			}
		}
		m.writes = append(m.writes, w)
	case p < 80 && len(m.writes) > 0:
		w := m.writes[m.rng.IntN(len(m.writes))]
		if !w.invalidated && len(w.tables) > 0 {
			if m.rng.IntN(10) == 0 {
				m.c.InvalidateBackend(w.tables[0].backend, CauseAdmin)
			} else {
				var names []string
				for _, t := range w.tables {
					names = append(names, t.name)
				}
				m.c.Invalidate(w.tables[0].backend, names, CauseWrite)
			}
		}
		w.invalidated = true
	case p < 95 && len(m.writes) > 0:
		i := m.rng.IntN(len(m.writes))
		if w := m.writes[i]; w.invalidated {
			for j, t := range w.tables {
				// Its own version, not the table's latest: a later write
				// may be committed and not yet acknowledged.
				m.acked[t] = max(m.acked[t], w.versions[j])
			}
			m.writes = append(m.writes[:i], m.writes[i+1:]...)
		}
	case p < 97:
		m.now = m.now.Add(time.Duration(m.rng.IntN(3000)) * time.Millisecond)
	default:
		m.c.Sweep()
	}
}

// run runs steps steps, then drains the reads in flight.
func (m *model) run(steps int) {
	for i := 0; i < steps; i++ {
		m.step()
		if i%16 == 0 {
			if err := m.c.checkInvariants(); err != nil {
				panic(fmt.Sprintf("step %d: %v", i, err))
			}
		}
	}
	for len(m.leads) > 0 {
		l := m.leads[0]
		m.leads = m.leads[1:]
		m.c.Abandon(l.t)
	}
}

func TestCache_InvalidationRace(t *testing.T) {
	seeds, steps := 200, 3000
	if testing.Short() {
		seeds = 20
	}
	var total Stats
	served := 0
	for seed := 0; seed < seeds; seed++ {
		// Small enough to evict, or large enough to keep every key.
		m := newModel(t, uint64(seed), []int64{1800, 1 << 20}[seed%2])
		m.run(steps)
		if m.stale > 0 {
			t.Fatalf("seed %d: %d of %d reads served a value older than an acknowledged write", seed, m.stale, m.served)
		}
		s := m.c.Stats()
		total.Hits += s.Hits
		total.Merged += s.Merged
		total.RefusedInvalidated += s.RefusedInvalidated
		total.Evictions += s.Evictions
		total.Expired += s.Expired
		total.Retries += s.Retries
		served += m.served
	}
	t.Logf("%d reads checked: %d hits, %d merged, %d stores refused as invalidated, %d evictions, %d expired, %d retries",
		served, total.Hits, total.Merged, total.RefusedInvalidated, total.Evictions, total.Expired, total.Retries)
	if total.Hits == 0 || total.Merged == 0 || total.RefusedInvalidated == 0 || total.Evictions == 0 ||
		total.Expired == 0 || total.Retries == 0 {
		t.Fatal("the interleavings miss a path")
	}
}

// TestCache_InvalidationRace_Teeth shows that the property test fails a
// cache without either generation check.
func TestCache_InvalidationRace_Teeth(t *testing.T) {
	for name, check := range map[string]*bool{"Store": &checkStore, "Join": &checkJoin} {
		t.Run(name, func(t *testing.T) {
			*check = false
			defer func() { *check = true }()
			stale := 0
			for seed := 0; seed < 100 && stale == 0; seed++ {
				m := newModel(nil, uint64(seed), 1<<20)
				m.run(3000)
				stale += m.stale
			}
			if stale == 0 {
				t.Fatal("no stale read found without the check")
			}
		})
	}
}

// checkInvariants recomputes what the cache counts and checks its
// structures agree.
func (c *Cache) checkInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var bytes, n int64
	for e := c.lru.root.next; e != &c.lru.root; e = e.next {
		bytes += e.size
		n++
		if c.entries[e.key] != e {
			return fmt.Errorf("entry %q in the LRU list, not in the map", e.key.text)
		}
		if c.expiry[e.heapIdx] != e {
			return fmt.Errorf("entry %q: heap index %d wrong", e.key.text, e.heapIdx)
		}
		for i := range e.tags {
			if e.tags[i].list == nil {
				return fmt.Errorf("entry %q: tag %d in no list", e.key.text, i)
			}
		}
	}
	for i := 1; i < len(c.expiry); i++ {
		if c.expiry[(i-1)/2].expires > c.expiry[i].expires {
			return fmt.Errorf("expiry heap out of order at %d", i)
		}
	}
	var tables int64
	nb := int64(0)
	for _, b := range c.backends {
		for name := range b.tables {
			tables += tableSize(len(name))
		}
		for e := b.first; e != nil; e = e.bnext {
			nb++
		}
	}
	switch {
	case n != int64(len(c.entries)) || n != c.nentries || n != int64(len(c.expiry)) || n != nb:
		return fmt.Errorf("%d entries listed, %d in the map, %d counted, %d in the heap, %d in backends",
			n, len(c.entries), c.nentries, len(c.expiry), nb)
	case tables != c.tableByte:
		return fmt.Errorf("tables count %d bytes, %d counted", tables, c.tableByte)
	case bytes+tables != c.bytes:
		return fmt.Errorf("entries and tables are %d bytes, %d counted", bytes+tables, c.bytes)
	case c.cfg.MaxBytes > 0 && c.bytes > c.cfg.MaxBytes:
		return fmt.Errorf("%d bytes over max %d", c.bytes, c.cfg.MaxBytes)
	}
	return nil
}

func TestAllocSize(t *testing.T) {
	for n, want := range map[int64]int64{0: 0, 1: 8, 8: 8, 9: 16, 33: 48, 1025: 1152, 32768: 32768, 32769: 40960} {
		if got := allocSize(n); got != want {
			t.Errorf("allocSize(%d) = %d, want %d", n, got, want)
		}
	}
	// An entry of a 100-byte key and a 1000-byte value counts at least its
	// data and its structures.
	if s := entrySize(100, 1000, 2); s < 1100+entryStruct+2*tagStruct {
		t.Errorf("entrySize = %d", s)
	}
}
