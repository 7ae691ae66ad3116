package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/tether-php/tether/wire"
)

// mapOf builds a MessagePack map from alternating keys and pre-encoded values.
func mapOf(kv ...any) []byte {
	b := msgp.AppendMapHeader(nil, uint32(len(kv)/2))
	for i := 0; i < len(kv); i += 2 {
		b = msgp.AppendString(b, kv[i].(string))
		switch v := kv[i+1].(type) {
		case []byte:
			b = append(b, v...)
		default:
			b, _ = msgp.AppendIntf(b, v)
		}
	}
	return b
}

func TestDecodeRequest(t *testing.T) {
	t.Run("Query", func(t *testing.T) {
		var r wire.Request
		err := wire.DecodeRequest(mapOf("op", "query", "id", 7, "sql", "SELECT ?", "params",
			msgp.AppendBytes(msgp.AppendArrayHeader(nil, 1), []byte{0, 1})), &r)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != 7 || r.Op != wire.OpQuery || r.SQL != "SELECT ?" || len(r.Params) != 1 || string(r.Params[0].([]byte)) != "\x00\x01" {
			t.Fatalf("decoded %+v", r)
		}
	})

	t.Run("CacheTTL", func(t *testing.T) {
		var r, again wire.Request
		if err := wire.DecodeRequest(mapOf("op", "query", "id", 7, "sql", "x", "cache_ttl_ms", 1500), &r); err != nil || r.CacheTTLMS != 1500 {
			t.Fatalf("decoded %d (%v)", r.CacheTTLMS, err)
		}
		if err := wire.DecodeRequest(wire.AppendRequest(nil, &r), &again); err != nil || again.CacheTTLMS != 1500 {
			t.Fatalf("re-encoded %d (%v)", again.CacheTTLMS, err)
		}
	})

	t.Run("TimeFormat", func(t *testing.T) {
		for _, f := range []string{"iso", "sql"} {
			var r wire.Request
			if err := wire.DecodeRequest(mapOf("op", "query", "id", 7, "sql", "x", "time_format", f), &r); err != nil {
				t.Fatal(err)
			}
			var again wire.Request
			if err := wire.DecodeRequest(wire.AppendRequest(nil, &r), &again); err != nil || r.TimeFormat != f || again.TimeFormat != f {
				t.Fatalf("time_format %q: decoded %q, re-encoded %q (%v)", f, r.TimeFormat, again.TimeFormat, err)
			}
		}
	})

	contentErrors := []struct {
		name    string
		payload []byte
		id      uint32
		msg     string
	}{
		{"WrongIDType", mapOf("id", "seven", "op", "ping"), 0, "id: expected"},
		{"ZeroID", mapOf("id", 0, "op", "ping"), 0, "id: must be between"},
		{"NegativeTx", mapOf("id", 3, "op", "commit", "tx", -1), 3, "tx: must not be negative"},
		{"WrongSQLType", mapOf("id", 4, "op", "query", "sql", 12), 4, "sql: expected"},
		{"UnknownField", mapOf("id", 5, "op", "ping", "colour", "red"), 5, `"colour": unknown field`},
		{"NonScalarParam", mapOf("id", 6, "op", "query", "sql", "x", "params",
			msgp.AppendMapHeader(msgp.AppendArrayHeader(nil, 1), 0)), 6, "not a scalar"},
		{"ParamsNotArray", mapOf("id", 8, "op", "query", "sql", "x", "params", "nope"), 8, "params: expected"},
		{"NestedBatch", mapOf("id", 9, "op", "batch", "ops",
			append(msgp.AppendArrayHeader(nil, 1), mapOf("op", "batch", "ops", msgp.AppendArrayHeader(nil, 0))...)), 9, "cannot hold a batch"},
		// Wrong types inside a valid map are content errors (docs/protocol.md: bad_request, the connection kept).
		{"JoinLeftNotAMap", mapOf("id", 10, "op", "join", "left", "users"), 10, "left: want a map"},
		{"JoinRightNotAMap", mapOf("id", 11, "op", "join", "right", msgp.AppendArrayHeader(nil, 0)), 11, "right: want a map"},
		{"BatchOpNotAMap", mapOf("id", 12, "op", "batch", "ops",
			msgp.AppendInt(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "ping"), 7)), 12, "op 0: want a map"},
		// A key given twice would let the last win, and an earlier unknown op's name linger (found by fuzzing).
		{"DuplicateKey", mapOf("id", 13, "op", "frobnicate", "op", "ping"), 13, `"op": given twice`},
		{"NegativeCacheTTL", mapOf("id", 16, "op", "query", "sql", "x", "cache_ttl_ms", -5), 16, "cache_ttl_ms: must be between 0 and 86400000"},
		{"CacheTTLOverADay", mapOf("id", 17, "op", "query", "sql", "x", "cache_ttl_ms", 86400001), 17, "cache_ttl_ms: must be between"},
		{"UnknownTimeFormat", mapOf("id", 15, "op", "query", "sql", "x", "time_format", "local"), 15, `time_format: "local" is not "iso" or "sql"`},
		{"DuplicateKeyInBatchOp", mapOf("id", 14, "op", "batch", "ops",
			append(msgp.AppendArrayHeader(nil, 1), mapOf("op", "query", "sql", "a", "sql", "b")...)), 14, `"sql": given twice`},
	}
	for _, tc := range contentErrors {
		t.Run(tc.name, func(t *testing.T) {
			var r wire.Request
			err := wire.DecodeRequest(tc.payload, &r)
			var re *wire.RequestError
			if !errors.As(err, &re) || re.Fatal {
				t.Fatalf("want a non-fatal RequestError, got %v", err)
			}
			if re.ID != tc.id || !strings.Contains(re.Msg, tc.msg) {
				t.Fatalf("got id %d msg %q, want id %d msg containing %q", re.ID, re.Msg, tc.id, tc.msg)
			}
		})
	}

	fatal := []struct {
		name    string
		payload []byte
	}{
		{"NotAMap", msgp.AppendString(nil, "ping")},
		{"Truncated", mapOf("id", 1, "op", "ping")[:5]},
		{"Trailing", append(mapOf("id", 1, "op", "ping"), 0xc0)},
		{"Garbage", []byte{0xc1, 0xc1, 0xc1}},
	}
	for _, tc := range fatal {
		t.Run(tc.name, func(t *testing.T) {
			var r wire.Request
			err := wire.DecodeRequest(tc.payload, &r)
			var re *wire.RequestError
			if !errors.As(err, &re) || !re.Fatal {
				t.Fatalf("want a fatal RequestError, got %v", err)
			}
		})
	}
}

// FuzzDecodeRequest checks that no input panics the decoder and that whatever
// decodes re-encodes to something that decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, v := range vectors {
		if v.direction == "request" {
			f.Add(v.encode())
		}
	}
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var r wire.Request
		if err := wire.DecodeRequest(payload, &r); err != nil {
			return
		}
		again := wire.AppendRequest(nil, &r)
		var r2 wire.Request
		if err := wire.DecodeRequest(again, &r2); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if r2.ID != r.ID || r2.Op != r.Op || r2.SQL != r.SQL || len(r2.Params) != len(r.Params) || len(r2.Ops) != len(r.Ops) {
			t.Fatalf("round trip changed the request: %+v vs %+v", r, r2)
		}
	})
}
