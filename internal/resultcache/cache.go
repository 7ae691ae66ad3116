package resultcache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Errors.
var (
	// ErrRetry is what Abandon hands the waiters of a read: its leader gave it
	// up for a reason of its own (its deadline, its client gone), so each
	// waiter should run the read itself: Begin again, and lead or wait anew.
	ErrRetry = errors.New("merged read abandoned by its leader: run it again")
)

// checkStore and checkJoin are turned off by a test only, to show that the
// invalidation race test catches a cache that stores, or merges, what it
// must refuse.
var checkStore, checkJoin = true, true

// Config is a cache's configuration.
type Config struct {
	// MaxBytes bounds Bytes (stored values, keys, the invalidation index and
	// the structures' overhead, each allocation rounded to Go's size
	// classes); the least recently used entries are evicted to stay within
	// it. Reads in flight are not counted (the server bounds them). 0 turns
	// caching off: nothing is stored or served, and Begin only merges reads
	// (if Merge).
	MaxBytes int64
	// MaxEntryBytes is the largest value stored; larger results are served
	// to their waiters but not stored.
	MaxEntryBytes int
	// Merge merges identical reads in flight (stampede protection).
	Merge bool
	// Now is the clock of TTLs; nil means time.Now. For tests.
	Now func() time.Time
}

// DefaultConfig returns a configuration with caching and merging on.
func DefaultConfig() Config {
	return Config{MaxBytes: 64 << 20, MaxEntryBytes: 1 << 20, Merge: true}
}

// Validate checks the configuration's values.
func (c Config) Validate() error {
	if c.MaxBytes < 0 {
		return fmt.Errorf("max_bytes: %d is negative", c.MaxBytes)
	}
	if c.MaxEntryBytes < 0 {
		return fmt.Errorf("max_entry_bytes: %d is negative", c.MaxEntryBytes)
	}
	if c.MaxBytes > 0 && int64(c.MaxEntryBytes) > c.MaxBytes {
		return fmt.Errorf("max_entry_bytes: %d is over max_bytes (%d)", c.MaxEntryBytes, c.MaxBytes)
	}
	return nil
}

// Outcome is Begin's answer.
type Outcome uint8

// Begin's outcomes.
const (
	Hit  Outcome = iota // the result is cached: write it, done
	Wait                // an identical read is in flight: the Waiter will be called
	Lead                // run the read, then Complete or Abandon its Ticket
)

// Waiter receives the outcome of the read it waits for. Served is called
// once, on the goroutine that calls Complete or Abandon, with the cache's
// mutex released (it may call the Cache, e.g. Begin again on ErrRetry).
// value is valid only during the call (write it out, or copy it) and must
// not be modified; err is the leader's error, or ErrRetry.
//
// The cache keeps the Waiter until Served: a server must not reuse the
// object for another request before then, even if it already answered the
// request (below).
//
// A waiter with a shorter deadline than its leader times out on its own:
// the server answers it with its timeout when its deadline passes and
// ignores the Served that comes later. A waiter whose client went away is
// handled the same way. The leader's read goes on for the others.
type Waiter interface {
	Served(value []byte, err error)
}

// Ticket is a leader's claim on a read, from Begin to Complete or Abandon.
// Its fields are the cache's (guarded by its mutex).
type Ticket struct {
	key     mapKey
	b       *backendState
	start   uint64 // the cache's invalidation clock at Begin
	tables  []string
	all     bool
	also    *backendState // Read.Also's, or nil
	ttl     time.Duration
	keyed   bool // false: a parameter could not be keyed; never merged nor stored
	inMap   bool // the flight other reads join (Cache.flights)
	done    bool
	waiters []Waiter
}

// backendState is a backend's part of the invalidation index.
type backendState struct {
	name    string
	gen     uint64 // clock of its last backend-wide invalidation
	anyGen  uint64 // clock of its last invalidation of any kind
	floor   uint64 // generation of the tables not in tables (pruned); >= gen
	tables  map[string]*tableState
	anyTbl  tagList // entries whose tables are unknown (Read.AllTables)
	foreign tagList // other backends' entries that depend on this one too (Read.Also)
	first   *entry  // its entries (bprev/bnext)
}

// tableState is a (backend, table)'s generation and the entries that read it.
type tableState struct {
	name    string
	gen     uint64 // clock of its last invalidation
	entries tagList
}

// Cache is a shared cache of encoded query results with merging of
// identical reads in flight; see the package comment for its contracts.
// The zero Cache is not usable; New makes one.
type Cache struct {
	cfg   Config
	epoch time.Time
	ctr   counters

	mu        sync.Mutex
	scratch   []byte // the key being looked up
	entries   map[mapKey]*entry
	flights   map[mapKey]*Ticket
	backends  map[string]*backendState
	lru       lruList
	expiry    expiryHeap
	clock     uint64 // invalidations so far
	pruneGen  uint64 // clock at the last Sweep: tables idle since may be pruned
	bytes     int64
	nentries  int64
	tableByte int64 // part of bytes that is table states
}

// New returns a cache with cfg (Validate it first). It starts nothing:
// the caller runs Sweep periodically.
func New(cfg Config) *Cache {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, epoch: cfg.Now(), entries: map[mapKey]*entry{}, flights: map[mapKey]*Ticket{},
		backends: map[string]*backendState{}}
	c.lru.init()
	return c
}

// caching reports whether results are stored at all.
func (c *Cache) caching() bool { return c.cfg.MaxBytes > 0 }

func (c *Cache) now() int64 { return int64(c.cfg.Now().Sub(c.epoch)) }

// maxScratch bounds the key buffer a Cache keeps between calls.
const maxScratch = 64 << 10

// Begin starts the read r. It returns:
//   - Hit and the stored value (the reply's body; see the package comment),
//     which is immutable and stays valid after the entry is gone. An entry
//     is served while within the TTL of the read that stored it and within
//     r.TTL of being stored;
//   - Wait: an identical read (same Key) is in flight, began after the last
//     invalidation of any table r reads, and w is registered to be served
//     its outcome; w nil never waits (Lead instead);
//   - Lead and a Ticket: the caller runs the read and must end the ticket
//     with Complete or Abandon exactly once, even if its own client went
//     away or timed out, because other reads may be waiting on it.
//
// A hit is possible only if r.TTL > 0 and caching is on. Safe from any
// goroutine; nothing of r is kept but r.Profile (and w).
func (c *Cache) Begin(r *Read, w Waiter) (Outcome, []byte, *Ticket) {
	c.mu.Lock()
	if cap(c.scratch) > maxScratch {
		c.scratch = nil // the last key was huge: do not keep its buffer
	}
	var ok bool
	c.scratch, ok = appendKey(c.scratch[:0], &r.Key)
	if !ok {
		c.ctr.leads.Add(1)
		c.mu.Unlock()
		return Lead, nil, &Ticket{ttl: r.TTL}
	}
	// Looked up with the scratch bytes as the key's text, copied only when
	// the key is kept (lead).
	k := mapKey{r.Profile, unsafe.String(unsafe.SliceData(c.scratch), len(c.scratch))}
	if r.TTL > 0 && c.caching() {
		if e := c.entries[k]; e != nil {
			now := c.now()
			switch {
			case now >= e.expires:
				c.removeEntry(e)
				c.ctr.expired.Add(1)
				c.publishSize()
			case now-e.stored < int64(r.TTL):
				c.lru.moveToFront(e)
				v := e.value
				c.mu.Unlock()
				c.ctr.hits.Add(1)
				return Hit, v, nil
			}
			// Else live, but older than this read accepts: it leads (or
			// waits), and its result replaces the entry.
		}
		c.ctr.misses.Add(1)
	}
	// The flight other reads of k join: one is replaced when it began
	// before an invalidation of its tables (it can serve no later read; it
	// completes for its own waiters).
	join := false
	if c.cfg.Merge {
		f := c.flights[k]
		switch {
		case f == nil:
			join = true
		case !checkJoin || !c.stale(f.b, f.start, f.tables, f.all) && (f.also == nil || f.also.anyGen <= f.start):
			if w != nil {
				f.waiters = append(f.waiters, w)
				c.mu.Unlock()
				return Wait, nil, nil
			}
		default:
			f.inMap = false
			join = true
		}
	}
	t := &Ticket{key: mapKey{r.Profile, string(c.scratch)}, b: c.backend(r.Backend), start: c.clock,
		all: r.AllTables, ttl: r.TTL, keyed: true}
	if !r.AllTables && len(r.Tables) > 0 {
		t.tables = append([]string(nil), r.Tables...)
	}
	if r.Also != "" && r.Also != r.Backend {
		t.also = c.backend(r.Also)
	}
	if join {
		c.flights[t.key] = t
		t.inMap = true
	}
	c.mu.Unlock()
	c.ctr.leads.Add(1)
	return Lead, nil, t
}

// Waiters returns how many reads wait on t: a server whose leading client
// went away cancels the read only if none do (and then calls Abandon, which
// sends any waiter that joined meanwhile to run the read itself).
func (c *Cache) Waiters(t *Ticket) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(t.waiters)
}

// Complete ends t's read with its outcome: value, the reply's body (see the
// package comment), or err, an error reply every waiter shares (the
// statement failed, the backend is down, the result is over
// max_result_bytes). Every waiter is served, on this goroutine, before
// Complete returns; value is then stored, copied, if the read opted in
// (TTL > 0), caching is on, it fits MaxEntryBytes, and neither its backend
// nor any table it read was invalidated since Begin. An error is never
// stored. value may be reused once Complete returns. A second call on the
// same ticket does nothing.
func (c *Cache) Complete(t *Ticket, value []byte, err error) {
	c.mu.Lock()
	if t.done {
		c.mu.Unlock()
		return
	}
	ws := c.finish(t)
	if err == nil && t.ttl > 0 && c.caching() {
		c.store(t, value)
	}
	c.mu.Unlock()
	c.ctr.merged.Add(uint64(len(ws)))
	for _, w := range ws {
		w.Served(value, err)
	}
}

// Abandon ends t's read without an outcome its waiters can share: the
// leader's own deadline passed, or its client went away and the read was
// cancelled. Each waiter is served ErrRetry (and runs the read itself);
// nothing is stored. A call after Complete or Abandon does nothing.
func (c *Cache) Abandon(t *Ticket) {
	c.mu.Lock()
	if t.done {
		c.mu.Unlock()
		return
	}
	ws := c.finish(t)
	c.mu.Unlock()
	c.ctr.retries.Add(uint64(len(ws)))
	for _, w := range ws {
		w.Served(nil, ErrRetry)
	}
}

// finish ends t's flight and returns its waiters. Called with c.mu held.
func (c *Cache) finish(t *Ticket) []Waiter {
	t.done = true
	if t.inMap {
		delete(c.flights, t.key)
		t.inMap = false
	}
	ws := t.waiters
	t.waiters = nil
	return ws
}

// store stores t's value if it may. Called with c.mu held.
func (c *Cache) store(t *Ticket, value []byte) {
	if !t.keyed {
		c.ctr.refusedUncache.Add(1)
		return
	}
	b := t.b
	if checkStore && (c.stale(b, t.start, t.tables, t.all) || t.also != nil && t.also.anyGen > t.start) {
		c.ctr.refusedInvalidated.Add(1)
		return
	}
	ntags := len(t.tables)
	if t.all {
		ntags = 1
	}
	if t.also != nil {
		ntags++
	}
	size := entrySize(len(t.key.text), len(value), ntags)
	if len(value) > c.cfg.MaxEntryBytes || size > c.cfg.MaxBytes-c.tableByte {
		c.ctr.refusedTooLarge.Add(1)
		return
	}
	if old := c.entries[t.key]; old != nil {
		c.removeEntry(old)
	}
	now := c.now()
	e := &entry{key: t.key, value: make([]byte, len(value)), size: size, b: b,
		stored: now, expires: now + int64(t.ttl), tags: make([]tag, ntags)}
	copy(e.value, value)
	if t.all {
		e.tags[0].e = e
		b.anyTbl.push(&e.tags[0])
	}
	for i, name := range t.tables {
		e.tags[i].e = e
		c.table(b, name).entries.push(&e.tags[i])
	}
	if t.also != nil {
		last := &e.tags[ntags-1]
		last.e = e
		t.also.foreign.push(last)
	}
	c.entries[e.key] = e
	c.lru.pushFront(e)
	e.bnext = b.first
	if b.first != nil {
		b.first.bprev = e
	}
	b.first = e
	c.expiry.push(e)
	c.bytes += size
	c.nentries++
	c.ctr.stores.Add(1)
	c.shrink()
	c.publishSize()
}

// stale reports whether a read of tables (all: of unknown tables) on b that
// began at clock start may hold a value older than an invalidation since.
// Called with c.mu held.
func (c *Cache) stale(b *backendState, start uint64, tables []string, all bool) bool {
	if b.gen > start {
		return true
	}
	if all {
		return b.anyGen > start
	}
	for _, name := range tables {
		if ts := b.tables[name]; ts != nil {
			if ts.gen > start {
				return true
			}
		} else if b.floor > start {
			return true
		}
	}
	return false
}

// backend returns name's state, created if need be. Called with c.mu held.
func (c *Cache) backend(name string) *backendState {
	b := c.backends[name]
	if b == nil {
		b = &backendState{name: strings.Clone(name), tables: map[string]*tableState{}}
		c.backends[b.name] = b
	}
	return b
}

// table returns the state of b's table name, created if need be (a copy of
// name: the caller's may point into a statement's text). Called with c.mu
// held.
func (c *Cache) table(b *backendState, name string) *tableState {
	ts := b.tables[name]
	if ts == nil {
		ts = &tableState{name: strings.Clone(name), gen: b.floor}
		b.tables[ts.name] = ts
		n := tableSize(len(name))
		c.bytes += n
		c.tableByte += n
	}
	return ts
}

// removeEntry takes e out of every structure. Called with c.mu held; the
// caller counts why and calls publishSize.
func (c *Cache) removeEntry(e *entry) {
	delete(c.entries, e.key)
	c.lru.remove(e)
	if e.bprev != nil {
		e.bprev.bnext = e.bnext
	} else {
		e.b.first = e.bnext
	}
	if e.bnext != nil {
		e.bnext.bprev = e.bprev
	}
	e.bprev, e.bnext = nil, nil
	for i := range e.tags {
		e.tags[i].unlink()
	}
	c.expiry.remove(e)
	c.bytes -= e.size
	c.nentries--
}

// shrink evicts the least recently used entries until Bytes is within
// MaxBytes. Called with c.mu held.
func (c *Cache) shrink() {
	for c.bytes > c.cfg.MaxBytes {
		e := c.lru.back()
		if e == nil {
			return
		}
		c.removeEntry(e)
		c.ctr.evictions.Add(1)
	}
}

func (c *Cache) publishSize() {
	c.ctr.bytes.Store(c.bytes)
	c.ctr.entries.Store(c.nentries)
}

// Invalidate records that tables of backend were written, and drops every
// entry that read any of them (or read unknown tables of backend). Reads of
// them in flight that began before are neither stored nor joined. Call it
// after the backend acknowledged the write and before the write's reply
// goes out (see the package comment). Safe from any goroutine.
func (c *Cache) Invalidate(backend string, tables []string, cause Cause) {
	c.mu.Lock()
	b := c.backend(backend)
	c.clock++
	b.anyGen = c.clock
	n := 0
	for _, name := range tables {
		ts := c.table(b, name)
		ts.gen = c.clock
		n += c.dropList(&ts.entries)
	}
	n += c.dropList(&b.anyTbl)
	n += c.dropList(&b.foreign)
	c.shrink() // new table states count too
	c.publishSize()
	c.mu.Unlock()
	c.counted(cause, n)
}

// InvalidateBackend drops every entry of backend, and refuses every read of
// it in flight that began before: for writes whose tables are not known.
// Safe from any goroutine.
func (c *Cache) InvalidateBackend(backend string, cause Cause) {
	c.mu.Lock()
	b := c.backend(backend)
	c.clock++
	b.gen, b.anyGen, b.floor = c.clock, c.clock, c.clock
	n := c.dropList(&b.foreign)
	for b.first != nil {
		c.removeEntry(b.first)
		n++
	}
	// Every table's generation is now below b.gen: their states can go.
	for name := range b.tables {
		sz := tableSize(len(name))
		c.bytes -= sz
		c.tableByte -= sz
	}
	clear(b.tables)
	c.publishSize()
	c.mu.Unlock()
	c.counted(cause, n)
}

// dropList removes every entry in l and returns how many. Called with c.mu
// held.
func (c *Cache) dropList(l *tagList) int {
	n := 0
	for l.first != nil {
		c.removeEntry(l.first.e)
		n++
	}
	return n
}

func (c *Cache) counted(cause Cause, dropped int) {
	if cause >= numCauses {
		cause = CauseAdmin
	}
	c.ctr.invalidations[cause].Add(1)
	c.ctr.dropped[cause].Add(uint64(dropped))
}

// Sweep drops the entries past their TTL and forgets the tables that have
// no entries and were not invalidated since the previous Sweep (a read in
// flight across two Sweeps is then refused a store, never served stale).
// It returns how many entries it dropped. Run it periodically (every few
// seconds): expired entries are never served anyway, Sweep frees their
// memory. Safe from any goroutine.
func (c *Cache) Sweep() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	n := 0
	for len(c.expiry) > 0 && c.expiry[0].expires <= now {
		c.removeEntry(c.expiry[0])
		n++
	}
	for _, b := range c.backends {
		for name, ts := range b.tables {
			if ts.entries.first == nil && ts.gen <= c.pruneGen {
				b.floor = max(b.floor, ts.gen)
				delete(b.tables, name)
				sz := tableSize(len(name))
				c.bytes -= sz
				c.tableByte -= sz
			}
		}
	}
	c.pruneGen = c.clock
	c.ctr.expired.Add(uint64(n))
	c.publishSize()
	return n
}

// Stats returns a snapshot of the counters, read without the mutex (each
// counter is atomic; together they may be a few operations apart).
func (c *Cache) Stats() Stats { return c.ctr.snapshot() }
