package postgres

import "testing"

func TestLSNPositions(t *testing.T) {
	for _, c := range []struct {
		have, want string
		covers     bool
	}{
		{"0/3000000", "0/3000000", true},
		{"0/3000001", "0/3000000", true},
		{"0/2FFFFFF", "0/3000000", false},
		{"1/0", "0/FFFFFFFF", true},
		{"0/3000000", "", true},
		{"garbage", "0/1", false},
	} {
		if got := lsnCovers(c.have, c.want); got != c.covers {
			t.Errorf("lsnCovers(%q, %q) = %v, want %v", c.have, c.want, got, c.covers)
		}
	}
	if got := lsnMerge("0/10", "0/F"); got != "0/10" {
		t.Errorf("lsnMerge = %q", got)
	}
	if got := lsnMerge("0/F", "1/0"); got != "1/0" {
		t.Errorf("lsnMerge = %q", got)
	}
}

func TestIsHostName(t *testing.T) {
	for h, want := range map[string]bool{"db.internal": true, "localhost": true, "10.0.0.5": false, "::1": false,
		"/var/run/postgresql": false, "": false} {
		if got := isHostName(h); got != want {
			t.Errorf("isHostName(%q) = %v, want %v", h, got, want)
		}
	}
}
