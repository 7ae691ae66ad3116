// Command tetherd is the Tether daemon: a sidecar that holds warm, pooled
// connections to data backends and serves PHP workers over a Unix socket.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := NewMain().Run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tetherd:", err)
		os.Exit(1)
	}
}
