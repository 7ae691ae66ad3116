package bigtable_test

import (
	"encoding/binary"
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
)

// TestBackend_WideColumn: the operations as the server hands them over, with
// the protocol's values, which the backend maps to row keys (integers as
// decimal text) and cells (integers as 8-byte big-endian), refusing with
// bad_request, and a message naming the field, what does not map.
func TestBackend_WideColumn(t *testing.T) {
	b := setup(t)
	wc := func(r tether.WideColumnRequest) (*tether.Result, error) {
		r.Table = "t"
		return b.WideColumn(ctx(t), r)
	}
	mustWC := func(r tether.WideColumnRequest) *tether.Result {
		t.Helper()
		res, err := wc(r)
		if err != nil {
			t.Fatalf("%s: %v", r.Op, err)
		}
		return res
	}

	mustWC(tether.WideColumnRequest{Op: tether.OpMutateRow, Key: []any{int64(7)}, Mutations: []tether.CellMutation{
		{Op: "set", Family: "cf", Qualifier: "n", Value: int64(-2)},
		{Op: "set", Family: "cf", Qualifier: "s", Value: "text"},
	}})
	g := get(t, b, "7", "cf:n", "cf:s")
	if v := g.Rows[0][1].([]byte); len(v) != 8 || int64(binary.BigEndian.Uint64(v)) != -2 {
		t.Fatalf("the integer cell is stored as %x, want 8 bytes big-endian of -2", v)
	}
	if v := g.Rows[0][2].([]byte); string(v) != "text" {
		t.Fatalf("the text cell is stored as %q", v)
	}

	r := mustWC(tether.WideColumnRequest{Op: tether.OpIncrement, Key: []any{uint64(7)}, Family: "cf", Qualifier: "n", Delta: 5})
	if r.Rows[0][3] != int64(3) {
		t.Fatalf("increment of -2 by 5: %v", r.Rows)
	}
	r = mustWC(tether.WideColumnRequest{Op: tether.OpReadRows, Keys: [][]any{{"7"}}, Columns: []string{"cf:s"}})
	if len(r.Rows) != 1 || string(r.Rows[0][0].([]byte)) != "7" || string(r.Rows[0][4].([]byte)) != "text" {
		t.Fatalf("read_rows by the key [7]: %v", r.Rows)
	}
	r = mustWC(tether.WideColumnRequest{Op: tether.OpCheckAndMutate, Key: []any{"7"}, Family: "cf", Qualifier: "s", Value: "text",
		IfTrue: []tether.CellMutation{{Op: "set", Family: "cf", Qualifier: "m", Value: []byte("yes")}}})
	if r.Affected != 1 {
		t.Fatalf("check_and_mutate on a matching cell: affected %d", r.Affected)
	}

	for _, c := range []struct {
		r    tether.WideColumnRequest
		want string
	}{
		{tether.WideColumnRequest{Op: tether.OpMutateRow, Key: []any{"a", "b"}}, "mutate_row needs key: [row key]"},
		{tether.WideColumnRequest{Op: tether.OpIncrement}, "increment needs key: [row key]"},
		{tether.WideColumnRequest{Op: tether.OpMutateRow, Key: []any{1.5}}, "a row key is a string or bytes, not float64"},
		{tether.WideColumnRequest{Op: tether.OpReadRows, Keys: [][]any{{"a", "b"}}}, "keys[0]: a row key is [key]"},
		{tether.WideColumnRequest{Op: tether.OpReadRows, Prefix: []any{"a", "b"}}, "prefix: a row key is one value, got 2"},
		{tether.WideColumnRequest{Op: tether.OpReadRows, End: []any{true}}, "a row key is a string or bytes, not bool"},
		{tether.WideColumnRequest{Op: tether.OpMutateRow, Key: []any{"k"}, Mutations: []tether.CellMutation{{Op: "bogus"}}},
			`mutation 1: op "bogus" is not set, delete_cells, delete_family or delete_row`},
		{tether.WideColumnRequest{Op: tether.OpMutateRow, Key: []any{"k"}, Mutations: []tether.CellMutation{{Op: "set", Family: "cf", Value: 1.5}}},
			"mutation 1: a cell value is a string, bytes or an integer"},
		{tether.WideColumnRequest{Op: tether.OpCheckAndMutate, Key: []any{"k"}, Family: "cf", Value: false}, "value: a cell value is"},
	} {
		_, err := wc(c.r)
		if code(err) != tether.CodeBadRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: got %v, want bad_request %q", c.r.Op, c.r, err, c.want)
		}
	}
}
