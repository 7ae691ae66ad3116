package wire_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/tether-php/tether/wire"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/vectors")

const vectorsDir = "../testdata/vectors"

type vector struct {
	name      string
	direction string // request or reply
	encode    func() []byte
}

func mustRows(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// vectors is one message of every kind. Request vectors hold only what every
// client can write byte for byte (PHP's ext-msgpack writes strings as str).
var vectors = []vector{
	{"ping_request", "request", func() []byte { return wire.AppendRequest(nil, &wire.Request{ID: 1, Op: wire.OpPing}) }},
	{"hello_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 2, Op: wire.OpHello, Token: "s3cret"})
	}},
	{"query_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 3, Op: wire.OpQuery, Backend: "main",
			SQL:    "SELECT id, name FROM users WHERE id = ? AND score > ? AND active = ? AND note IS ?",
			Params: []any{int64(42), 1.5, true, nil}, TimeoutMS: 250})
	}},
	{"query_request_params", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 300, Op: wire.OpQuery, SQL: "SELECT ?, ?, ?, ?, ?",
			Params: []any{int64(-1), int64(70000), int64(-40000), int64(1) << 40, "caf\u00e9"}})
	}},
	{"exec_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 4, Op: wire.OpExec, Backend: "main",
			SQL: "INSERT INTO users (name) VALUES (?)", Params: []any{"ada"}})
	}},
	{"begin_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 5, Op: wire.OpBegin, Backend: "main"})
	}},
	{"tx_query_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 6, Op: wire.OpQuery, SQL: "SELECT 1", Params: []any{}, Tx: 17})
	}},
	{"commit_request", "request", func() []byte { return wire.AppendRequest(nil, &wire.Request{ID: 7, Op: wire.OpCommit, Tx: 17}) }},
	{"rollback_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 8, Op: wire.OpRollback, Tx: 17})
	}},
	{"batch_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 9, Op: wire.OpBatch, TimeoutMS: 1000, Ops: []wire.Request{
			{Op: wire.OpQuery, Backend: "maria", SQL: "SELECT name FROM users WHERE id = ?", Params: []any{int64(1)}},
			{Op: wire.OpExec, Backend: "pg", SQL: "UPDATE hits SET n = n + 1", TimeoutMS: 100},
			{Op: wire.OpPing},
		}})
	}},
	{"get_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 10, Op: wire.OpGet, Backend: "maria", Table: "users",
			Key: []any{int64(42)}, Columns: []string{"name", "email"}})
	}},
	{"multi_get_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 11, Op: wire.OpMultiGet, Table: "users",
			Keys: [][]any{{int64(1)}, {int64(2)}, {"3"}}})
	}},
	{"scan_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 12, Op: wire.OpScan, Backend: "cass", Table: "s1",
			Prefix: []any{"a", "b1"}, Limit: 100, Cursor: []byte("opaque-cursor-1")})
	}},
	{"scan_range_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 13, Op: wire.OpScan, Table: "users",
			Start: []any{int64(100)}, End: []any{int64(200)}, Limit: 50})
	}},
	{"put_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 14, Op: wire.OpPut, Table: "users",
			Row: map[string]any{"id": int64(42), "name": "ada", "score": 1.5, "note": nil}})
	}},
	{"delete_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 15, Op: wire.OpDelete, Table: "users", Key: []any{int64(42)}})
	}},
	{"read_rows_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 16, Op: wire.OpReadRows, Backend: "bt", Table: "events",
			Prefix: []any{"user#42#"}, Limit: 10, Families: []string{"f"}, Latest: true})
	}},
	{"mutate_row_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 17, Op: wire.OpMutateRow, Backend: "bt", Table: "events",
			Key: []any{"user#42"}, Mutations: []wire.Mutation{
				{Op: "set", Family: "f", Qualifier: "name", Value: "ada"},
				{Op: "set", Family: "f", Qualifier: "seen", Value: "2026", Timestamp: 1700000000000000},
				{Op: "delete_cells", Family: "f", Qualifier: "old"},
				{Op: "delete_family", Family: "tmp"},
			}})
	}},
	{"increment_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 18, Op: wire.OpIncrement, Backend: "bt", Table: "counters",
			Key: []any{"page#home"}, Family: "c", Qualifier: "views", Delta: -3})
	}},
	{"check_and_mutate_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 19, Op: wire.OpCheckAndMutate, Backend: "bt", Table: "locks",
			Key: []any{"job#7"}, Family: "l", Qualifier: "owner", Value: "worker-1",
			IfTrue:  []wire.Mutation{{Op: "delete_row"}},
			IfFalse: []wire.Mutation{{Op: "set", Family: "l", Qualifier: "seen", Value: "1"}}})
	}},
	{"http_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 20, Op: wire.OpHTTP, Backend: "api", TimeoutMS: 1500,
			Method: "POST", Path: "/v1/orders?expand=items", Headers: map[string]string{"content-type": "application/json", "x-request-id": "r-1"},
			Body: []byte(`{"sku":"A-1","qty":2}`)})
	}},
	{"join_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 21, Op: wire.OpJoin,
			Left: &wire.Request{Op: wire.OpQuery, Backend: "maria",
				SQL: "SELECT id, name, group_code FROM users WHERE id BETWEEN ? AND ?", Params: []any{int64(1), int64(500)}},
			Right: &wire.Request{Backend: "maria", Table: "groups", Columns: []string{"name"}},
			On:    []string{"group_code"}, Kind: "left", OrderBy: []string{"groups.name", "-id"}})
	}},
	{"query_columnar_request", "request", func() []byte {
		return wire.AppendRequest(nil, &wire.Request{ID: 22, Op: wire.OpQuery, SQL: "SELECT id, name FROM users", Columnar: true})
	}},
	{"ping_reply", "reply", func() []byte { return wire.AppendOK(nil, wire.Head{ID: 1}) }},
	{"hello_reply", "reply", func() []byte { return wire.AppendHello(nil, wire.Head{ID: 2}) }},
	{"query_reply", "reply", func() []byte {
		return mustRows(wire.AppendRows(nil, wire.Head{ID: 3},
			[]string{"id", "name", "score", "blob", "note", "active", "price", "born", "delta"},
			[][]any{
				{int64(42), "ada", 1.5, []byte{0, 1, 254, 255}, nil, true, "12.50", "1815-12-10", int64(-7)},
				{int64(43), "", -0.25, []byte{}, "x", false, "0.00", "2024-02-29T23:59:59.5", int64(1) << 33},
			}))
	}},
	{"query_reply_empty", "reply", func() []byte {
		return mustRows(wire.AppendRows(nil, wire.Head{ID: 30}, []string{"id"}, [][]any{}))
	}},
	{"scan_reply", "reply", func() []byte {
		return mustRows(wire.AppendResult(nil, wire.Head{ID: 12}, []string{"key", "super_column", "column", "value"},
			[][]any{{"a", "b1", "c1", []byte("v1")}, {"a", "b1", "c2", []byte("v2")}}, []byte{0x01, 0x02, 0x03}))
	}},
	{"multi_get_reply", "reply", func() []byte {
		return mustRows(wire.AppendResult(nil, wire.Head{ID: 11}, []string{"id", "name"},
			[][]any{{int64(1), "ada"}, nil, {int64(3), "cy"}}, nil))
	}},
	{"http_reply", "reply", func() []byte {
		return wire.AppendHTTP(nil, wire.Head{ID: 20}, 201, map[string][]string{
			"content-type": {"application/json"}, "set-cookie": {"a=1", "b=2"}}, []byte("{\"id\":7}\x00\xff"))
	}},
	{"join_reply", "reply", func() []byte {
		return mustRows(wire.AppendColumns(nil, wire.Head{ID: 21}, []string{"id", "name", "group_code", "groups.name"},
			[][]any{{int64(1), "ada", "adm", "Admins"}, {int64(2), "bob", nil, nil}, {int64(3), "cy", "dev", []byte("Dev\x00s")}}, nil))
	}},
	{"columns_reply_empty", "reply", func() []byte {
		return mustRows(wire.AppendColumns(nil, wire.Head{ID: 22}, []string{"id", "name"}, [][]any{}, nil))
	}},
	{"exec_reply", "reply", func() []byte { return wire.AppendExec(nil, wire.Head{ID: 4}, 1, 1001) }},
	{"begin_reply", "reply", func() []byte { return wire.AppendTx(nil, wire.Head{ID: 5}, 17) }},
	{"commit_reply", "reply", func() []byte { return wire.AppendOK(nil, wire.Head{ID: 7}) }},
	{"error_reply", "reply", func() []byte {
		return wire.AppendError(nil, wire.Head{ID: 3}, "backend_error", "Table 'app.userz' doesn't exist", false, "1146")
	}},
	{"error_reply_busy", "reply", func() []byte {
		return wire.AppendError(nil, wire.Head{ID: 4}, "busy", "mysql: all 8 connections busy for 1s (acquire_timeout)", true, "")
	}},
	{"frame_error_reply", "reply", func() []byte {
		return wire.AppendError(nil, wire.Head{ID: 0}, "too_large", "frame too large: 9000000 bytes, limit 8388608; closing connection", false, "")
	}},
	{"batch_reply", "reply", func() []byte {
		b := wire.AppendBatchHead(nil, wire.Head{ID: 9}, 3)
		b = mustRows(wire.AppendRows(b, wire.Head{Nested: true}, []string{"name"}, [][]any{{"ada"}}))
		b = wire.AppendError(b, wire.Head{Nested: true}, "timeout", "deadline exceeded; the statement may or may not have run", false, "")
		return wire.AppendOK(b, wire.Head{Nested: true})
	}},
}

type manifestEntry struct {
	Name      string          `json:"name"`
	File      string          `json:"file"`
	Direction string          `json:"direction"`
	Value     json.RawMessage `json:"value"`
}

type manifest struct {
	About   string          `json:"about"`
	Vectors []manifestEntry `json:"vectors"`
}

// TestVectors checks the golden vectors: the files hold exactly what the
// encoders write, the manifest describes them, and every request decodes and
// re-encodes to the same bytes. With -update it rewrites them.
func TestVectors(t *testing.T) {
	var m manifest
	if *update {
		m.About = "Golden vectors of Tether protocol v1 (docs/protocol.md): each file is one frame payload without its 4-byte length prefix. Binary values are {\"$bin\": base64}. Map keys appear in encoding order."
		for _, v := range vectors {
			b := v.encode()
			file := v.name + ".msgpack"
			if err := os.WriteFile(filepath.Join(vectorsDir, file), b, 0o644); err != nil {
				t.Fatal(err)
			}
			val, rest, err := orderedJSON(b)
			if err != nil || len(rest) != 0 {
				t.Fatalf("%s: %v", v.name, err)
			}
			m.Vectors = append(m.Vectors, manifestEntry{v.name, file, v.direction, val})
		}
		out, _ := json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(filepath.Join(vectorsDir, "manifest.json"), append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatalf("read manifest (run go test ./wire -run TestVectors -update): %v", err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Vectors) != len(vectors) {
		t.Fatalf("manifest has %d vectors, the test %d", len(m.Vectors), len(vectors))
	}
	for i, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			e := m.Vectors[i]
			if e.Name != v.name || e.Direction != v.direction {
				t.Fatalf("manifest entry %d is %s/%s", i, e.Name, e.Direction)
			}
			file, err := os.ReadFile(filepath.Join(vectorsDir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			if got := v.encode(); !bytes.Equal(got, file) {
				t.Fatalf("encoder output differs from %s:\n got %x\nwant %x", e.File, got, file)
			}
			val, _, err := orderedJSON(file)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(val, e.Value) {
				t.Fatalf("manifest value differs from %s:\n got %s\nwant %s", e.File, val, e.Value)
			}
			if v.direction == "request" {
				var r wire.Request
				if err := wire.DecodeRequest(file, &r); err != nil {
					t.Fatalf("decode: %v", err)
				}
				if again := wire.AppendRequest(nil, &r); !bytes.Equal(again, file) {
					t.Fatalf("decode+encode differs:\n got %x\nwant %x", again, file)
				}
			} else {
				if _, err := wire.DecodeReply(file); err != nil {
					t.Fatalf("decode reply: %v", err)
				}
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y bytes.Buffer
	json.Compact(&x, a)
	json.Compact(&y, b)
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// orderedJSON converts one MessagePack value to JSON keeping map key order.
func orderedJSON(b []byte) (json.RawMessage, []byte, error) {
	var out bytes.Buffer
	var walk func(b []byte) ([]byte, error)
	walk = func(b []byte) ([]byte, error) {
		var err error
		switch msgp.NextType(b) {
		case msgp.MapType:
			var n uint32
			n, b, err = msgp.ReadMapHeaderBytes(b)
			out.WriteByte('{')
			for i := uint32(0); i < n && err == nil; i++ {
				var k string
				k, b, err = msgp.ReadStringBytes(b)
				if i > 0 {
					out.WriteByte(',')
				}
				out.WriteString(strconv.Quote(k) + ":")
				if err == nil {
					b, err = walk(b)
				}
			}
			out.WriteByte('}')
		case msgp.ArrayType:
			var n uint32
			n, b, err = msgp.ReadArrayHeaderBytes(b)
			out.WriteByte('[')
			for i := uint32(0); i < n && err == nil; i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				b, err = walk(b)
			}
			out.WriteByte(']')
		case msgp.BinType:
			var v []byte
			v, b, err = msgp.ReadBytesBytes(b, nil)
			fmt.Fprintf(&out, `{"$bin":%q}`, base64.StdEncoding.EncodeToString(v))
		default:
			var v any
			v, b, err = msgp.ReadIntfBytes(b)
			j, _ := json.Marshal(v)
			out.Write(j)
		}
		return b, err
	}
	rest, err := walk(b)
	return out.Bytes(), rest, err
}
