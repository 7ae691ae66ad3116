package wire_test

import (
	"errors"
	"testing"

	"github.com/tether-php/tether/wire"
)

func frame(payload []byte) []byte {
	b, start := wire.BeginFrame(nil)
	b = append(b, payload...)
	return wire.EndFrame(b, start)
}

func TestNextFrame(t *testing.T) {
	t.Run("Whole", func(t *testing.T) {
		buf := append(frame([]byte("abc")), frame([]byte("de"))...)
		p, n, _, err := wire.NextFrame(buf, 100)
		if err != nil || string(p) != "abc" || n != 7 {
			t.Fatalf("got %q %d %v", p, n, err)
		}
		p, n, _, err = wire.NextFrame(buf[n:], 100)
		if err != nil || string(p) != "de" || n != 6 {
			t.Fatalf("got %q %d %v", p, n, err)
		}
	})
	t.Run("Incomplete", func(t *testing.T) {
		buf := frame([]byte("abcdef"))
		for cut := 0; cut < len(buf); cut++ {
			_, _, need, err := wire.NextFrame(buf[:cut], 100)
			if !errors.Is(err, wire.ErrIncomplete) {
				t.Fatalf("cut %d: err %v", cut, err)
			}
			if cut >= wire.HeaderSize && need != len(buf) {
				t.Fatalf("cut %d: need %d, want %d", cut, need, len(buf))
			}
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		// The header alone is enough to refuse: no payload bytes are present.
		_, _, _, err := wire.NextFrame([]byte{0xff, 0xff, 0xff, 0xff}, 1<<20)
		if !errors.Is(err, wire.ErrFrameTooLarge) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		_, _, _, err := wire.NextFrame([]byte{0, 0, 0, 0}, 100)
		if !errors.Is(err, wire.ErrEmptyFrame) {
			t.Fatalf("err %v", err)
		}
	})
}
