package postgres

import (
	"slices"
	"testing"
)

// TestDecodedTables reads table names as test_decoding writes them.
func TestDecodedTables(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`public.posts: UPDATE: id[integer]:1 v[text]:'a: b'`, []string{"posts"}, true},
		{`public."My Table": INSERT: id[integer]:1`, []string{"my table"}, true},
		{`"we""ird".t: DELETE: (no-tuple-data)`, []string{"t"}, true},
		{`public.a, s."B.c": TRUNCATE: (no-flags)`, []string{"a", "b.c"}, true},
		{`nodot: INSERT:`, nil, false},
		{`public."unterminated`, nil, false},
		{``, nil, false},
	}
	for _, c := range cases {
		got, ok := decodedTables([]byte(c.in))
		if ok != c.ok || (ok && !slices.Equal(got, c.want)) {
			t.Errorf("decodedTables(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
