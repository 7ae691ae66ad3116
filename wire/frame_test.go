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

// TestAppendResultBody: a body written by AppendResultBody, under a head by
// AppendCachedResult, is byte for byte the reply AppendResult (or
// AppendColumns) writes.
func TestAppendResultBody(t *testing.T) {
	cols := []string{"id", "name"}
	rows := [][]any{{int64(1), "ada"}, nil, {int64(2), "grace"}}
	for _, columnar := range []bool{false, true} {
		h := wire.Head{ID: 7, Took: 1500}
		var want []byte
		var err error
		if columnar {
			want, err = wire.AppendColumns(nil, h, cols, rows, nil)
		} else {
			want, err = wire.AppendResult(nil, h, cols, rows, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := wire.AppendResultBody([]byte("prefix"), columnar, cols, rows)
		if err != nil || string(body[:6]) != "prefix" {
			t.Fatalf("columnar %v: %v %q", columnar, err, body)
		}
		if got := wire.AppendCachedResult(nil, h, columnar, body[6:]); string(got) != string(want) {
			t.Fatalf("columnar %v: cached reply\n% x\nwant\n% x", columnar, got, want)
		}
	}
}
