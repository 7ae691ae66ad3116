package sqltables_test

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/tether-php/tether/internal/sqltables"
)

// openers start a string, quoted identifier or comment that the fuzz test
// leaves unterminated, per dialect.
var openers = map[sqltables.Dialect][]string{
	my: {"'", `"`, "`", "/*", "/*!", "/*M!", "'\\'", `"\"`},
	pg: {"'", `"`, "/*", "/* /* */", "$$", "$t$", "E'", `E'\'`, "U&'", `U&"`},
}

// comments are prefixes that must not change an analysis.
var comments = map[sqltables.Dialect][]string{
	my: {"/* FROM evil; DELETE FROM x */ ", "-- FROM evil, (\n", "# DELETE FROM x\n", "/*!*/ \t/**/\r\n"},
	pg: {"/* FROM evil /* DELETE FROM x */ */ ", "--FROM evil, (\n", "\t/**/\r\n"},
}

// FuzzAnalyze checks, for any input: no panic; the Info's invariants; a
// reused Analyzer answers as Analyze does; a leading comment changes
// nothing, nor does a trailing one after a Certain input; and an input the
// analysis is Certain of stops being so once an unterminated string,
// identifier or comment follows it; and a certain SELECT followed by FOR
// UPDATE is never ReplicaSafe.
func FuzzAnalyze(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.d == pg, tc.sql)
	}
	for _, b := range benchCases {
		f.Add(b.d == pg, b.sql)
	}
	for _, tc := range replicaCases {
		f.Add(tc.d == pg, tc.sql)
	}
	var a sqltables.Analyzer
	f.Fuzz(func(t *testing.T, postgres bool, sql string) {
		d := my
		if postgres {
			d = pg
		}
		if !postgres {
			// The sql_modes: no panic, the Info's invariants.
			for _, m := range []sqltables.Dialect{sqltables.ANSIQuotes, sqltables.NoBackslashEscapes} {
				checkInfo(t, sql, sqltables.Analyze(d|m, sql))
			}
		}
		info := sqltables.Analyze(d, sql)
		checkInfo(t, sql, info)
		if again := a.Analyze(d, sql); !sameInfo(again, info) {
			t.Fatalf("Analyzer.Analyze(%q) = %+v, Analyze = %+v", sql, again, info)
		}
		// Comments change nothing, whatever the SQL in them.
		for _, c := range comments[d] {
			if got := sqltables.Analyze(d, c+sql); !sameInfo(got, info) {
				t.Fatalf("Analyze(%q) = %+v, Analyze(%q) = %+v", c+sql, got, sql, info)
			}
		}
		if !info.Certain {
			return
		}
		if s := sql + "\n-- FROM evil; DELETE FROM x"; !sameInfo(sqltables.Analyze(d, s), info) {
			t.Fatalf("Analyze(%q) = %+v, Analyze(%q) = %+v", s, sqltables.Analyze(d, s), sql, info)
		}
		// A locking clause after a SELECT is found, whatever precedes it
		// (the x ends a name a trailing dot may have left open: t.x).
		if lead := strings.TrimLeftFunc(sql, unicode.IsSpace); hasPrefixFold(lead, "select") {
			s := sql + "\nx FOR UPDATE"
			if got := sqltables.Analyze(d, s); got.ReplicaSafe {
				t.Fatalf("Analyze(%q) = %+v: ReplicaSafe with FOR UPDATE", s, got)
			}
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

func sameInfo(a, b sqltables.Info) bool {
	return a.Kind == b.Kind && slices.Equal(a.Tables, b.Tables) && a.Certain == b.Certain &&
		a.Cacheable == b.Cacheable && a.Reason == b.Reason && a.Temporary == b.Temporary && a.Session == b.Session &&
		a.ReplicaSafe == b.ReplicaSafe && a.ReplicaReason == b.ReplicaReason
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func checkInfo(t *testing.T, sql string, info sqltables.Info) {
	t.Helper()
	if info.Cacheable && (!info.Certain || info.Kind != sqltables.Read) {
		t.Fatalf("Analyze(%q) = %+v: Cacheable but not a Certain read", sql, info)
	}
	if info.Cacheable != (info.Reason == "") {
		t.Fatalf("Analyze(%q) = %+v: Cacheable %v with Reason %q", sql, info, info.Cacheable, info.Reason)
	}
	if info.ReplicaSafe && (!info.Certain || info.Kind != sqltables.Read || info.Session || info.Temporary) {
		t.Fatalf("Analyze(%q) = %+v: ReplicaSafe but not a Certain read that leaves the session alone", sql, info)
	}
	if info.ReplicaSafe != (info.ReplicaReason == "") {
		t.Fatalf("Analyze(%q) = %+v: ReplicaSafe %v with ReplicaReason %q", sql, info, info.ReplicaSafe, info.ReplicaReason)
	}
	if info.Cacheable && !info.ReplicaSafe {
		// Every construct that sends a read to the primary also makes it
		// uncacheable.
		t.Fatalf("Analyze(%q) = %+v: Cacheable but not ReplicaSafe", sql, info)
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
