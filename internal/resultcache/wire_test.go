package resultcache_test

import (
	"bytes"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/tether-php/tether/wire"
)

// The stored value is the reply minus its head (see the package comment).
// These helpers stand for what wire must offer the server
// ((*ResultEncoder).AppendBody and AppendCachedResult); the test pins the
// contract against wire's encoder: a body cut from one reply, under another
// head, is byte for byte the reply the encoder writes for that head.

// bodyOf cuts the head off a top-level result reply.
func bodyOf(t *testing.T, reply []byte) []byte {
	t.Helper()
	_, b, err := msgp.ReadMapHeaderBytes(reply)
	if err != nil {
		t.Fatal(err)
	}
	if k, rest, err := msgp.ReadStringBytes(b); err != nil || k != "id" {
		t.Fatalf("first field %q, %v", k, err)
	} else {
		b = rest
	}
	if _, b, err = msgp.ReadUint32Bytes(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// appendCachedResult is AppendCachedResult as wire would write it.
func appendCachedResult(b []byte, h wire.Head, columnar bool, body []byte) []byte {
	fields := uint32(2)
	if columnar {
		fields = 3
	}
	if h.Nested {
		b = msgp.AppendMapHeader(b, fields)
	} else {
		b = msgp.AppendMapHeader(b, fields+1)
		b = msgp.AppendString(b, "id")
		b = msgp.AppendUint32(b, h.ID)
	}
	return append(b, body...)
}

func encode(h wire.Head, columnar bool) []byte {
	var e wire.ResultEncoder
	e.Reset(h, columnar, 0)
	e.SetTimeFormat(wire.TimeFormatSQL)
	e.Columns(3)
	for _, n := range []string{"id", "name", "at"} {
		e.Column([]byte(n))
	}
	for i := int64(0); i < 3; i++ {
		e.BeginRow()
		e.Int(i * 1000)
		e.Text([]byte("row"))
		e.DateTime([]byte("2026-11-24T19:00:00Z"))
		_ = e.EndRow()
	}
	return e.AppendReply(nil)
}

func TestValue_WireBody(t *testing.T) {
	for _, columnar := range []bool{false, true} {
		body := bodyOf(t, encode(wire.Head{ID: 7}, columnar))
		for _, h := range []wire.Head{{ID: 0}, {ID: 7}, {ID: 300}, {ID: 1 << 31}, {Nested: true}} {
			want := encode(h, columnar)
			if got := appendCachedResult(nil, h, columnar, body); !bytes.Equal(got, want) {
				t.Errorf("columnar %v, head %+v:\n got %x\nwant %x", columnar, h, got, want)
			}
		}
	}
}
