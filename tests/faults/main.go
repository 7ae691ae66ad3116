// Command faults is tetherd's fault suite: campaigns an outside tester would
// run against it (PgBouncer's and ProxySQL's own test suites do the like),
// each against the real servers run.sh starts and a tetherd of its own, each
// printing its figures as markdown and judging the invariants that must hold
// whatever the fault (nothing lost, nothing leaked, bounds kept, tetherd
// alive). It exits non-zero if any invariant fails. See docs/reliability.md.
//
//	go run ./tests/faults [-quick] [-only name,name] > report.md
//
// run.sh builds tetherd, starts MariaDB, PostgreSQL and nginx, and passes their
// coordinates in the environment (FAULTS_*).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// campaign is one fault campaign.
type campaign struct {
	name  string // for -only
	title string
	run   func(e *env, r *report) error
}

// campaigns lists every campaign, in the order they run. Each file of this
// package adds its own in an init function.
var campaigns []campaign

func register(c campaign) { campaigns = append(campaigns, c) }

func main() {
	quick := flag.Bool("quick", false, "smaller campaigns, for make test: every invariant still judged")
	only := flag.String("only", "", "comma-separated campaign names to run (default: all)")
	flag.Parse()
	e, err := newEnv(*quick)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	defer e.close()
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	failed := 0
	start := time.Now()
	for _, c := range campaigns {
		if len(want) > 0 && !want[c.name] {
			continue
		}
		r := &report{title: c.title}
		e.logf("campaign %s: %s", c.name, c.title)
		t0 := time.Now()
		err := c.run(e, r)
		r.took = time.Since(t0)
		if err != nil {
			r.fail("the campaign could not run: %v", err)
		}
		e.stopTetherd()
		fmt.Print(r.markdown())
		if len(r.failures) > 0 {
			failed++
			e.logf("campaign %s: FAILED: %s", c.name, strings.Join(r.failures, "; "))
		} else {
			e.logf("campaign %s: passed in %s", c.name, r.took.Round(time.Second))
		}
	}
	fmt.Printf("\nAll campaigns: %s, %d failed.\n", time.Since(start).Round(time.Second), failed)
	if failed > 0 {
		os.Exit(1)
	}
}
