package shmversions_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tether-php/tether/internal/shmversions"
	"golang.org/x/sys/unix"
)

// reader attaches the segment of keyPath read-only, as a PHP worker does.
func reader(t *testing.T, keyPath string) []byte {
	t.Helper()
	key, err := shmversions.Key(keyPath, shmversions.Proj)
	if err != nil {
		t.Fatal(err)
	}
	id, err := unix.SysvShmGet(key, 0, 0)
	if err != nil {
		t.Fatalf("shmget: %v", err)
	}
	mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		t.Fatalf("shmat: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmDetach(mem) })
	return mem
}

func u64(mem []byte, off int) uint64 { return binary.LittleEndian.Uint64(mem[off:]) }

// TestSegment_Publishes: a bump is seen by another mapping at once, Close
// marks the segment closed, and a new Open (a restart) writes a new
// generation into the same segment.
func TestSegment_Publishes(t *testing.T) {
	keyPath := filepath.Join(t.TempDir(), "tether.sock.versions")
	s, err := shmversions.Open(keyPath, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove() })
	mem := reader(t, keyPath)
	if string(mem[:8]) != shmversions.Magic || binary.LittleEndian.Uint32(mem[8:]) != shmversions.LayoutVersion ||
		binary.LittleEndian.Uint32(mem[12:]) != 64 {
		t.Fatalf("header: % x", mem[:16])
	}
	gen := u64(mem, shmversions.OffGeneration)
	if gen == 0 || gen != s.Generation() {
		t.Fatalf("generation %d, want %d", gen, s.Generation())
	}
	slot := s.TableSlot("db", "posts")
	before := u64(mem, shmversions.HeaderBytes+8*int(slot))
	s.Bump(slot)
	if after := u64(mem, shmversions.HeaderBytes+8*int(slot)); after != before+1 {
		t.Errorf("slot %d: %d after a bump, want %d", slot, after, before+1)
	}
	if s.TableSlot("db", "posts") != slot {
		t.Error("slots are not stable")
	}
	r := u64(mem, shmversions.OffReset)
	s.BumpReset()
	if u64(mem, shmversions.OffReset) != r+1 {
		t.Error("reset counter not bumped")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if g := u64(mem, shmversions.OffGeneration); g != 0 {
		t.Errorf("generation %d after Close, want 0", g)
	}
	s2, err := shmversions.Open(keyPath, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if g := u64(mem, shmversions.OffGeneration); g == 0 || g == gen {
		t.Errorf("generation after a restart: %d (before: %d)", g, gen)
	}
	// The old owner's Close after the new one opened (a binary upgrade)
	// leaves the new generation.
	if err := s.Close(); err == nil {
		t.Error("a second Close succeeded")
	}
}

// TestSegment_Resized: a segment of another size under the key is replaced,
// and the old one closed for the readers still attached to it.
func TestSegment_Resized(t *testing.T) {
	keyPath := filepath.Join(t.TempDir(), "v")
	s, err := shmversions.Open(keyPath, 16)
	if err != nil {
		t.Fatal(err)
	}
	old := reader(t, keyPath)
	s2, err := shmversions.Open(keyPath, 32)
	if err != nil {
		t.Fatalf("reopen with another size: %v", err)
	}
	defer s2.Remove()
	defer s2.Close()
	if mem := reader(t, keyPath); binary.LittleEndian.Uint32(mem[12:]) != 32 || len(mem) != shmversions.HeaderBytes+8*32 {
		t.Errorf("slots %d, size %d", binary.LittleEndian.Uint32(mem[12:]), len(mem))
	}
	// A reader of the replaced segment sees it closed.
	if g := u64(old, shmversions.OffGeneration); g != 0 {
		t.Errorf("the replaced segment's generation is %d, want 0", g)
	}
	s.Close()
}

// TestKey_MatchesPHP: Key is what PHP's ftok() computes for the same file.
func TestKey_MatchesPHP(t *testing.T) {
	php, err := exec.LookPath("php")
	if err != nil {
		t.Skip("php not installed")
	}
	path := filepath.Join(t.TempDir(), "k")
	s, err := shmversions.Open(path, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	defer s.Close()
	out, err := exec.Command(php, "-r", `echo ftok($argv[1], "T");`, path).Output()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if s.ShmKey() != want {
		t.Errorf("Key %d, PHP's ftok %d", s.ShmKey(), want)
	}
}

// foreign makes a segment under keyPath's key as another program might:
// size bytes, mode, the first bytes fill (nil: zeroed).
func foreign(t *testing.T, keyPath string, size int, mode int, fill []byte) int {
	t.Helper()
	if err := os.WriteFile(keyPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := shmversions.Key(keyPath, shmversions.Proj)
	if err != nil {
		t.Fatal(err)
	}
	id, err := unix.SysvShmGet(key, size, unix.IPC_CREAT|unix.IPC_EXCL|mode)
	if err != nil {
		t.Fatalf("shmget: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	if fill != nil {
		mem, err := unix.SysvShmAttach(id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		copy(mem, fill)
		unix.SysvShmDetach(mem)
	}
	return id
}

// TestSegment_RefusesForeign: a segment under the key that is not an
// earlier tetherd's is neither used, written nor removed: another
// program's (no magic, of another size or the same), or one others may
// write (its versions could be held still).
func TestSegment_RefusesForeign(t *testing.T) {
	size := shmversions.HeaderBytes + 8*16
	for _, c := range []struct {
		name string
		size int
		mode int
		fill []byte
	}{
		{"OtherSizeOtherData", 4096, 0o644, []byte("not ours, keep it")},
		{"SameSizeOtherData", size, 0o644, []byte("not ours, keep it")},
		{"WritableByOthers", size, 0o666, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			keyPath := filepath.Join(t.TempDir(), "v")
			id := foreign(t, keyPath, c.size, c.mode, c.fill)
			if s, err := shmversions.Open(keyPath, 16); err == nil {
				s.Close()
				t.Fatal("Open used a segment that is not tetherd's")
			} else {
				t.Logf("refused: %v", err)
			}
			var desc unix.SysvShmDesc
			if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
				t.Fatalf("the foreign segment is gone: %v", err)
			}
			if c.fill != nil {
				mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.SysvShmDetach(mem)
				if string(mem[:len(c.fill)]) != string(c.fill) {
					t.Errorf("the foreign segment was written: %q", mem[:len(c.fill)])
				}
			}
		})
	}
}

// TestSegment_BumpAfterClose: a publisher that loaded the Segment before
// Close may still bump; it must land in the segment (still attached), not
// in memory unmapped meanwhile, and leave it closed.
func TestSegment_BumpAfterClose(t *testing.T) {
	keyPath := filepath.Join(t.TempDir(), "v")
	s, err := shmversions.Open(keyPath, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove() })
	mem := reader(t, keyPath)
	s.Close()
	s.DropTables("db", []string{"posts"})
	s.DropBackend("db")
	if g := u64(mem, shmversions.OffGeneration); g != 0 {
		t.Errorf("generation %d after Close and bumps, want 0", g)
	}
}
