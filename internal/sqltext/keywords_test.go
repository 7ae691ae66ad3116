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
