package sqlpool

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
)

// newTablePool returns a pool that is never opened, for moving connections
// through the state table by hand (move touches neither loop nor driver).
func newTablePool(t *testing.T) *Pool {
	p := New(newScriptDriver(t), tether.DefaultBackendConfig("fake", ""))
	p.log = slog.New(slog.NewTextHandler(discardWriter{}, nil))
	return p
}

type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// pathTo returns legal moves that take a new connection to s (none for
// stateNew), found breadth first in the table.
func pathTo(s state) []state {
	prev := map[state]state{}
	seen := map[state]bool{stateNew: true}
	queue := []state{stateNew}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for to := stateNew; to < numStates; to++ {
			if legalMoves[from][to] && !seen[to] {
				seen[to], prev[to] = true, from
				queue = append(queue, to)
			}
		}
	}
	var path []state
	for at := s; at != stateNew; at = prev[at] {
		if !seen[at] {
			return nil
		}
		path = append([]state{at}, path...)
	}
	return path
}

// connIn returns a connection of p moved, legally, to s.
func connIn(t *testing.T, p *Pool, s state) *Conn {
	t.Helper()
	c := &Conn{pool: p, srv: &scriptConn{id: 1}}
	for _, to := range pathTo(s) {
		if !p.move(c, to) {
			t.Fatalf("moving a new connection to %s: refused at %s", s, to)
		}
	}
	if c.state != s {
		t.Fatalf("no legal path from new to %s", s)
	}
	return c
}

// TestFakeStates_EveryMove: every legal move moves the connection between
// the lists of its states and keeps the live count; every illegal one
// panics under the tests, and in the daemon is refused, logged and counted,
// with the connection left where it was.
func TestFakeStates_EveryMove(t *testing.T) {
	for from := stateNew; from < numStates; from++ {
		if from != stateNew && pathTo(from) == nil {
			t.Errorf("state %s cannot be reached from new", from)
		}
		for to := stateNew; to < numStates; to++ {
			if from == to {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) {
				p := newTablePool(t)
				bystander := connIn(t, p, from) // in the same list, before c
				c := connIn(t, p, from)
				live := p.live
				if !legalMoves[from][to] {
					func() {
						defer func() {
							if recover() == nil {
								t.Errorf("illegal move %s -> %s did not panic under the tests", from, to)
							}
						}()
						p.move(c, to)
					}()
					panicOnIllegalMove.Store(false)
					defer panicOnIllegalMove.Store(true)
					if p.move(c, to) {
						t.Errorf("illegal move %s -> %s accepted", from, to)
					}
					if c.state != from || p.live != live || p.stIllegalMoves.Load() != 2 {
						t.Errorf("after a refused move: %s, live %d (was %d), %d counted; want %s, unchanged, 2",
							c.state, p.live, live, p.stIllegalMoves.Load(), from)
					}
					if got := p.Stats().IllegalMoves; got != 2 {
						t.Errorf("Stats().IllegalMoves = %d after two refused moves, want 2 (tether_pool_illegal_moves_total)", got)
					}
					p.stIllegalMoves.Store(0)
					checkLists(t, p)
					return
				}
				if !p.move(c, to) {
					t.Fatalf("legal move %s -> %s refused", from, to)
				}
				if c.state != to {
					t.Errorf("state %s after moving to %s", c.state, to)
				}
				want := live
				if from == stateNew {
					want++ // it has a server session now
				}
				if to == stateGone {
					want--
				}
				if p.live != want {
					t.Errorf("live %d after %s -> %s, want %d", p.live, from, to, want)
				}
				if to != stateGone && (c.slot >= len(p.conns[to]) || p.conns[to][c.slot] != c) {
					t.Errorf("not in the %s list", to)
				}
				for _, x := range p.conns[from] {
					if x == c {
						t.Errorf("still in the %s list", from)
					}
				}
				if from != stateNew && from != stateGone && (len(p.conns[from]) != 1 || p.conns[from][0] != bystander) {
					t.Errorf("the %s list lost its other connection", from)
				}
				checkLists(t, p)
			})
		}
	}
}

// TestFakeStates_IdleKeepsOrderOfUse: idle is kept in the order of use (the
// most recently used last) whichever idle connection leaves it, since
// takeIdle prefers the most recent and the janitor closes the oldest.
func TestFakeStates_IdleKeepsOrderOfUse(t *testing.T) {
	p := newTablePool(t)
	var cs []*Conn
	for range 5 {
		cs = append(cs, connIn(t, p, stateIdle))
	}
	p.move(cs[1], stateBusy)
	p.move(cs[3], stateGone)
	p.move(cs[1], stateIdle)
	want := []*Conn{cs[0], cs[2], cs[4], cs[1]}
	if got := p.conns[stateIdle]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("idle %v, want %v", got, want)
	}
	checkLists(t, p)
}

// TestFakeStates_MoveAllocatesNothing: the per-query moves (idle to busy and
// back) allocate nothing once the lists have grown.
func TestFakeStates_MoveAllocatesNothing(t *testing.T) {
	p := newTablePool(t)
	c := connIn(t, p, stateIdle)
	connIn(t, p, stateBusy)
	if n := testing.AllocsPerRun(1000, func() {
		p.move(c, stateBusy)
		p.move(c, stateIdle)
	}); n != 0 {
		t.Errorf("%v allocations per idle -> busy -> idle", n)
	}
}

// TestFakeStates_DiagramMatchesTable: the diagram in legalMoves's doc
// comment has exactly the table's moves, each once.
func TestFakeStates_DiagramMatchesTable(t *testing.T) {
	src, err := os.ReadFile("states.go")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]state{}
	for s := stateNew; s < numStates; s++ {
		byName[s.String()] = s
	}
	edge := regexp.MustCompile(`^//\t(\w+)\s+──►\s+(\w+)\s`)
	var drawn [numStates][numStates]bool
	n := 0
	for _, line := range strings.Split(string(src), "\n") {
		m := edge.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		from, ok1 := byName[m[1]]
		to, ok2 := byName[m[2]]
		if !ok1 || !ok2 {
			t.Errorf("diagram line %q names an unknown state", line)
			continue
		}
		if drawn[from][to] {
			t.Errorf("diagram draws %s -> %s twice", from, to)
		}
		drawn[from][to] = true
		n++
	}
	if n == 0 {
		t.Fatal("no diagram found in states.go")
	}
	for from := stateNew; from < numStates; from++ {
		for to := stateNew; to < numStates; to++ {
			if drawn[from][to] != legalMoves[from][to] {
				t.Errorf("%s -> %s: drawn %v, in the table %v", from, to, drawn[from][to], legalMoves[from][to])
			}
		}
	}
}
