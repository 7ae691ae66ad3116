package server

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// TestFrequent_FindsTheHeavyStatements: among 2,000 distinct statements run
// once or twice each, the two that make up most of the load come out on top,
// with counts near the truth, in a table of at most maxStatements entries.
func TestFrequent_FindsTheHeavyStatements(t *testing.T) {
	var f frequent
	rng := rand.New(rand.NewSource(1))
	var runs []string
	for i := 0; i < 30000; i++ {
		runs = append(runs, "SELECT * FROM options WHERE name = ?")
	}
	for i := 0; i < 10000; i++ {
		runs = append(runs, "SELECT * FROM users WHERE id = ?")
	}
	for i := 0; i < 4000; i++ {
		runs = append(runs, fmt.Sprintf("SELECT * FROM t%d", i%2000))
	}
	rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
	for _, sql := range runs {
		f.note("db", sql, nil, time.Millisecond)
	}
	if n := len(f.counts); n > maxStatements {
		t.Fatalf("%d statements kept, the bound is %d", n, maxStatements)
	}
	top := f.top(2)
	for i, want := range []struct {
		sql string
		n   float64
	}{{"SELECT * FROM options WHERE name = ?", 30000}, {"SELECT * FROM users WHERE id = ?", 10000}} {
		got := top[i]
		if got.SQL != want.sql || float64(got.Count) < 0.8*want.n || float64(got.Count) > 1.2*want.n+float64(got.Uncertainty) {
			t.Errorf("#%d: %q x%d (±%d), want %q about x%.0f", i+1, got.SQL, got.Count, got.Uncertainty, want.sql, want.n)
		}
		if got.MeanSeconds < 0.0009 || got.MeanSeconds > 0.0011 {
			t.Errorf("#%d: mean %v s, want 0.001", i+1, got.MeanSeconds)
		}
	}
	// A huge statement is kept cut, and as a copy.
	huge := "SELECT '" + strings.Repeat("x", 1<<20) + "'"
	for i := 0; i < 10*statementSample; i++ {
		f.note("db", huge, nil, 0)
	}
	found := false
	for _, s := range f.top(maxStatements) {
		if strings.HasPrefix(s.SQL, "SELECT 'xxx") {
			found = true
			if len(s.SQL) != maxStatementSQL {
				t.Fatalf("a 1 MiB statement is kept as %d bytes", len(s.SQL))
			}
		}
	}
	if !found { // 160 runs, one in 16 sampled: missed with odds of 3 in 100,000
		t.Fatal("a statement run 160 times is not among the kept ones")
	}
}
