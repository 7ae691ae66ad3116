package server

import (
	"context"
	"sync"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/resultcache"
)

// Change streams: for each backend with change_stream on, a goroutine follows
// the database's own log of commits (ChangeFollower) and drops the cached
// results they made stale, so that writes that did not pass through this
// tetherd (another web host's, a cron job's, an operator's) are seen within
// about the stream's delay rather than the TTL. While a stream is down,
// cached results are bounded by their TTL only; when it is back, the
// backend's whole cache is dropped (what happened meanwhile was not read).

// commitVisibleDelay is how long after a change arrives what it made stale is
// dropped a second time. A MySQL server writes a transaction to its binary
// log, and so to its replicas, just before the storage engine's commit
// becomes visible to other sessions: a read that starts in that gap reads the
// old rows and would be stored as fresh. The second drop bounds that to this
// delay.
const commitVisibleDelay = 100 * time.Millisecond

// streamRetryMax bounds the wait between attempts to reopen a broken stream.
const streamRetryMax = 10 * time.Second

// startChangeStream starts following lb's change stream, when its config
// asks for it, until ctx ends.
func (s *Server) startChangeStream(ctx context.Context, lb *liveBackend) {
	if !lb.cfg.ChangeStream {
		return
	}
	f, ok := lb.b.(tether.ChangeFollower)
	if !ok {
		return // Config.Validate refuses change_stream on other types
	}
	s.bg.Add(1)
	go s.followChanges(ctx, lb.name, f)
}

// followChanges follows one backend's stream until ctx ends, reopening it
// when it breaks.
func (s *Server) followChanges(ctx context.Context, name string, f tether.ChangeFollower) {
	defer s.bg.Done()
	again := &secondDrop{s: s, backend: name}
	defer again.stop()
	changed := func(tables []string) {
		s.streamInvalidate(name, tables)
		again.add(tables)
	}
	wait := 100 * time.Millisecond
	for {
		start := time.Now()
		err := s.safeCall(name, "change_stream", func() error {
			return f.FollowChanges(ctx, func() {
				s.invalidate(name, nil, true, resultcache.CauseChangeStream)
				s.log.Info("change stream following", "backend", name)
			}, changed)
		})
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			wait = 100 * time.Millisecond
		}
		s.log.Warn("change stream broken: the backend's cached results are bounded by their TTL until it is back",
			"backend", name, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, streamRetryMax)
	}
}

// secondDrop drops, commitVisibleDelay after each change the stream reported,
// what that change made stale once more: each table at least that long after
// its last change (a change of unknown reach: the whole backend).
type secondDrop struct {
	s       *Server
	backend string

	mu      sync.Mutex
	tables  map[string]time.Time // table -> its last change
	all     time.Time            // the last change of unknown reach, if any
	timer   *time.Timer
	stopped bool
}

func (d *secondDrop) add(tables []string) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	if tables == nil {
		d.all = now
	} else {
		if d.tables == nil {
			d.tables = map[string]time.Time{}
		}
		for _, t := range tables {
			d.tables[t] = now
		}
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(commitVisibleDelay, d.fire)
	}
}

// fire drops what is due, and waits again for the rest.
func (d *secondDrop) fire() {
	now := time.Now()
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	var due []string
	all := false
	next := time.Duration(0)
	if !d.all.IsZero() {
		if age := now.Sub(d.all); age >= commitVisibleDelay {
			all, d.all = true, time.Time{}
		} else {
			next = commitVisibleDelay - age
		}
	}
	for t, at := range d.tables {
		if age := now.Sub(at); age >= commitVisibleDelay {
			due = append(due, t)
			delete(d.tables, t)
		} else if left := commitVisibleDelay - age; next == 0 || left < next {
			next = left
		}
	}
	if next > 0 {
		d.timer.Reset(next)
	} else {
		d.timer = nil
	}
	d.mu.Unlock()
	switch {
	case all:
		d.s.invalidate(d.backend, nil, true, resultcache.CauseChangeStream)
	case len(due) > 0:
		d.s.streamInvalidate(d.backend, due)
	}
}

func (d *secondDrop) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}
