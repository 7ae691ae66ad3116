package tether

import (
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"time"

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
//     which the connections holding the most are closed;
//   - time: client_idle_timeout, if set; a TCP client must send its hello
//     within preAuthTimeout.
//
// The sweep runs every clientSweepPeriod on the loop goroutine; the times it
// compares are its own coarse clock (Server.clock), read on the hot path for
// free.

const (
	clientSweepPeriod = 250 * time.Millisecond
	preAuthTimeout    = 10 * time.Second
	// memorySlack is kept below max_memory_bytes when closing connections
	// to get back under it.
	memorySlack = 0.9
)

// onOpenLimits counts a new connection, refusing it past max_client_conns;
// it reports whether the connection may stay.
func (s *Server) onOpenLimits(ss *session) bool {
	ss.opened, ss.lastActive = s.clock, s.clock
	if len(s.sessions) >= s.cfg.Server.MaxClientConns {
		s.rejected++
		s.replyErrorNow(ss, 0, &Error{Code: CodeUnavailable, Retry: true,
			Message: fmt.Sprintf("too many client connections (server.max_client_conns = %d)", s.cfg.Server.MaxClientConns)})
		ss.conn.Close()
		return false
	}
	s.sessions[ss] = struct{}{}
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
		for {
			select {
			case <-s.sweepStop:
				return
			case <-t.C:
				heap := heapBytes()
				s.loop.Post(func() { s.sweepClients(heap) })
			}
		}
	}()
}

// heapBytes returns the memory the Go runtime holds for objects and buffers.
func heapBytes() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// sweepClients closes the connections past a time bound, and, when the heap
// is over max_memory_bytes, the ones holding the most until it would be back
// under. Loop goroutine.
func (s *Server) sweepClients(heap int64) {
	s.clock = time.Now().UnixNano()
	now := s.clock
	sc := s.cfg.Server
	frameTimeout := int64(sc.ClientFrameTimeout)
	idle := int64(sc.ClientIdleTimeout)
	for ss := range s.sessions {
		switch {
		case ss.tcp && !ss.authed && now-ss.opened > int64(preAuthTimeout):
			s.closeClient(ss, CodeUnauthorized, "no hello within %s; closing connection", preAuthTimeout)
		case ss.partialSince != 0 && now-ss.partialSince > frameTimeout:
			s.closeClient(ss, CodeBadFrame, "a frame begun %s ago is not finished (server.client_frame_timeout = %s); closing connection",
				time.Duration(now-ss.partialSince).Round(time.Second), sc.ClientFrameTimeout)
		case idle > 0 && now-ss.lastActive > idle && ss.pending.Load() == 0 && ss.openTxs() == 0:
			s.closeClient(ss, CodeUnavailable, "idle longer than server.client_idle_timeout (%s); closing connection", sc.ClientIdleTimeout)
		}
	}
	if s.rejected > 0 && now-s.rejectLogged > int64(time.Minute) {
		s.log.Warn("client connections refused", "limit", "server.max_client_conns", "value", sc.MaxClientConns, "refused", s.rejected)
		s.rejected, s.rejectLogged = 0, now
	}
	if heap > sc.MaxMemoryBytes {
		s.shedMemory(heap)
	}
}

// closeClient answers ss an error (id 0: no request of its) and closes it.
func (s *Server) closeClient(ss *session, code Code, format string, args ...any) {
	e := &Error{Code: code, Message: fmt.Sprintf(format, args...)}
	s.log.Info("closing client connection", "why", e.Message)
	s.replyErrorNow(ss, 0, e)
	ss.conn.Close()
	delete(s.sessions, ss) // OnClose comes when the loop has closed it
}

// shedMemory closes the client connections holding the most (partial
// frames, replies they do not read) until the heap would be back under
// max_memory_bytes: they are what one client can make tetherd hold.
func (s *Server) shedMemory(heap int64) {
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
	for _, h := range hs {
		if heap <= target {
			break
		}
		s.log.Warn("memory budget exceeded: closing the client connection holding the most",
			"limit", "server.max_memory_bytes", "value", limit, "heap", heap, "held", h.n)
		s.closeClient(h.ss, CodeUnavailable, "tetherd is over its memory budget (server.max_memory_bytes = %d) and this connection holds %d bytes; closing connection", limit, h.n)
		heap -= int64(h.n)
	}
}

var _ evloop.AcceptErrorHandler = (*Server)(nil)
