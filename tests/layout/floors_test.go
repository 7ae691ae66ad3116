// Package layout checks the house's floors: every package of the module sits on one floor, and imports only from
// its own floor or lower ones, so the drawing of the imports reads top to bottom (docs/architecture.md).
package layout

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/tether-php/tether"

// floors lists the module's packages from the bottom up, by path below the module (a trailing "/..." takes the
// sub-packages too; "." is the root). The most specific entry decides a package's floor. A new package must be
// placed here, on the floor its imports and importers allow: the test fails for one it does not know.
var floors = [][]string{
	{"internal/..."}, // leaf utilities: the event loop, fault hooks, SQL lexing, the result cache's store
	{"."},            // the domain: Backend and its capabilities, Config and the registry, Error, Result, RowSink
	{"wire"},         // the client protocol's codec
	{"backend/sqldb", "backend/sqlpool", "backend/sqlconn", "backend/backendtest", "backend/topology", "backend/sqlroute"}, // what SQL backends are built from; the shared backend tests; hosts' roles; routing over them
	{"backend/mysql", "backend/postgres", "backend/sqlite", "backend/cassandra", "backend/bigtable", "backend/http"},
	{"backend/all"}, // links every backend type
	{"server/..."},  // tetherd's server: dispatch, sessions, transactions, cache, reload, limits, metrics, hand-over
	{"admin"},       // the admin socket and status page over the server
	{"cmd/..."},     // the programs: wiring only
	{"bench/...", "tests/..."},
}

// floorOf returns pkg's floor (path below the module) and whether floors places it.
func floorOf(pkg string) (int, bool) {
	best, bestLen := -1, -1
	for i, entries := range floors {
		for _, e := range entries {
			prefix, tree := strings.CutSuffix(e, "/...")
			match := pkg == prefix || (tree && strings.HasPrefix(pkg, prefix+"/"))
			if match && len(prefix) > bestLen {
				best, bestLen = i, len(prefix)
			}
		}
	}
	return best, best >= 0
}

type listed struct {
	ImportPath string
	Imports    []string
}

// modulePackages lists the module's packages and their (non-test) imports, by path below the module.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) string {
		if p == module {
			return "."
		}
		return strings.TrimPrefix(p, module+"/")
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		var own []string
		for _, imp := range p.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				own = append(own, rel(imp))
			}
		}
		pkgs[rel(p.ImportPath)] = own
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of %s: not the module", len(pkgs), module)
	}
	return pkgs
}

// TestImportsRunDownward: no package imports one on a higher floor, and every package has a floor.
func TestImportsRunDownward(t *testing.T) {
	pkgs := modulePackages(t)
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		from, ok := floorOf(p)
		if !ok {
			t.Errorf("package %s has no floor: place it in floors (tests/layout/floors_test.go) and docs/architecture.md", p)
			continue
		}
		for _, imp := range pkgs[p] {
			to, ok := floorOf(imp)
			if ok && to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import runs up", p, from, imp, to)
			}
		}
	}
}

// TestFloorOf: the rule's own cases, so that a broken matcher cannot pass every package.
func TestFloorOf(t *testing.T) {
	for pkg, want := range map[string]int{
		".": 1, "internal/evloop": 0, "wire": 2, "backend/sqlpool": 3, "backend/mysql": 4, "server": 6, "cmd/tetherd": 8,
	} {
		if got, ok := floorOf(pkg); !ok || got != want {
			t.Errorf("floorOf(%q) = %d, %v; want %d", pkg, got, ok, want)
		}
	}
	if _, ok := floorOf("serverless"); ok {
		t.Error(`floorOf("serverless") found a floor: "server/..." must not match a longer name`)
	}
}
