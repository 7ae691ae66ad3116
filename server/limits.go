package server

import (
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"sync/atomic"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/evloop"
)

// What one client can make tetherd hold, bounded (docs/operations.md,
// "Limits"), so that no client, however it behaves, can take tetherd down for
// every other PHP worker on the host:
//
//   - connections: max_client_conns at once; one more is answered unavailable
//     and closed;
//   - input: a frame is at most max_frame_bytes (4 KiB before a TCP client's
//     hello), and one begun must be finished within client_frame_timeout
//     (slowloris);
//   - work: max_client_requests in flight per connection, past which its
//     socket is not read (its requests wait in the kernel and in the client,
//     not in tetherd); max_client_txs transactions open;
//   - output: max_client_output_bytes of replies queued for a client that does
//     not read, past which it is closed;
//   - all of it together: max_memory_bytes, the Go runtime's soft limit, past
//     which the connections holding the most are closed; checked by every
//     sweep and after every inputCheckEvery bytes of partial frames taken
//     in, so that a burst of half-sent frames cannot run far past it
//     between sweeps;
//   - time: client_idle_timeout, if set; a TCP client must send its hello
//     within preAuthTimeout.
//
// The sweep runs every clientSweepPeriod on the loop goroutine; the times it
// compares are its own coarse clock (Server.clock), read on the hot path for
// free.

const (
	clientSweepPeriod = 250 * time.Millisecond
	// cacheSweepEvery is how often the result cache drops what expired.
	cacheSweepEvery = 5 * time.Second
	preAuthTimeout  = 10 * time.Second
	// memorySlack is kept below max_memory_bytes when closing connections
	// to get back under it.
	memorySlack = 0.9
	// inputCheckEvery: the memory budget is checked again after this many
	// bytes of partial frames were taken in, between sweeps.
	inputCheckEvery = 4 << 20
	// Once clients' buffers let go of, or memory the runtime holds free (not
	// returned to the system), pass returnMemoryAt, it is collected and
	// returned, at most every returnMemoryEvery: after a burst of large
	// frames or replies, RSS comes back down in seconds, not minutes (with
	// nothing allocating, the runtime would not collect, and its scavenger
	// returns memory slowly by design).
	returnMemoryAt    = 64 << 20
	returnMemoryEvery = 5 * time.Second
)

// clientLimits is the state of the client bounds: the sessions, their sweep
// and its clock, and what was refused or closed, for the log. Loop goroutine
// only, but for the atomics.
type clientLimits struct {
	sessions     map[*session]struct{}
	clients      atomic.Int64 // len(sessions), for any goroutine (Snapshot)
	clock        int64        // unix nanos, refreshed by every sweep
	rejected     int          // connections refused past max_client_conns since last logged
	rejectLogged int64
	acceptErrs   int       // accepts failed since last logged
	acceptLogged time.Time // when they were last logged
	sweepStop    chan struct{}
	sweepDone    chan struct{}
	inputGrowth  int64 // partial-frame bytes taken in since the memory budget was last checked
	// freeing: memory shed from closed clients is being collected and
	// returned to the system; the heap figure still counts it meanwhile.
	freeing atomic.Bool
	// Clients closed for max_client_output_bytes (from any goroutine), and
	// when that was last logged (unix nanos).
	outputClosed atomic.Int64
	outputLogged atomic.Int64
}

// onOpenLimits counts a new connection, refusing it past max_client_conns;
// it reports whether the connection may stay.
func (s *Server) onOpenLimits(ss *session) bool {
	ss.opened, ss.lastActive = s.clock, s.clock
	if len(s.sessions) >= s.cfg.Server.MaxClientConns {
		s.rejected++
		s.replyErrorNow(ss, 0, &tether.Error{Code: tether.CodeUnavailable, Retry: true,
			Message: fmt.Sprintf("too many client connections (server.max_client_conns = %d)", s.cfg.Server.MaxClientConns)})
		ss.conn.Close()
		return false
	}
	s.sessions[ss] = struct{}{}
	s.clients.Store(int64(len(s.sessions)))
	return true
}

// unpend counts one request of ss answered, and resumes reading its socket
// if max_client_requests had paused it. Safe from any goroutine.
func (s *Server) unpend(ss *session) {
	if ss.pending.Add(-1) < int32(s.cfg.Server.MaxClientRequests) && ss.conn.Paused() {
		ss.conn.ResumeReading()
	}
}

// startSweeper refreshes the clock and runs sweepClients on the loop every
// clientSweepPeriod until stop is closed, and sets the runtime's memory limit.
func (s *Server) startSweeper() {
	debug.SetMemoryLimit(s.cfg.Server.MaxMemoryBytes)
	s.sweepStop, s.sweepDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.sweepDone)
		t := time.NewTicker(clientSweepPeriod)
		defer t.Stop()
		var returned, cacheSwept time.Time
		var dropped int64 // connection buffers let go of since memory was last returned
		for {
			select {
			case <-s.sweepStop:
				return
			case <-t.C:
				s.loop.Post(s.sweepClients)
				if s.cache != nil && time.Since(cacheSwept) >= cacheSweepEvery {
					s.cache.Sweep() // expired results, and tables no result reads any more
					cacheSwept = time.Now()
				}
				dropped += s.loop.TakeDropped()
				if time.Since(returned) >= returnMemoryEvery && (dropped > returnMemoryAt || heapFreeBytes() > returnMemoryAt) &&
					s.freeing.CompareAndSwap(false, true) {
					// Clients' buffers let go of are garbage the runtime
					// collects only when something allocates again, and
					// memory it frees it returns to the system slowly.
					debug.FreeOSMemory()
					s.freeing.Store(false)
					returned, dropped = time.Now(), 0
				}
			}
		}
	}()
}

// heapBytes returns the memory the Go runtime holds for objects and buffers
// (including garbage not collected yet).
func heapBytes() int64 { return readMetric("/memory/classes/heap/objects:bytes") }

// heapFreeBytes returns the heap memory that is free but not returned to the
// system: part of RSS, of use to no one.
func heapFreeBytes() int64 { return readMetric("/memory/classes/heap/free:bytes") }

func readMetric(name string) int64 {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// notePartial counts what a connection's partial frame has grown to, and
// checks the memory budget after every inputCheckEvery bytes taken in this
// way. Loop goroutine.
func (s *Server) notePartial(ss *session, held int) {
	if held <= ss.partialHeld {
		return
	}
	s.inputGrowth += int64(held - ss.partialHeld)
	ss.partialHeld = held
	if s.inputGrowth < inputCheckEvery {
		return
	}
	s.inputGrowth = 0
	if heap := heapBytes(); heap > s.cfg.Server.MaxMemoryBytes {
		s.shedMemory(heap)
	}
}

// noteOutputLimit counts a client closed for not reading its replies and
// logs the count, at most once a second. Safe from any goroutine.
func (s *Server) noteOutputLimit() {
	s.outputClosed.Add(1)
	s.logOutputClosed()
}

// logOutputClosed logs the clients closed for max_client_output_bytes since
// the last line, if a second has passed since it. Safe from any goroutine.
func (s *Server) logOutputClosed() {
	now := time.Now().UnixNano()
	last := s.outputLogged.Load()
	if now-last < int64(time.Second) || s.outputClosed.Load() == 0 || !s.outputLogged.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("client connections closed: they do not read their replies", "limit", "server.max_client_output_bytes",
		"value", s.cfg.Server.MaxClientOutputBytes, "closed", s.outputClosed.Swap(0))
}

// sweepClients closes the connections past a time bound, and, when the heap
// is over max_memory_bytes, the ones holding the most until it would be back
// under. Loop goroutine.
func (s *Server) sweepClients() {
	s.clock = time.Now().UnixNano()
	now := s.clock
	sc := s.cfg.Server
	frameTimeout := int64(sc.ClientFrameTimeout)
	idle := int64(sc.ClientIdleTimeout)
	for ss := range s.sessions {
		switch {
		case ss.tcp && !ss.authed && now-ss.opened > int64(preAuthTimeout):
			s.closeClient(ss, tether.CodeUnauthorized, "no hello within %s; closing connection", preAuthTimeout)
		case ss.partialSince != 0 && now-ss.partialSince > frameTimeout:
			s.closeClient(ss, tether.CodeBadFrame, "a frame begun %s ago is not finished (server.client_frame_timeout = %s); closing connection",
				time.Duration(now-ss.partialSince).Round(time.Second), sc.ClientFrameTimeout)
		case idle > 0 && now-ss.lastActive > idle && ss.pending.Load() == 0 && ss.openTxs() == 0:
			s.closeClient(ss, tether.CodeUnavailable, "idle longer than server.client_idle_timeout (%s); closing connection", sc.ClientIdleTimeout)
		}
	}
	if s.rejected > 0 && now-s.rejectLogged > int64(time.Minute) {
		s.log.Warn("client connections refused", "limit", "server.max_client_conns", "value", sc.MaxClientConns, "refused", s.rejected)
		s.rejected, s.rejectLogged = 0, now
	}
	if heap := heapBytes(); heap > sc.MaxMemoryBytes {
		s.shedMemory(heap)
	}
	s.logOutputClosed() // the closes of the last second, had none followed

}

// closeClient answers ss an error (id 0: no request of its) and closes it.
func (s *Server) closeClient(ss *session, code tether.Code, format string, args ...any) {
	e := &tether.Error{Code: code, Message: fmt.Sprintf(format, args...)}
	s.log.Info("closing client connection", "why", e.Message)
	s.replyErrorNow(ss, 0, e)
	ss.conn.Close()
	delete(s.sessions, ss) // OnClose comes when the loop has closed it
	s.clients.Store(int64(len(s.sessions)))
}

// shedMemory closes the client connections holding the most (partial
// frames, replies they do not read) until the heap would be back under
// max_memory_bytes: they are what one client can make tetherd hold.
func (s *Server) shedMemory(heap int64) {
	if s.freeing.Load() {
		// What the last shed let go of is being collected: the heap figure
		// still counts it, and closing more now would close too many.
		return
	}
	limit := s.cfg.Server.MaxMemoryBytes
	type holder struct {
		ss *session
		n  int
	}
	var hs []holder
	for ss := range s.sessions {
		if n := ss.conn.Buffered(); n > 64<<10 {
			hs = append(hs, holder{ss, n})
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].n > hs[j].n })
	target := int64(float64(limit) * memorySlack)
	shed := false
	for _, h := range hs {
		if heap <= target {
			break
		}
		s.log.Warn("memory budget exceeded: closing the client connection holding the most",
			"limit", "server.max_memory_bytes", "value", limit, "heap", heap, "held", h.n)
		s.closeClient(h.ss, tether.CodeUnavailable, "tetherd is over its memory budget (server.max_memory_bytes = %d) and this connection holds %d bytes; closing connection", limit, h.n)
		h.ss.conn.DropBuffers() // garbage now, not once the loop has seen the close
		heap -= int64(h.n)
		shed = true
	}
	if shed && s.freeing.CompareAndSwap(false, true) {
		// Collect it, and give it back to the system, now.
		go func() {
			debug.FreeOSMemory()
			s.freeing.Store(false)
		}()
	}
}

var _ evloop.AcceptErrorHandler = (*Server)(nil)
