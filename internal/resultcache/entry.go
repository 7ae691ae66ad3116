package resultcache

import "unsafe"

// The cache's structures are written by hand rather than taken from
// hashicorp/golang-lru/v2 (which the module already uses): its LRUs bound the
// number of entries, not bytes; its expirable LRU has one TTL for all entries
// and a goroutine of its own; and an entry here must also be reachable from
// the invalidation index (one list per table, one per backend) and an expiry
// heap. With intrusive lists an entry is one allocation of known size, which
// also keeps the byte accounting honest, and removal from every structure is
// O(1) (O(log n) for the heap).

// entry is a stored result. It is in the cache's LRU list, its backend's
// list, one table list per table it read (or its backend's any-table list)
// and the expiry heap, or in none of them once removed.
type entry struct {
	key     mapKey
	value   []byte
	stored  int64 // on the cache's clock (nanoseconds since New)
	expires int64
	size    int64 // what it counts in Bytes
	b       *backendState

	prev, next   *entry // LRU list; next is older
	bprev, bnext *entry // the backend's entries
	heapIdx      int    // in the expiry heap; -1 once removed
	tags         []tag  // its memberships in table lists
}

// tag is an entry's membership in one table list (tableState.entries or
// backendState.anyTable).
type tag struct {
	e          *entry
	list       *tagList
	prev, next *tag
}

// tagList is a list of tags, the entries that read one table.
type tagList struct{ first *tag }

func (l *tagList) push(t *tag) {
	t.list, t.prev, t.next = l, nil, l.first
	if l.first != nil {
		l.first.prev = t
	}
	l.first = t
}

func (t *tag) unlink() {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		t.list.first = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.list, t.prev, t.next = nil, nil, nil
}

// lruList is the cache's entries, most recently used first; root is a
// sentinel of a circular list.
type lruList struct{ root entry }

func (l *lruList) init() { l.root.prev, l.root.next = &l.root, &l.root }

func (l *lruList) pushFront(e *entry) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

func (l *lruList) remove(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (l *lruList) moveToFront(e *entry) {
	if l.root.next == e {
		return
	}
	l.remove(e)
	l.pushFront(e)
}

// back returns the least recently used entry, or nil.
func (l *lruList) back() *entry {
	if l.root.prev == &l.root {
		return nil
	}
	return l.root.prev
}

// expiryHeap is a min-heap of entries by expiry, for Sweep. It is written
// out rather than through container/heap to keep heapIdx in step without an
// interface call per swap.
type expiryHeap []*entry

func (h *expiryHeap) push(e *entry) {
	e.heapIdx = len(*h)
	*h = append(*h, e)
	h.up(e.heapIdx)
}

func (h *expiryHeap) remove(e *entry) {
	s := *h
	i, last := e.heapIdx, len(s)-1
	if i != last {
		s[i] = s[last]
		s[i].heapIdx = i
	}
	s[last] = nil
	*h = s[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	e.heapIdx = -1
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].expires <= h[i].expires {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h expiryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].expires < h[l].expires {
			m = r
		}
		if h[i].expires <= h[m].expires {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

// Sizes counted in Bytes, beside the allocations' own (rounded to Go's size
// classes by allocSize). A map slot is its key, its value and a control
// byte, over the swiss table's 7/8 load factor; a heap slot is a pointer,
// twice for the slice's growth.
var (
	entryMapSlot = int64((unsafe.Sizeof(mapKey{})+unsafe.Sizeof((*entry)(nil))+1)*8/7) + 1
	tableMapSlot = int64((unsafe.Sizeof("")+unsafe.Sizeof((*tableState)(nil))+1)*8/7) + 1
	heapSlot     = int64(2 * unsafe.Sizeof((*entry)(nil)))
	entryStruct  = int64(unsafe.Sizeof(entry{}))
	tagStruct    = int64(unsafe.Sizeof(tag{}))
	tableStruct  = int64(unsafe.Sizeof(tableState{}))
)

// entrySize is what an entry with this key, value and number of tags counts
// in Bytes: each allocation rounded up to its size class, plus its map and
// heap slots. The profile is not counted: it is the caller's, shared.
func entrySize(keyLen, valueLen, ntags int) int64 {
	return allocSize(entryStruct) + allocSize(int64(keyLen)) + allocSize(int64(valueLen)) +
		allocSize(int64(ntags)*tagStruct) + entryMapSlot + heapSlot
}

// tableSize is what a table's state counts in Bytes.
func tableSize(nameLen int) int64 {
	return allocSize(tableStruct) + allocSize(int64(nameLen)) + tableMapSlot
}

// sizeClasses are Go's allocation size classes up to 32 KiB
// (runtime/sizeclasses.go); larger allocations take whole 8 KiB pages.
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize returns the bytes the Go allocator takes for an n-byte object.
func allocSize(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > 32768 {
		return (n + 8191) &^ 8191
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if sizeClasses[m] < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return sizeClasses[lo]
}
