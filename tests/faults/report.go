package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// report is what a campaign found: free text, tables of figures, and the
// invariants it judged.
type report struct {
	title    string
	lines    []string
	checks   []string // "met" or "FAILED" lines
	failures []string
	took     time.Duration
}

// say adds a paragraph.
func (r *report) say(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...), "")
}

// table adds a markdown table.
func (r *report) table(header []string, rows [][]string) {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	r.lines = append(r.lines, b.String())
}

// check judges one invariant.
func (r *report) check(ok bool, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if ok {
		r.checks = append(r.checks, "- "+s+": **met**")
		return
	}
	r.checks = append(r.checks, "- "+s+": **FAILED**")
	r.failures = append(r.failures, s)
}

// fail records an invariant that failed outright.
func (r *report) fail(format string, args ...any) { r.check(false, format, args...) }

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### %s\n\n", r.title)
	for _, l := range r.lines {
		b.WriteString(l + "\n")
	}
	if len(r.checks) > 0 {
		b.WriteString("Invariants:\n\n")
		for _, c := range r.checks {
			b.WriteString(c + "\n")
		}
	}
	fmt.Fprintf(&b, "\n(%s)\n", r.took.Round(100*time.Millisecond))
	return b.String()
}

// durations summarises a sample of durations.
func durations(ds []time.Duration) (p50, p99, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
