package sqlpool

import (
	"slices"
	"testing"
)

// TestAnswerOrder: answers pass straight through until Hold; then each waits
// for those sent before it, the retried request's first, and requests sent
// while holding keep their place.
func TestAnswerOrder(t *testing.T) {
	a, b, c, d := &Request{}, &Request{}, &Request{}, &Request{}
	name := map[*Request]string{a: "a", b: "b", c: "c", d: "d"}
	var got []string
	done := func(r *Request) { got = append(got, name[r]) }
	open := func() bool { return false }

	var o AnswerOrder
	o.Finish(a, open, done)
	if !slices.Equal(got, []string{"a"}) || o.Holding() {
		t.Fatalf("not holding: got %v, holding %v", got, o.Holding())
	}

	// b runs again; c is in flight behind it (twice in the lists, and a nil);
	// d is sent while holding.
	got = nil
	o.Hold(b, []*Request{nil, c}, []*Request{c})
	o.Hold(c) // already holding: no change
	o.Sent(d)
	o.Finish(d, open, done)
	o.Finish(c, open, done)
	if len(got) != 0 {
		t.Fatalf("answers passed before the retried one: %v", got)
	}
	o.Finish(b, open, done)
	if want := []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("order: got %v, want %v", got, want)
	}
	if o.Holding() {
		t.Fatal("still holding once every held answer went")
	}

	// A connection that closes stops the hand-over.
	got = nil
	o.Hold(a, []*Request{b})
	o.Finish(b, open, done)
	closed := false
	o.Finish(a, func() bool { return closed }, func(r *Request) { done(r); closed = true })
	if want := []string{"a"}; !slices.Equal(got, want) {
		t.Fatalf("after close: got %v, want %v", got, want)
	}
}
