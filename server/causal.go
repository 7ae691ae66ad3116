package server

import (
	"github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/wire"
)

// runCausal answers causal_token and causal_after (docs/protocol.md,
// "Read-your-writes across requests") on a backend that keeps them
// (sqlpool.Causal: a replicated one). On any other backend a token is
// empty and causal_after does nothing: every read there sees every write.
// Loop goroutine.
func (s *Server) runCausal(ss *session, r *wire.Request) {
	t, e := s.backendFor(r.Backend)
	if e != nil {
		s.replyErrorNow(ss, r.ID, e)
		return
	}
	h := wire.Head{ID: r.ID}
	var causal sqlpool.Causal
	if lb := t.loopBackend(); lb != nil {
		causal, _ = lb.(sqlpool.Causal)
	}
	if causal == nil {
		if r.Op == wire.OpCausalToken {
			s.replyNow(ss, func(b []byte) []byte { return wire.AppendPosition(b, h, "") })
		} else {
			s.replyNow(ss, func(b []byte) []byte { return wire.AppendOK(b, h) })
		}
		return
	}
	cl := ss.sqlClient(t.live)
	if r.Op == wire.OpCausalAfter {
		if err := causal.After(cl, r.Position); err != nil {
			s.replyErrorNow(ss, h.ID, tether.AsError(err))
			return
		}
		s.replyNow(ss, func(b []byte) []byte { return wire.AppendOK(b, h) })
		return
	}
	g := s.admit()
	ss.pending.Add(1)
	causal.Position(cl, func(pos string, err error) {
		defer s.release(g)
		s.unpend(ss)
		if err != nil {
			s.replyErrorNow(ss, h.ID, tether.AsError(err))
			return
		}
		s.replyNow(ss, func(b []byte) []byte { return wire.AppendPosition(b, h, pos) })
	})
}
