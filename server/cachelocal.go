package server

import (
	"time"

	"github.com/tether-php/tether/internal/resultcache"
	"github.com/tether-php/tether/internal/shmversions"
	"github.com/tether-php/tether/wire"
)

// The local cache's publisher (cache.local; docs/operations.md, "Result
// cache", "Hits in the PHP worker"): tetherd publishes per-table versions in
// a shared memory segment (internal/shmversions), and a cacheable read that
// asks for them ("versions": true) gets, with its result, the versions of
// the slots that result depends on, read before the query ran. The PHP client
// keeps the result in APCu and serves it again, without a call, while those
// versions are unchanged. So every place that drops cached results bumps the
// slots of what it drops, after the result cache forgot them and before the
// write that made them stale is answered (cacheState.invalidate, which every
// drop goes through, and noteReload).
//
// Why the order holds: a read reads the versions (t0) before Begin (t1); a
// write commits, the result cache drops (A), the slots are bumped (B), then
// its client is answered. A value older than the write was read, or served
// from the cache, before A, so t0 < t1 < A < B: the versions the reply
// carries are old at B, and no PHP worker serves the entry after the write's
// client was answered.

// maxLocalTables bounds the table slots a reply names; a read of more tables
// depends on its backend's "any" slot instead.
const maxLocalTables = 8

// localRead is what a read that asked for versions carries to its reply.
type localRead struct {
	v        wire.Versions
	columnar bool
	slots    [maxLocalTables]uint32
	values   [maxLocalTables]uint64
}

// openVersions creates the versions segment when cache.local asks for it,
// and starts its heartbeat. A failure is logged, and the local cache stays
// off (PHP falls back to calls): it is an optimisation.
func (s *Server) openVersions() {
	if !s.cfg.Cache.Local || s.cache == nil || s.cfg.Server.Socket == "" {
		return
	}
	path := shmversions.KeyPath(s.cfg.Server.Socket)
	seg, err := shmversions.Open(path, shmversions.DefaultSlots)
	if err != nil {
		s.log.Warn("result cache: local cache off: cannot publish table versions", "key_file", path, "err", err)
		return
	}
	s.versions.Store(seg)
	s.versionsStop, s.versionsDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.versionsDone)
		t := time.NewTicker(shmversions.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-s.versionsStop:
				return
			case now := <-t.C:
				seg.Beat(now)
			}
		}
	}()
	s.log.Info("result cache: publishing table versions for the local cache", "key_file", path,
		"shm_key", seg.ShmKey(), "generation", seg.Generation())
}

// closeVersions marks the segment closed: PHP workers stop serving what
// they kept, at once.
func (s *Server) closeVersions() {
	seg := s.versions.Swap(nil)
	if seg == nil {
		return
	}
	close(s.versionsStop)
	<-s.versionsDone
	seg.Close()
}

// VersionsSegment returns the segment tetherd publishes its versions in, or
// nil (cache.local off, or it could not be made). For tests and /status.
func (s *Server) VersionsSegment() *shmversions.Segment { return s.versions.Load() }

// publish bumps the slots of what a drop of backend's cached results (its
// tables; all: its whole cache) made stale. Called after the result cache
// forgot them and before the write's client is answered.
func (c *cacheState) publish(backend string, tables []string, all bool) {
	seg := c.versions.Load()
	if seg == nil {
		return
	}
	if all {
		seg.DropBackend(backend)
		return
	}
	seg.DropTables(backend, tables)
}

// noteReload voids every version published so far: a reload may have
// changed the backend a name (or the default backend) means. Loop
// goroutine, with the new set stored.
func (s *Server) noteReload() {
	if seg := s.versions.Load(); seg != nil {
		seg.BumpReset()
	}
}

// localVersions returns the versions of what read depends on, read now
// (before its Begin), for a request that asked for them; nil when it did not,
// or the local cache is off. profile is the session's settings profile. It
// sets read's TTL to 0 when it returns versions (see below).
func (c *cacheState) localVersions(r *wire.Request, read *resultcache.Read, profile string) *localRead {
	if !r.Versions {
		return nil
	}
	seg := c.versions.Load()
	if seg == nil {
		return nil
	}
	lr := &localRead{v: wire.Versions{Profile: profile}, columnar: r.Columnar}
	if read.TTL <= 0 {
		return lr
	}
	lr.v.Keep = true
	lr.v.Generation, lr.v.Reset = seg.Generation(), seg.Reset()
	n := 0
	if read.AllTables || len(read.Tables) == 0 || len(read.Tables) > maxLocalTables {
		lr.slots[0] = seg.AnySlot(read.Key.Backend)
		n = 1
	} else {
		for _, t := range read.Tables { // marked before loaded: see DropBackend
			lr.slots[n] = seg.TableSlotFor(read.Key.Backend, t)
			n++
		}
	}
	for i := 0; i < n; i++ {
		lr.values[i] = seg.Load(lr.slots[i])
	}
	lr.v.Slots, lr.v.Values = lr.slots[:n], lr.values[:n]
	// Never answered from tetherd's own cache, nor stored there: when a
	// stored result was read is not known here, and a PHP worker keeping it
	// for another TTL would stretch the TTL's bound. The local cache is this
	// read's cache; identical reads in flight still merge.
	read.TTL = 0
	return lr
}

// appendLeadVersions appends a leading read's result with its versions (the
// reply callDone writes for a call that carries them), or its usual reply
// when it failed or is too large.
func (s *Server) appendLeadVersions(b []byte, c *sqlCall) []byte {
	q := &c.q
	if q.Err != nil {
		return s.appendSQLOutcome(b, c.h, c.op, q, c.enc)
	}
	body := s.resultBody(c.enc)
	if len(body) > s.cfg.Server.MaxResultBytes {
		return s.appendSQLOutcome(b, c.h, c.op, q, c.enc)
	}
	return wire.AppendCachedResultVersions(b, c.h, c.local.columnar, body, &c.local.v)
}
