package sqlconn_test

import (
	"slices"
	"testing"

	"github.com/tether-php/tether/backend/sqlconn"
)

type stmt struct {
	sql string
	id  int
}

// newCache returns a cache of size whose closes are recorded in order.
func newCache(size int) (*sqlconn.StmtCache[*stmt], *[]int) {
	var closed []int
	c := &sqlconn.StmtCache[*stmt]{}
	c.Init(size, func(st *stmt) { closed = append(closed, st.id) })
	return c, &closed
}

func put(c *sqlconn.StmtCache[*stmt], sql string, id int) *stmt {
	st := &stmt{sql: sql, id: id}
	c.Put(sql, st)
	return st
}

// TestStmtCache_EvictsLeastRecentlyUsed: past its size the cache closes the
// statement used longest ago, where a Get counts as a use.
func TestStmtCache_EvictsLeastRecentlyUsed(t *testing.T) {
	c, closed := newCache(2)
	a := put(c, "a", 1)
	put(c, "b", 2)
	if got := c.Get("a"); got != a {
		t.Fatalf("Get(a) = %v, want %v", got, a)
	}
	put(c, "c", 3) // b is the least recently used now
	if !slices.Equal(*closed, []int{2}) {
		t.Fatalf("closed %v, want [2] (b)", *closed)
	}
	if c.Get("b") != nil || c.Get("a") == nil || c.Get("c") == nil || c.Len() != 2 {
		t.Fatalf("after eviction: b %v, a %v, c %v, len %d", c.Get("b"), c.Get("a"), c.Get("c"), c.Len())
	}
	put(c, "d", 4) // a was used before c
	if !slices.Equal(*closed, []int{2, 1}) {
		t.Fatalf("closed %v, want [2 1]", *closed)
	}
}

// TestStmtCache_PutReplacesAndClosesTheOld: the same text prepared again
// (two retries written before either answer) keeps the newer statement and
// closes the older on the server, rather than leaving it open there.
func TestStmtCache_PutReplacesAndClosesTheOld(t *testing.T) {
	c, closed := newCache(4)
	put(c, "a", 1)
	put(c, "b", 2)
	a2 := put(c, "a", 3)
	if !slices.Equal(*closed, []int{1}) {
		t.Fatalf("closed %v, want [1]: the replaced statement", *closed)
	}
	if got := c.Get("a"); got != a2 || c.Len() != 2 {
		t.Fatalf("Get(a) = %v, len %d; want the newer, 2", got, c.Len())
	}
	// The replaced statement is out of the recency list too: filling the
	// cache evicts b, then a, each once.
	put(c, "c", 4)
	put(c, "d", 5)
	put(c, "e", 6)
	put(c, "f", 7)
	if !slices.Equal(*closed, []int{1, 2, 3}) {
		t.Fatalf("closed %v, want [1 2 3]", *closed)
	}
}

// TestStmtCache_RemoveOnlyTheCachedOne: Remove closes a statement only if it
// is the one cached for its text; Clear forgets all and closes none (the
// server dropped them).
func TestStmtCache_RemoveOnlyTheCachedOne(t *testing.T) {
	c, closed := newCache(4)
	old := &stmt{sql: "a", id: 1}
	cur := put(c, "a", 2)
	if c.Remove("a", old) {
		t.Fatal("Remove of a statement no longer cached reported it removed")
	}
	if len(*closed) != 0 || c.Get("a") != cur {
		t.Fatalf("after Remove(old): closed %v, cached %v", *closed, c.Get("a"))
	}
	if !c.Remove("a", cur) || !slices.Equal(*closed, []int{2}) || c.Get("a") != nil {
		t.Fatalf("Remove(cur): closed %v, cached %v", *closed, c.Get("a"))
	}
	put(c, "b", 3)
	put(c, "c", 4)
	c.Clear()
	if c.Len() != 0 || c.Get("b") != nil || len(*closed) != 1 {
		t.Fatalf("after Clear: len %d, closed %v", c.Len(), *closed)
	}
	put(c, "d", 5) // the list is usable after Clear
	if c.Get("d") == nil {
		t.Fatal("Put after Clear: not cached")
	}
}

// TestStmtCache_SizeAtLeastOne: a size of 0 keeps one statement.
func TestStmtCache_SizeAtLeastOne(t *testing.T) {
	c, closed := newCache(0)
	put(c, "a", 1)
	put(c, "b", 2)
	if c.Len() != 1 || c.Get("b") == nil || !slices.Equal(*closed, []int{1}) {
		t.Fatalf("len %d, closed %v", c.Len(), *closed)
	}
}
