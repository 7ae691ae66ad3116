package mysql

import "testing"

// TestGTIDBehind: transactions received and not applied, per domain, summed.
func TestGTIDBehind(t *testing.T) {
	for _, c := range []struct {
		applied, received string
		want              int64
	}{
		{"", "", 0},
		{"0-1-5", "0-1-5", 0},
		{"0-1-5", "0-1-7", 2},
		{"", "0-1-3", 3},
		{"0-1-5,1-2-10", "0-1-6, 1-2-14", 5},
		{"0-1-9", "0-1-7", 0},         // applied ahead (received reset): nothing behind
		{"0-1-5", "0-2-8", 3},         // a new server id in the domain: the sequence still counts
		{"garbage", "0-1-x,1-1-2", 2}, // unparsable parts count as nothing
	} {
		if got := gtidBehind(c.applied, c.received); got != c.want {
			t.Errorf("gtidBehind(%q, %q) = %d, want %d", c.applied, c.received, got, c.want)
		}
	}
}
