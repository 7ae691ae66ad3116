package server

import (
	"context"
	"errors"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// drainingBackend is a fake Backend whose Close drains for drain (its
// graceful close), or until its context ends; forever when stuck.
type drainingBackend struct {
	drain    time.Duration
	stuck    bool
	graceful chan struct{} // closed when its graceful close completed
}

func (b *drainingBackend) Open(context.Context) error { return nil }
func (b *drainingBackend) Stats() tether.PoolStats    { return tether.PoolStats{} }
func (b *drainingBackend) Close(ctx context.Context) error {
	if b.stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-time.After(b.drain):
		close(b.graceful)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestCloseBackends_SlowOneLeavesOthersTheirTime: a backend whose Close
// takes the whole deadline must not leave the others an expired context
// (they were closed one after the other under one deadline): each still
// gets its graceful close, and closing them all takes the deadline, not the
// sum of their times.
func TestCloseBackends_SlowOneLeavesOthersTheirTime(t *testing.T) {
	slow := &drainingBackend{stuck: true}
	next := &drainingBackend{drain: 100 * time.Millisecond, graceful: make(chan struct{})}
	other := &drainingBackend{drain: 100 * time.Millisecond, graceful: make(chan struct{})}
	bs := []*liveBackend{ // in the order Shutdown lists them: by name
		newLiveBackend("a-slow", tether.BackendConfig{}, slow),
		newLiveBackend("b-next", tether.BackendConfig{}, next),
		newLiveBackend("c-other", tether.BackendConfig{}, other),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := closeBackends(ctx, bs)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("closeBackends: %v, want the stuck backend's deadline error", err)
	}
	for _, b := range []*drainingBackend{next, other} {
		select {
		case <-b.graceful:
		default:
			t.Errorf("a backend listed after the stuck one did not get its graceful close")
		}
	}
	if took > 2*time.Second {
		t.Errorf("closing took %s with a 400 ms deadline", took)
	}
	for _, lb := range bs {
		if !lb.closed.Load() {
			t.Errorf("backend %s not marked closed", lb.name)
		}
	}
}
