package wire_test

import (
	"testing"

	"github.com/tether-php/tether/wire"
)

// TestVersions_RoundTrip: the request key "versions" survives encoding, and a
// cached result with versions decodes to the same result plus its
// "versions" map (docs/protocol.md, "Table versions").
func TestVersions_RoundTrip(t *testing.T) {
	var r wire.Request
	if err := wire.DecodeRequest(wire.AppendRequest(nil, &wire.Request{ID: 1, Op: wire.OpQuery, SQL: "SELECT 1", CacheTTLMS: 5, Versions: true}), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Versions || r.CacheTTLMS != 5 {
		t.Fatalf("decoded %+v", r)
	}

	body, err := wire.AppendResultBody(nil, false, []string{"v"}, [][]any{{int64(7)}})
	if err != nil {
		t.Fatal(err)
	}
	plain := wire.AppendCachedResult(nil, wire.Head{ID: 3}, false, body)
	for _, v := range []*wire.Versions{
		{Profile: "tz=+03:00"},
		{Profile: "", Keep: true, Generation: 1 << 60, Reset: 2, Slots: []uint32{7, 4095}, Values: []uint64{0, 1 << 40}},
	} {
		rep, err := wire.DecodeReply(wire.AppendCachedResultVersions(nil, wire.Head{ID: 3}, false, body, v))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := wire.DecodeReply(plain)
		if len(rep.Fields) != len(want.Fields)+1 {
			t.Errorf("fields %v, want those of %v and versions", rep.Fields, want.Fields)
		}
		got, _ := rep.Fields["versions"].(map[string]any)
		if got["profile"] != v.Profile {
			t.Errorf("profile %v, want %q", got["profile"], v.Profile)
		}
		if _, has := got["slots"]; has != v.Keep {
			t.Errorf("versions %v: slots present %v, want %v", got, has, v.Keep)
		}
		if v.Keep {
			slots, values := got["slots"].([]any), got["values"].([]any)
			if len(slots) != 2 || len(values) != 2 || got["reset"] != uint64(2) && got["reset"] != int64(2) {
				t.Errorf("versions %v", got)
			}
		}
	}
}
