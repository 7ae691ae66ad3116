package shmversions_test

import (
	"encoding/binary"
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
