package mysql

import "testing"

func TestGTIDPositions(t *testing.T) {
	for _, c := range []struct {
		have, want string
		covers     bool
	}{
		{"0-1-10", "0-1-10", true},
		{"0-1-11", "0-1-10", true},
		{"0-1-9", "0-1-10", false},
		{"0-2-12", "0-1-10", true}, // another server of the same domain, later
		{"0-1-10,1-2-5", "1-2-5", true},
		{"0-1-10", "0-1-10,1-2-5", false}, // a domain the replica has not seen
		{"0-1-10", "", true},
	} {
		if got := gtidCovers(c.have, c.want); got != c.covers {
			t.Errorf("gtidCovers(%q, %q) = %v, want %v", c.have, c.want, got, c.covers)
		}
	}
	for _, c := range []struct{ a, b, want string }{
		{"0-1-10", "0-1-12", "0-1-12"},
		{"0-1-12", "0-1-10", "0-1-12"},
		{"0-1-10", "1-2-5", "0-1-10,1-2-5"},
		{"0-1-10,1-2-7", "1-2-5,0-3-11", "0-3-11,1-2-7"},
	} {
		if got := gtidMerge(c.a, c.b); got != c.want {
			t.Errorf("gtidMerge(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	for s, ok := range map[string]bool{"0-1-10": true, "0-1-10,1-2-5": true, "": false, "0-1": false, "x-1-2": false, "0-1-2;DROP": false} {
		if validGTIDList(s) != ok {
			t.Errorf("validGTIDList(%q) = %v, want %v", s, !ok, ok)
		}
	}
}

func TestProberNamedHost(t *testing.T) {
	for dsn, want := range map[string]bool{
		"u:p@tcp(db.internal:3306)/app":  true,
		"u:p@tcp(10.0.0.5:3306)/app":     false,
		"u:p@tcp([::1]:3306)/app":        false,
		"u:p@unix(/run/mysqld.sock)/app": false,
	} {
		p, err := NewProber(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if p.named != want {
			t.Errorf("NewProber(%q).named = %v, want %v", dsn, p.named, want)
		}
		p.Close()
	}
}
