// Command gencert writes testcert's throwaway CA, server and client
// certificates into a directory, for scripts/test.sh's TLS tests.
//
//	go run ./internal/testcert/gencert DIR HOST...
package main

import (
	"fmt"
	"os"

	"github.com/tether-php/tether/internal/testcert"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gencert DIR HOST...")
		os.Exit(2)
	}
	if _, err := testcert.Generate(os.Args[1], os.Args[2:]...); err != nil {
		fmt.Fprintln(os.Stderr, "gencert:", err)
		os.Exit(1)
	}
}
