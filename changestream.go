package tether

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tether-php/tether/internal/resultcache"
)

// Change streams: for each backend with change_stream on, a goroutine follows
// the database's own log of commits (ChangeFollower) and drops the cached
// results they made stale, so that writes that did not pass through this
// tetherd (another web host's, a cron job's, an operator's) are seen within
// about the stream's delay rather than the TTL. While a stream is down,
// cached results are bounded by their TTL only; when it is back, the
// backend's whole cache is dropped (what happened meanwhile was not read).

// commitVisibleDelay is how long after a change arrives the backend's cache
// is dropped a second time. A MySQL server writes a transaction to its binary
// log, and so to its replicas, just before the storage engine's commit
// becomes visible to other sessions: a read that starts in that gap reads the
// old rows and would be stored as fresh. The second drop bounds that to this
// delay.
const commitVisibleDelay = 100 * time.Millisecond

// streamRetryMax bounds the wait between attempts to reopen a broken stream.
const streamRetryMax = 10 * time.Second

// startChangeStreams starts following the change stream of every backend
// that asks for it, until ctx ends.
func (s *Server) startChangeStreams(ctx context.Context) {
	for name, b := range s.backends {
		if !s.cfg.Backends[name].ChangeStream {
			continue
		}
		f, ok := b.(ChangeFollower)
		if !ok {
			continue // Config.Validate refuses change_stream on other types
		}
		s.bg.Add(1)
		go s.followChanges(ctx, name, f)
	}
}

// followChanges follows one backend's stream until ctx ends, reopening it
// when it breaks.
func (s *Server) followChanges(ctx context.Context, name string, f ChangeFollower) {
	defer s.bg.Done()
	var again atomic.Bool // a second drop is due (commitVisibleDelay)
	changed := func(tables []string) {
		s.streamInvalidate(name, tables)
		if again.CompareAndSwap(false, true) {
			time.AfterFunc(commitVisibleDelay, func() {
				again.Store(false)
				s.cache.InvalidateBackend(name, resultcache.CauseChangeStream)
			})
		}
	}
	wait := 100 * time.Millisecond
	for {
		start := time.Now()
		err := f.FollowChanges(ctx, func() {
			s.cache.InvalidateBackend(name, resultcache.CauseChangeStream)
			s.log.Info("change stream following", "backend", name)
		}, changed)
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
