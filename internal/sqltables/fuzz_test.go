package sqltables_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tether-php/tether/internal/sqltables"
)

// openers start a string, quoted identifier or comment that the fuzz test
// leaves unterminated, per dialect.
var openers = map[sqltables.Dialect][]string{
	my: {"'", `"`, "`", "/*", "/*!", "/*M!", "'\\'", `"\"`},
	pg: {"'", `"`, "/*", "/* /* */", "$$", "$t$", "E'", `E'\'`, "U&'", `U&"`},
}

// FuzzAnalyze checks, for any input: no panic; the Info's invariants; a
// reused Analyzer answers as Analyze does; and an input the analysis is
// Certain of stops being so once an unterminated string, identifier or
// comment follows it.
func FuzzAnalyze(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.d == pg, tc.sql)
	}
	for _, b := range benchCases {
		f.Add(b.d == pg, b.sql)
	}
	var a sqltables.Analyzer
	f.Fuzz(func(t *testing.T, postgres bool, sql string) {
		d := my
		if postgres {
			d = pg
		}
		info := sqltables.Analyze(d, sql)
		checkInfo(t, sql, info)
		again := a.Analyze(d, sql)
		if again.Kind != info.Kind || !slices.Equal(again.Tables, info.Tables) || again.Certain != info.Certain ||
			again.Cacheable != info.Cacheable || again.Reason != info.Reason || again.Temporary != info.Temporary {
			t.Fatalf("Analyzer.Analyze(%q) = %+v, Analyze = %+v", sql, again, info)
		}
		if !info.Certain {
			return
		}
		for _, o := range openers[d] {
			// The newline ends a line comment the input may end in.
			s := sql + "\n" + o
			if got := sqltables.Analyze(d, s); got.Certain {
				t.Fatalf("Analyze(%q) is Certain although it ends in an unterminated %q", s, o)
			}
		}
	})
}

func checkInfo(t *testing.T, sql string, info sqltables.Info) {
	t.Helper()
	if info.Cacheable && (!info.Certain || info.Kind != sqltables.Read) {
		t.Fatalf("Analyze(%q) = %+v: Cacheable but not a Certain read", sql, info)
	}
	if info.Cacheable != (info.Reason == "") {
		t.Fatalf("Analyze(%q) = %+v: Cacheable %v with Reason %q", sql, info, info.Cacheable, info.Reason)
	}
	if info.Kind == sqltables.Other && info.Tables != nil {
		t.Fatalf("Analyze(%q) = %+v: tables for Other", sql, info)
	}
	if len(info.Tables) == 0 && info.Tables != nil {
		t.Fatalf("Analyze(%q) = %+v: empty non-nil Tables", sql, info)
	}
	for i, n := range info.Tables {
		if n == "" || n != strings.ToLower(n) {
			t.Fatalf("Analyze(%q) = %+v: table %q is empty or not lower-case", sql, info, n)
		}
		if slices.Contains(info.Tables[:i], n) {
			t.Fatalf("Analyze(%q) = %+v: table %q twice", sql, info, n)
		}
	}
}
