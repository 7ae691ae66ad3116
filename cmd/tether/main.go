// Command tether is tetherd's command-line tool for operators: it reads a
// running tetherd's state from its admin API (docs/operations.md, "Watching
// tetherd") and talks to it over the PHP socket for a quick check from a
// shell.
//
//	tether [flags] status          version, readiness, clients, pools and cache at a glance
//	tether [flags] pools           the backends' pools
//	tether [flags] stats           the result cache's counters
//	tether [flags] ping            a round trip on the PHP socket, and /readyz
//	tether [flags] query [-backend NAME] SQL [PARAM...]
//	tether check [--connect] CONFIG validate a config file and build its backends;
//	                               --connect also logs in to each
//
// Human tables by default; -json prints what the admin API answers (status,
// pools, stats) or the reply (query).
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := NewMain().Run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tether:", err)
		os.Exit(1)
	}
}
