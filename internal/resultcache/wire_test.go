package resultcache_test

import (
	"bytes"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/tether-php/tether/wire"
)

// The stored value is the reply minus its head (see the package comment):
// (*wire.ResultEncoder).AppendBody writes it, wire.AppendCachedResult writes
// it again under another head. The test pins the contract: a body, under any
// head, is byte for byte the reply the encoder writes for that head, and it is
// the reply cut after its head.

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

func encoder(h wire.Head, columnar bool) *wire.ResultEncoder {
	e := new(wire.ResultEncoder)
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
	return e
}

func TestValue_WireBody(t *testing.T) {
	for _, columnar := range []bool{false, true} {
		body := encoder(wire.Head{ID: 7}, columnar).AppendBody(nil)
		if cut := bodyOf(t, encoder(wire.Head{ID: 7}, columnar).AppendReply(nil)); !bytes.Equal(cut, body) {
			t.Errorf("columnar %v: AppendBody is not the reply after its head:\n got %x\nwant %x", columnar, body, cut)
		}
		for _, h := range []wire.Head{{ID: 0}, {ID: 7}, {ID: 300}, {ID: 1 << 31}, {Nested: true}} {
			want := encoder(h, columnar).AppendReply(nil)
			if got := wire.AppendCachedResult(nil, h, columnar, body); !bytes.Equal(got, want) {
				t.Errorf("columnar %v, head %+v:\n got %x\nwant %x", columnar, h, got, want)
			}
		}
	}
}
