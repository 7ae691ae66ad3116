package sqltext_test

import (
	"fmt"
	"testing"

	"github.com/tether-php/tether/internal/sqltext"
)

func TestKeywords(t *testing.T) {
	cases := []struct {
		sql  string
		n    int
		want string
	}{
		{"select 1", 2, "[SELECT 1]"}, // a number is a word too: the look is lexical
		{"  -- a comment\n  Start Transaction", 2, "[START TRANSACTION]"},
		{"/* x */ ((SELECT a FROM t))", 1, "[SELECT]"},
		{"# mysql comment\nINSERT INTO t", 3, "[INSERT INTO T]"},
		{"/* unterminated", 1, "[]"},
		{"'text' SELECT", 1, "[]"},
		{"SET time_zone = '+00:00'", 5, "[SET TIME_ZONE]"},
		{"", 1, "[]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(sqltext.Keywords(c.sql, c.n)); got != c.want {
			t.Errorf("Keywords(%q, %d) = %s, want %s", c.sql, c.n, got, c.want)
		}
	}
}

func TestFirstAndContainsFold(t *testing.T) {
	for sql, want := range map[string]string{"select 1": "select", " /* c */ (Show tables": "Show", "'x'": "", "": ""} {
		if got := sqltext.First(sql); got != want {
			t.Errorf("First(%q) = %q, want %q", sql, got, want)
		}
	}
	if !sqltext.ContainsFold("select a into @x", "INTO") || sqltext.ContainsFold("select a", "INTO") || sqltext.ContainsFold("IN", "INTO") {
		t.Error("ContainsFold")
	}
	if n := testing.AllocsPerRun(100, func() { sqltext.First("select id from t"); sqltext.ContainsFold("select id from t", "INTO") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
