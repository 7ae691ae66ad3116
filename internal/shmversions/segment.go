// Package shmversions publishes tetherd's per-table versions in a System V
// shared memory segment, for the PHP client's local cache (docs/operations.md,
// "Result cache", and docs/protocol.md, "Table versions"): a PHP worker keeps a
// cached read's reply in APCu with the versions of the slots it depends on, and
// serves it again without a call to tetherd while those versions, the
// segment's generation and its reset counter are unchanged, the heartbeat is
// recent and the TTL has not passed. tetherd stays the one authority on
// freshness: it bumps a slot whenever it drops cached results that depend on
// it, before the write that made them stale is answered.
//
// The segment (little-endian, every field 8-byte aligned):
//
//	offset  size  field
//	0       8     magic "TTHRVER1"
//	8       4     layout version (1)
//	12      4     number of slots N
//	16      8     generation: changes whenever a tetherd opens the segment; 0 once it closed it
//	24      8     reset counter: bumped when everything published so far is void (a reload)
//	32      8     heartbeat: Unix milliseconds, written every HeartbeatEvery
//	40      4     heartbeat bound, milliseconds: a reader refuses entries when the heartbeat is older
//	44      20    reserved (zero)
//	64      8*N   slot versions, uint64 each
//
// A (backend, table) maps to a slot by a hash of both names, and each backend
// has one slot more, "any", bumped by every drop on it (for a read whose
// tables are not known). A result depends on its tables' slots only (one, for
// most reads: one slot compared per hit): a drop of a backend's whole cache
// bumps every table slot handed out for it (TableSlotFor remembers them) and
// its "any" slot. Slots are shared by hash collisions: a collision costs a
// needless miss, never a stale hit.
//
// The segment's key is ftok(KeyPath, 'T') (what PHP's ftok() computes), of a
// regular file beside tetherd's socket that tetherd creates and never removes,
// so that a restart finds the same segment and only changes its generation.
//
// Values are written with atomic adds and stores; a reader copies them with
// memcpy (PHP's shmop_read). A torn 8-byte read cannot make a changed version
// look unchanged: versions only grow, and a mix of old and new bytes equals
// the old value only if every changed byte was read old, which is the old
// value read.
package shmversions

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout constants (see the package comment).
const (
	Magic           = "TTHRVER1"
	LayoutVersion   = 1
	HeaderBytes     = 64
	OffGeneration   = 16
	OffReset        = 24
	OffHeartbeat    = 32
	OffHeartbeatMax = 40
	// DefaultSlots is the number of slots: 4096 (32 KiB), so that a host's
	// few hundred tables rarely share one.
	DefaultSlots = 4096
	// HeartbeatEvery is how often a Segment's owner calls Beat; HeartbeatMax
	// is the age past which a reader must refuse every entry (tetherd
	// stopped, hung, or killed without closing the segment).
	HeartbeatEvery = 250 * time.Millisecond
	HeartbeatMax   = 2 * time.Second
	// Proj is ftok's project id.
	Proj = 'T'
)

// ErrClosed is returned by the methods of a closed Segment that need it open.
var ErrClosed = errors.New("shmversions: segment closed")

// KeyPath returns the path of the file whose ftok key names the segment of
// the tetherd listening on socket.
func KeyPath(socket string) string { return socket + ".versions" }

// Key returns ftok(path, proj) as glibc (and so PHP's ftok()) computes it.
func Key(path string, proj byte) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return int(uint32(st.Ino&0xffff) | uint32(st.Dev&0xff)<<16 | uint32(proj)<<24), nil
}

// Segment is an attached, writable versions segment. Its methods are safe
// from any goroutine; slots are read and bumped with atomics.
type Segment struct {
	id    int
	key   int
	mem   []byte
	slots uint32
	gen   uint64
	done  atomic.Bool
	used  sync.Map // backend name -> *slotSet: the table slots handed out for it
}

// slotSet is a set of slots, a bit each.
type slotSet []atomic.Uint64

func (s *Segment) usedBy(backend string) slotSet {
	if v, ok := s.used.Load(backend); ok {
		return v.(slotSet)
	}
	v, _ := s.used.LoadOrStore(backend, make(slotSet, (s.slots+63)/64))
	return v.(slotSet)
}

// Open creates (or reuses) the segment of the key file at keyPath, mode 0644
// (readable by every user: it holds counters only), with slots slots, and
// writes its header with a new generation. The key file is created if
// missing. A segment of another size under the same key, made by an earlier
// tetherd, is removed and made anew (readers attached to it keep their
// mapping, whose generation is then never current again).
//
// A segment under the key that is not tetherd's is refused, never written
// or removed: one whose owner is another user or that others may write (its
// versions could be held still, and PHP would serve stale entries), or one
// without tetherd's magic and not new (an ftok key holds 24 bits of the
// file's identity: another program's key may collide).
func Open(keyPath string, slots int) (*Segment, error) {
	if slots <= 0 {
		slots = DefaultSlots
	}
	f, err := os.OpenFile(keyPath, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create versions key file: %w", err)
	}
	f.Close()
	key, err := Key(keyPath, Proj)
	if err != nil {
		return nil, err
	}
	size := HeaderBytes + 8*slots
	id, err := unix.SysvShmGet(key, size, unix.IPC_CREAT|0o644)
	if err == nil {
		var desc unix.SysvShmDesc
		if _, err = unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err == nil {
			if err = checkOwner(key, &desc); err != nil {
				return nil, err
			}
			if int(desc.Segsz) != size {
				err = unix.EINVAL
			}
		}
	}
	if errors.Is(err, unix.EINVAL) { // there, of another size
		if err := removeOld(key); err != nil {
			return nil, err
		}
		id, err = unix.SysvShmGet(key, size, unix.IPC_CREAT|unix.IPC_EXCL|0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("get shared memory segment 0x%08x: %w", key, err)
	}
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("attach shared memory segment 0x%08x: %w", key, err)
	}
	if !ours(mem) {
		unix.SysvShmDetach(mem)
		return nil, fmt.Errorf("shared memory segment 0x%08x holds something else than tetherd's versions (another program's key?): not used", key)
	}
	s := &Segment{id: id, key: key, mem: mem, slots: uint32(slots)}
	// A generation no earlier tetherd used on this host: the clock's
	// nanoseconds, made odd so that it is never 0 (closed).
	s.gen = uint64(time.Now().UnixNano()) | 1
	if old := atomic.LoadUint64(s.word(OffGeneration)); old >= s.gen {
		s.gen = old + 2
	}
	copy(mem[0:8], Magic)
	binary.LittleEndian.PutUint32(mem[8:], LayoutVersion)
	binary.LittleEndian.PutUint32(mem[12:], uint32(slots))
	binary.LittleEndian.PutUint32(mem[OffHeartbeatMax:], uint32(HeartbeatMax/time.Millisecond))
	s.Beat(time.Now())
	atomic.StoreUint64(s.word(OffGeneration), s.gen)
	return s, nil
}

// checkOwner refuses a segment that another user owns or that others than
// its owner may write.
func checkOwner(key int, desc *unix.SysvShmDesc) error {
	if int(desc.Perm.Uid) != os.Geteuid() || desc.Perm.Mode&0o022 != 0 {
		return fmt.Errorf("shared memory segment 0x%08x belongs to uid %d with mode %o: not this tetherd's (uid %d, mode 0644 at most); remove it (ipcrm -M 0x%08x) if it is a stale one",
			key, desc.Perm.Uid, desc.Perm.Mode&0o777, os.Geteuid(), key)
	}
	return nil
}

// ours reports whether mem holds tetherd's magic, or nothing yet (a segment
// just made is zeroed).
func ours(mem []byte) bool {
	if len(mem) < HeaderBytes {
		return false
	}
	if string(mem[:len(Magic)]) == Magic {
		return true
	}
	for _, b := range mem[:HeaderBytes] {
		if b != 0 {
			return false
		}
	}
	return true
}

// removeOld closes and removes the segment under key, of another size than
// wanted, when it is an earlier tetherd's.
func removeOld(key int) error {
	old, err := unix.SysvShmGet(key, 0, 0)
	if err != nil {
		return nil // gone meanwhile
	}
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(old, unix.IPC_STAT, &desc); err != nil {
		return fmt.Errorf("stat shared memory segment 0x%08x: %w", key, err)
	}
	if err := checkOwner(key, &desc); err != nil {
		return err
	}
	m, err := unix.SysvShmAttach(old, 0, 0)
	if err != nil {
		return fmt.Errorf("attach shared memory segment 0x%08x: %w", key, err)
	}
	if !ours(m) {
		unix.SysvShmDetach(m)
		return fmt.Errorf("shared memory segment 0x%08x holds something else than tetherd's versions (another program's key?): not removed, not used", key)
	}
	// Closed first: a reader still attached to it must see generation 0,
	// not versions that stop moving.
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&m[OffGeneration])), 0)
	unix.SysvShmDetach(m)
	unix.SysvShmCtl(old, unix.IPC_RMID, nil)
	return nil
}

// word returns the 8-byte word at off.
func (s *Segment) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

// ShmKey returns the segment's System V key.
func (s *Segment) ShmKey() int { return s.key }

// Generation returns the generation this Segment wrote.
func (s *Segment) Generation() uint64 { return s.gen }

// Reset returns the reset counter.
func (s *Segment) Reset() uint64 { return atomic.LoadUint64(s.word(OffReset)) }

// Slots returns the number of slots.
func (s *Segment) Slots() uint32 { return s.slots }

// TableSlot returns the slot of backend's table.
func (s *Segment) TableSlot(backend, table string) uint32 {
	return hash2(backend, table, 't') % s.slots
}

// TableSlotFor returns the slot of backend's table and remembers it as
// handed out for backend, so that DropBackend bumps it. A reader calls it
// before it loads the slot's version (see DropBackend).
func (s *Segment) TableSlotFor(backend, table string) uint32 {
	slot := s.TableSlot(backend, table)
	set := s.usedBy(backend)
	set[slot/64].Or(1 << (slot % 64))
	return slot
}

// AnySlot returns the slot bumped by every drop on backend.
func (s *Segment) AnySlot(backend string) uint32 { return hash2(backend, "", 'a') % s.slots }

// Load returns slot's version.
func (s *Segment) Load(slot uint32) uint64 {
	return atomic.LoadUint64(s.word(HeaderBytes + 8*int(slot)))
}

// Bump makes slot's version new.
func (s *Segment) Bump(slot uint32) {
	atomic.AddUint64(s.word(HeaderBytes+8*int(slot)), 1)
}

// DropTables bumps the slots of backend's tables and its "any" slot: a
// write to those tables.
func (s *Segment) DropTables(backend string, tables []string) {
	s.Bump(s.AnySlot(backend))
	for _, t := range tables {
		s.Bump(s.TableSlot(backend, t))
	}
}

// DropBackend bumps backend's "any" slot and every table slot handed out
// for it: its whole cache dropped. A read that marks its slot (TableSlotFor)
// after this scan passed it loads its version after the drop began, so it
// began after the caller dropped its own cache: the slots it loads are not
// stale for it.
func (s *Segment) DropBackend(backend string) {
	s.Bump(s.AnySlot(backend))
	used := s.usedBy(backend)
	for i := range used {
		for b := used[i].Load(); b != 0; b &= b - 1 {
			s.Bump(uint32(i*64 + bits.TrailingZeros64(b)))
		}
	}
}

// BumpReset voids everything published so far (a reload: the backend a name
// means may have changed).
func (s *Segment) BumpReset() { atomic.AddUint64(s.word(OffReset), 1) }

// Beat writes now as the heartbeat; the owner calls it every HeartbeatEvery.
func (s *Segment) Beat(now time.Time) {
	atomic.StoreUint64(s.word(OffHeartbeat), uint64(now.UnixMilli()))
}

// Close marks the segment closed (generation 0, unless another tetherd has
// opened it since, as the new process of a binary upgrade does). It stays
// attached until the process exits: a publisher that loaded the Segment
// before it was closed (a write answered late in a shutdown, a timer) may
// still bump a slot, which must not land in memory unmapped or mapped anew
// meanwhile; a bump after Close is harmless, generation 0 voids every
// version. The segment itself stays, for the next tetherd.
func (s *Segment) Close() error {
	if !s.done.CompareAndSwap(false, true) {
		return ErrClosed
	}
	atomic.CompareAndSwapUint64(s.word(OffGeneration), s.gen, 0)
	return nil
}

// Remove removes the segment from the system (tests; an operator may use
// ipcrm). Readers attached keep their mapping.
func (s *Segment) Remove() error {
	if _, err := unix.SysvShmCtl(s.id, unix.IPC_RMID, nil); err != nil {
		return fmt.Errorf("remove shared memory segment: %w", err)
	}
	return nil
}

// hash2 is FNV-1a of a, a zero byte, b and kind: stable across processes
// and versions (a slot number crosses the wire and lives in PHP's APCu).
func hash2(a, b string, kind byte) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(a); i++ {
		h = (h ^ uint32(a[i])) * 16777619
	}
	h = (h ^ 0) * 16777619
	for i := 0; i < len(b); i++ {
		h = (h ^ uint32(b[i])) * 16777619
	}
	return (h ^ uint32(kind)) * 16777619
}
