package sqlroute

import (
	"errors"
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
)

// Submit routes req to a host's pool. Loop goroutine.
func (r *Router) Submit(req *sqlpool.Request) {
	if req.Tx != nil && req.Tx.Pool != nil {
		req.State.Intercept = r.onTx
		req.Tx.Pool.Submit(req)
		return
	}
	if req.Tx == nil && (req.Kind == sqlpool.KindQuery || req.Kind == sqlpool.KindExec) {
		if h := r.replicaFor(req); h != nil {
			h.reads.Add(1)
			req.State.Intercept = r.onReplica
			h.Pool.Submit(req)
			return
		}
	}
	r.toPrimary(req)
}

// toPrimary sends req to the primary, or makes it wait for one.
func (r *Router) toPrimary(req *sqlpool.Request) {
	if req.State.Finished {
		return // abandoned while it was being moved
	}
	p := r.primary.Load()
	if p == nil || !p.downAt.IsZero() {
		r.waitForPrimary(req)
		return
	}
	p.writes.Add(1)
	if req.Tx == nil {
		if cl := req.Client; cl != nil {
			route(cl).writing++
		}
		req.State.Intercept = r.onPrimary
	}
	p.Pool.Submit(req)
}

func route(cl *sqlpool.Client) *clientRoute {
	cr, _ := cl.Route.(*clientRoute)
	if cr == nil {
		cr = &clientRoute{}
		cl.Route = cr
	}
	return cr
}

// replicaFor returns the replica req may run on, or nil for the primary.
func (r *Router) replicaFor(req *sqlpool.Request) *host {
	if len(r.replicas) == 0 {
		return nil
	}
	if !r.an.Analyze(r.cfg.Dialect, req.SQL).ReplicaSafe {
		return nil
	}
	if cl := req.Client; cl != nil {
		if cr, _ := cl.Route.(*clientRoute); cr != nil && (cr.writing > 0 || !cr.wroteAt.IsZero()) {
			return r.causalReplica(cr)
		}
	}
	h := r.replicas[r.next%len(r.replicas)]
	r.next++
	return h
}

// causalReplica returns a replica that has the client's last write, or nil
// (the primary).
func (r *Router) causalReplica(cr *clientRoute) *host {
	if cr.writing == 0 && cr.want == "" {
		p := r.primary.Load()
		if p != nil && p.status.Reachable() && p.status.CheckedAt.After(cr.wroteAt) && p.status.Position != "" {
			cr.want = p.status.Position
		}
	}
	if cr.writing == 0 && cr.want != "" && r.cfg.Covers != nil {
		for i := range r.replicas {
			h := r.replicas[(r.next+i)%len(r.replicas)]
			if r.cfg.Covers(h.status.Position, cr.want) {
				r.next += i + 1
				cr.wroteAt, cr.want = time.Time{}, ""
				r.causalToReplica.Add(1)
				return h
			}
		}
	}
	r.causalToPrimary.Add(1)
	return nil
}

// primaryAnswered is the Intercept of a request sent to the primary outside
// a transaction: the client's write is answered (its reads now wait for a
// replica that has it), or the host refused it as read-only, when it waits
// for the next primary instead.
func (r *Router) primaryAnswered(req *sqlpool.Request) bool {
	if cl := req.Client; cl != nil {
		cr := route(cl)
		cr.writing--
		cr.wroteAt, cr.want = time.Now(), ""
	}
	if req.Err == nil || req.State.Abandoned {
		return false
	}
	if r.cfg.PrimaryWait > 0 && connectFailed(req.Err) {
		// The primary could not be reached: the statement did not run. It
		// waits for a host that takes writes (a promotion) or for a probe
		// that reaches this one again, as when none takes writes, instead
		// of failing the page.
		if h := r.hostOf(req.State.Pool); h != nil && h.downAt.IsZero() {
			h.downAt = time.Now()
			r.log.Warn("the primary cannot be reached; what needs it waits for it or a new primary", "backend", r.label,
				"host", h.Addr, "primary_wait", r.cfg.PrimaryWait, "err", req.Err)
		}
		resetOutcome(req)
		r.waitForPrimary(req)
		return true
	}
	if r.cfg.ReadOnlyRefusal == nil || !r.cfg.ReadOnlyRefusal(req.Err) {
		return false
	}
	// The host says it is read-only: it did not run the statement, and gets
	// no more writes until a probe made after this says it takes them.
	h := r.hostOf(req.State.Pool)
	if h != nil {
		h.demotedAt = time.Now()
		if r.primary.Load() == h {
			r.setPrimary(nil, fmt.Sprintf("%s refused a write as read-only: %v", h.Addr, req.Err))
		}
	}
	r.log.Warn("a write was refused as read-only; it waits for a host that takes writes", "backend", r.label,
		"host", addrOf(h), "err", req.Err)
	resetOutcome(req)
	r.waitForPrimary(req)
	return true
}

// txAnswered is the Intercept of a statement of a transaction: one its host
// refused as read-only (the host was demoted under the open transaction)
// did not run, but the transaction cannot go on there: it is answered
// tx_aborted, retryable (roll back and run the transaction again, on the
// next primary), and the host gets no more writes until a later probe says
// it takes them.
func (r *Router) txAnswered(req *sqlpool.Request) bool {
	if req.Err == nil || req.State.Abandoned || req.Kind == sqlpool.KindRollback || r.cfg.ReadOnlyRefusal == nil ||
		!r.cfg.ReadOnlyRefusal(req.Err) {
		return false
	}
	h := r.hostOf(req.Tx.Pool)
	if h != nil {
		h.demotedAt = time.Now()
		if r.primary.Load() == h {
			r.setPrimary(nil, fmt.Sprintf("%s refused a write as read-only: %v", h.Addr, req.Err))
		}
	}
	code := ""
	var te *tether.Error
	if errors.As(req.Err, &te) {
		code = te.BackendCode
	}
	req.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, BackendCode: code, Err: req.Err,
		Message: fmt.Sprintf("%s: %s turned read-only under the transaction (a failover): the statement did not run; "+
			"roll the transaction back and run it again: it will run on the next primary", r.label, addrOf(h))}
	return false
}

// connectFailed reports whether err is a pool failing to connect (or
// closing): unavailable and retryable, so the request did not run.
func connectFailed(err error) bool {
	var te *tether.Error
	return errors.As(err, &te) && te.Code == tether.CodeUnavailable && te.Retry
}

// replicaAnswered is the Intercept of a read sent to a replica: one the
// replica refused as a replica runs again on the primary.
func (r *Router) replicaAnswered(req *sqlpool.Request) bool {
	if req.Err == nil || req.State.Abandoned || r.cfg.ReplicaRefusal == nil || !r.cfg.ReplicaRefusal(req.Err) {
		return false
	}
	resetOutcome(req)
	// Not from inside the replica pool's answer: on the loop's next turn.
	if r.loop.Post(func() { r.toPrimary(req) }) != nil {
		req.Err = r.closedErr()
		return false
	}
	return true
}

// resetOutcome makes a request that was refused without running as new.
func resetOutcome(req *sqlpool.Request) {
	req.Err, req.Affected, req.InsertID, req.NewTx, req.Report = nil, 0, 0, nil, nil
	req.State = sqlpool.State{}
}

// waitForPrimary keeps req until a host takes writes (update), at most
// PrimaryWait; answered unavailable at once without a wait or past
// maxWaiting.
func (r *Router) waitForPrimary(req *sqlpool.Request) {
	select {
	case <-r.stop:
		// Closing: nothing will route it (Close answered what waited).
		r.answer(req, r.closedErr())
		return
	default:
	}
	if r.cfg.PrimaryWait <= 0 || len(r.waiting) >= maxWaiting {
		r.answer(req, r.noPrimaryErr())
		return
	}
	r.primaryWaits.Add(1)
	req.State.Queued = time.Now()
	r.waiting = append(r.waiting, req)
}

// routeWaiting sends what waits to the primary, if there is one now, and
// answers what waited longer than PrimaryWait. Loop goroutine.
func (r *Router) routeWaiting(now time.Time) {
	if len(r.waiting) == 0 {
		return
	}
	kept := r.waiting[:0]
	p := r.primary.Load()
	for _, req := range r.waiting {
		switch {
		case req.State.Finished: // abandoned meanwhile
		case p != nil && p.downAt.IsZero():
			req.State.Queued = time.Time{}
			r.toPrimary(req)
		case now.Sub(req.State.Queued) >= r.cfg.PrimaryWait:
			r.primaryWaitTimeouts.Add(1)
			r.answer(req, r.noPrimaryErr())
		default:
			kept = append(kept, req)
		}
	}
	clear(r.waiting[len(kept):])
	r.waiting = kept
}

// failWaiting answers everything waiting for a primary with err.
func (r *Router) failWaiting(err error) {
	for _, req := range r.waiting {
		r.answer(req, err)
	}
	clear(r.waiting)
	r.waiting = r.waiting[:0]
}

// answer answers a request no pool holds.
func (r *Router) answer(req *sqlpool.Request, err error) {
	if req.State.Finished {
		return
	}
	req.State.Finished = true
	req.Err = err
	req.Done(req)
}

func (r *Router) noPrimaryErr() error {
	msg := fmt.Sprintf("%s: %v (%s)", r.label, ErrNoPrimary, r.describeAll())
	if r.cfg.PrimaryWait > 0 {
		msg = fmt.Sprintf("%s: %v for %s (%s)", r.label, ErrNoPrimary, r.cfg.PrimaryWait, r.describeAll())
	}
	return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable, Message: msg}
}

// Abandon answers req with err now: through the pool it was given to, or
// here when it waits for a primary.
func (r *Router) Abandon(req *sqlpool.Request, err error) {
	if p := req.State.Pool; p != nil {
		p.Abandon(req, err)
		return
	}
	if !req.State.Finished {
		req.State.Abandoned = true
		r.answer(req, err)
	}
}

// CancelClient gives up every request of a client that went away, on every
// host and among those waiting for a primary.
func (r *Router) CancelClient(c *sqlpool.Client, err error) {
	for _, req := range r.waiting {
		if req.Client == c && !req.State.Finished {
			req.State.Abandoned = true
			r.answer(req, err)
		}
	}
	for _, h := range r.hosts {
		h.Pool.CancelClient(c, err)
	}
}

// AbortTx rolls tx back on its host.
func (r *Router) AbortTx(tx *sqlpool.Tx, why string) {
	if tx.Pool != nil {
		tx.Pool.AbortTx(tx, why)
	}
}

func (r *Router) hostOf(p *sqlpool.Pool) *host {
	for _, h := range r.hosts {
		if h.Pool == p {
			return h
		}
	}
	return nil
}

func addrOf(h *host) string {
	if h == nil {
		return ""
	}
	return h.Addr
}
