package sqltables

import "testing"

// TestPrimaryWords: a function's primary reason is acted on only for a
// known volatile built-in (call), and a pg_* function's replica mark only
// for one not otherwise classed; a table marked so would be ignored.
func TestPrimaryWords(t *testing.T) {
	for name, w := range words {
		if w.primary != "" && w.fn != fnVolatile {
			t.Errorf("%s has a primary reason but is not a volatile built-in", name)
		}
		if w.replica && (w.fn != fnUnknown || len(name) < 3 || name[:3] != "PG_") {
			t.Errorf("%s is marked harmless on a replica but is not an unclassed pg_* function", name)
		}
	}
}
