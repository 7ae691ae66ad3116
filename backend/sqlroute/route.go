package sqlroute

import (
	"errors"
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
)

// clientRoute is the router's state of one client (sqlpool.Client.Route):
// what a replica must have applied before it may serve the client's reads.
type clientRoute struct {
	// writing counts the client's requests on the primary not answered yet:
	// its reads go to the primary meanwhile.
	writing int
	// want is a position a replica must cover to serve the client's reads
	// ("" none): the merge of its answered writes' reported positions, the
	// primary's probed ones (probeAfter) and tokens (After).
	want string
	// wantSince is when the client was first pinned by want; a pin no
	// replica within max_replica_lag has covered by pinLimit is a position
	// no replica will reach (a forged token, another cluster's): it lapses.
	wantSince time.Time
	// probeAfter, when not zero, is when a request of the client was
	// answered on the primary without a position: want also needs the
	// primary's position from a probe that started after it.
	probeAfter time.Time
	// answered counts the client's requests answered on the primary (for
	// Position: a position asked before one of them was answered does not
	// cover it).
	answered uint64
}

func (cr *clientRoute) pinned() bool {
	return cr.writing > 0 || cr.want != "" || !cr.probeAfter.IsZero()
}

// waiter is a request waiting for a host that takes writes.
type waiter struct {
	req   *sqlpool.Request
	since time.Time // when it first waited (primary_wait counts from here)
	// refusedBy, when set, is the host that refused the request as
	// read-only at refusedAt, with refusedErr: a probe of it made after that
	// tells whether it is (then the request goes to the next primary) or
	// the refusal was the client's own doing (a read-only session: it is
	// answered refusedErr).
	refusedBy  *host
	refusedAt  time.Time
	refusedErr error
}

// Submit routes req to a host's pool. Loop goroutine.
func (r *Router) Submit(req *sqlpool.Request) {
	if req.Tx != nil && req.Tx.Pool != nil {
		switch {
		case req.Kind == sqlpool.KindCommit && req.Client != nil:
			// The transaction's writes: the client's reads after its commit
			// wait for a replica that has them.
			route(req.Client).writing++
			req.State.Intercept = r.onCommit
		case req.Kind != sqlpool.KindRollback && r.cfg.TxReadOnlyRefusal != nil:
			req.State.Intercept = r.onTx
		}
		req.Tx.Pool.Submit(req)
		return
	}
	statement := req.Tx == nil && (req.Kind == sqlpool.KindQuery || req.Kind == sqlpool.KindExec)
	if !statement {
		r.toPrimary(req) // a begin
		return
	}
	if req.Primary {
		// Asked for the primary: the client's later reads stay where they
		// see at least what this one saw.
		req.Tracked = true
		r.toPrimary(req)
		return
	}
	info := r.an.Analyze(r.cfg.Dialect, req.SQL)
	if info.ReplicaSafe {
		if h := r.replicaFor(req); h != nil {
			h.reads.Add(1)
			req.State.Intercept = r.onReplica
			h.Pool.Submit(req)
			return
		}
		if len(r.replicas) == 0 && r.cfg.RefuseReadsWithoutReplica && !r.pinned(req) {
			r.answer(req, &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable,
				Message: fmt.Sprintf("%s: no replica takes reads now (reads_without_replica = \"refuse\"; %s)", r.label, r.describeAll())})
			return
		}
	}
	// Only what may change data starts the client's wait for a replica that
	// has it: a SET (every framework's connect) or a locking read does not.
	req.Tracked = info.MayWrite()
	r.toPrimary(req)
}

// toPrimary sends req to the primary, or makes it wait for one. A tracked
// request (req.Tracked) holds its client's reads on the primary until a
// replica has what it did.
func (r *Router) toPrimary(req *sqlpool.Request) {
	if req.State.Finished {
		return // abandoned while it was being moved
	}
	p := r.primary.Load()
	if p == nil || !p.downAt.IsZero() {
		r.wait(waiter{req: req, since: time.Now()})
		return
	}
	p.writes.Add(1)
	if req.Tx == nil {
		if cl := req.Client; cl != nil && req.Tracked {
			route(cl).writing++
		}
		req.State.Intercept = r.onPrimary
	}
	p.Pool.Submit(req)
}

// pinned reports whether req's client's reads are held for read-your-writes.
func (r *Router) pinned(req *sqlpool.Request) bool {
	if req.Client == nil {
		return false
	}
	cr, _ := req.Client.Route.(*clientRoute)
	return cr != nil && cr.pinned()
}

func route(cl *sqlpool.Client) *clientRoute {
	cr, _ := cl.Route.(*clientRoute)
	if cr == nil {
		cr = &clientRoute{}
		cl.Route = cr
	}
	return cr
}

// replicaFor returns the replica a replica-safe read may run on, or nil for
// the primary.
func (r *Router) replicaFor(req *sqlpool.Request) *host {
	if len(r.replicas) == 0 {
		return nil
	}
	if cl := req.Client; cl != nil {
		if cr, _ := cl.Route.(*clientRoute); cr != nil && cr.pinned() {
			if h, decided := r.causalReplica(cr); decided {
				return h
			}
		}
	}
	h := r.replicas[r.next%len(r.replicas)]
	r.next++
	return h
}

// causalReplica decides for a pinned client: a replica that has what it
// wants, or nil for the primary; decided false when the pin is over (the
// caller picks any replica).
func (r *Router) causalReplica(cr *clientRoute) (h *host, decided bool) {
	if cr.writing > 0 {
		r.causalToPrimary.Add(1)
		return nil, true
	}
	if !cr.probeAfter.IsZero() {
		p := r.primary.Load()
		if p == nil || !p.status.Reachable() || !p.status.CheckedAt.After(cr.probeAfter) || p.status.Position == "" {
			r.causalToPrimary.Add(1)
			return nil, true // no probe of the primary since the request was answered
		}
		r.require(cr, p.status.Position)
		cr.probeAfter = time.Time{}
	}
	if cr.want == "" {
		return nil, false
	}
	if r.cfg.Covers != nil {
		for i := range r.replicas {
			h := r.replicas[(r.next+i)%len(r.replicas)]
			if r.cfg.Covers(h.status.Position, cr.want) {
				r.next += i + 1
				cr.want, cr.wantSince = "", time.Time{}
				r.causalToReplica.Add(1)
				return h, true
			}
		}
	}
	if time.Since(cr.wantSince) > r.pinLimit() {
		// Every replica that takes reads is within max_replica_lag, and none
		// has reached this position in twice that: it is not one of this
		// primary's (a forged or foreign token). The pin lapses rather than
		// hold the client on the primary for good.
		r.log.Warn("a client's read-your-writes position was not reached by any replica in time; it lapses",
			"backend", r.label, "position", cr.want, "pinned_for", time.Since(cr.wantSince).Round(time.Millisecond))
		cr.want, cr.wantSince = "", time.Time{}
		return nil, false
	}
	r.causalToPrimary.Add(1)
	return nil, true
}

// pinLimit is how long a position may hold a client's reads on the primary.
func (r *Router) pinLimit() time.Duration {
	lag := r.cfg.MaxReplicaLag
	if lag <= 0 {
		lag = 15 * time.Second
	}
	return 2*lag + 4*r.cfg.Interval
}

// require adds pos to what cr's reads need.
func (r *Router) require(cr *clientRoute, pos string) {
	switch {
	case cr.want == "":
		cr.want = pos
	case r.cfg.Merge != nil:
		cr.want = r.cfg.Merge(cr.want, pos)
	default:
		cr.want = pos
	}
	if cr.wantSince.IsZero() {
		cr.wantSince = time.Now()
	}
}

// noteAnswered records that a request of cl ran on the primary: its reads
// now need a replica that has what it did.
func (r *Router) noteAnswered(cl *sqlpool.Client, rep *sqlpool.Report) {
	cr := route(cl)
	cr.writing--
	cr.answered++
	if rep != nil && rep.Position != "" {
		// The write's own position (MariaDB's last_gtid).
		r.require(cr, rep.Position)
		return
	}
	cr.probeAfter = time.Now()
	if cr.wantSince.IsZero() {
		cr.wantSince = cr.probeAfter
	}
}

// primaryAnswered is the Intercept of a request sent to the primary outside
// a transaction. A request the host refused as read-only did not run: it
// waits for a probe of that host made after the refusal (hosts.go,
// routeWaiting), once.
func (r *Router) primaryAnswered(req *sqlpool.Request) bool {
	if r.cfg.PrimaryWait > 0 && r.retryable(req, connectFailed) {
		// The primary could not be reached: the statement did not run. It
		// waits for a host that takes writes (a promotion) or for a probe
		// that reaches this one again, as when none takes writes, instead
		// of failing the page.
		if cl := req.Client; cl != nil && req.Tracked {
			route(cl).writing--
		}
		if h := r.hostOf(req.State.Pool); h != nil && h.downAt.IsZero() {
			h.downAt = time.Now()
			r.log.Warn("the primary cannot be reached; what needs it waits for it or a new primary", "backend", r.label,
				"host", h.Addr, "primary_wait", r.cfg.PrimaryWait, "err", req.Err)
		}
		r.takeBack(req)
		r.wait(waiter{req: req, since: time.Now()})
		return true
	}
	if r.retryable(req, r.cfg.ReadOnlyRefusal) {
		if cl := req.Client; cl != nil && req.Tracked {
			route(cl).writing--
		}
		h := r.hostOf(req.State.Pool)
		err := req.Err
		r.takeBack(req)
		now := time.Now()
		if r.definitiveRefusal(h, err) {
			r.wait(waiter{req: req, since: now})
			return true
		}
		r.log.Info("a request was refused as read-only; it waits for a probe of the host", "backend", r.label,
			"host", addrOf(h), "err", err)
		r.wait(waiter{req: req, since: now, refusedBy: h, refusedAt: now, refusedErr: err})
		return true
	}
	if cl := req.Client; cl != nil && req.Tracked {
		r.noteAnswered(cl, req.Report)
	}
	return false
}

// txAnswered is the Intercept of a statement of a transaction: one its host
// refused because the server turned read-only under the transaction (a
// switchover) did not run, but the transaction cannot go on there: it is
// answered tx_aborted, retryable (roll back and run the transaction again:
// it will run on the next primary).
func (r *Router) txAnswered(req *sqlpool.Request) bool {
	if req.Err == nil || req.State.Abandoned || !r.definitiveRefusal(r.hostOf(req.Tx.Pool), req.Err) {
		return false
	}
	code := ""
	var te *tether.Error
	if errors.As(req.Err, &te) {
		code = te.BackendCode
	}
	req.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, BackendCode: code, Err: req.Err,
		Message: fmt.Sprintf("%s: %s turned read-only under the transaction (a failover): the statement did not run; "+
			"roll the transaction back and run it again: it will run on the next primary", r.label, addrOf(r.hostOf(req.Tx.Pool)))}
	return false
}

// definitiveRefusal reports whether err is h saying the server itself is
// read-only (Config.TxReadOnlyRefusal); if so h is demoted now: no write
// goes to it again until a probe made after this says it takes writes.
func (r *Router) definitiveRefusal(h *host, err error) bool {
	if h == nil || r.cfg.TxReadOnlyRefusal == nil || !r.cfg.TxReadOnlyRefusal(err) {
		return false
	}
	h.demotedAt = time.Now()
	if r.primary.Load() == h {
		r.setPrimary(nil, fmt.Sprintf("%s refused a statement as a read-only server: %v", h.Addr, err))
	}
	return true
}

// connectFailed reports whether err is a pool failing to connect (or
// closing): unavailable and retryable, so the request did not run.
func connectFailed(err error) bool {
	var te *tether.Error
	return errors.As(err, &te) && te.Code == tether.CodeUnavailable && te.Retry
}

// commitAnswered is the Intercept of a commit: as a write's; and a commit
// refused because the server turned read-only under the transaction is
// answered as txAnswered answers a statement.
func (r *Router) commitAnswered(req *sqlpool.Request) bool {
	r.noteAnswered(req.Client, req.Report)
	if r.cfg.TxReadOnlyRefusal != nil {
		return r.txAnswered(req)
	}
	return false
}

// replicaAnswered is the Intercept of a read sent to a replica: one the
// replica refused as a replica (it did not run) runs again on the primary.
func (r *Router) replicaAnswered(req *sqlpool.Request) bool {
	if !r.retryable(req, r.cfg.ReplicaRefusal) {
		return false
	}
	r.takeBack(req)
	// Not from inside the replica pool's answer: on the loop's next turn.
	if r.loop.Post(func() { r.toPrimary(req) }) != nil {
		req.Err = r.closedErr()
		return false
	}
	return true
}

// retryable reports whether req was refused (as refused tells) before it ran,
// may run again elsewhere (its rows sink can forget what it was given), and
// has not been taken back before.
func (r *Router) retryable(req *sqlpool.Request, refused func(error) bool) bool {
	if req.Err == nil || req.State.Abandoned || refused == nil || !refused(req.Err) || req.Rerouted > 0 {
		return false
	}
	if req.Sink == nil {
		return true
	}
	_, ok := req.Sink.(sqlpool.Rewinder)
	return ok
}

// takeBack makes a request that was refused without running as new, to be
// routed again.
func (r *Router) takeBack(req *sqlpool.Request) {
	if rw, ok := req.Sink.(sqlpool.Rewinder); ok {
		rw.Rewind()
	}
	req.Err, req.Affected, req.InsertID, req.NewTx, req.Report = nil, 0, 0, nil, nil
	req.State = sqlpool.State{}
	req.Rerouted++
}

// wait keeps w until a host takes writes (update), at most PrimaryWait;
// answered at once without a wait, past maxWaiting, or while closing.
func (r *Router) wait(w waiter) {
	switch {
	case r.closing:
		r.answer(w.req, r.closedErr())
	case w.refusedBy == nil && (r.cfg.PrimaryWait <= 0 || len(r.waiting) >= maxWaiting):
		r.answer(w.req, r.noPrimaryErr())
	case w.refusedBy != nil && len(r.waiting) >= maxWaiting:
		r.answer(w.req, w.refusedErr)
	default:
		if w.refusedBy == nil {
			r.primaryWaits.Add(1)
		}
		r.waiting = append(r.waiting, w)
	}
}

// routeWaiting sends what waits to the primary, if there is one now,
// answers a refusal its host's later probe shows was the client's own, and
// what waited longer than PrimaryWait or its deadline. Loop goroutine.
func (r *Router) routeWaiting(now time.Time) {
	if len(r.waiting) == 0 {
		return
	}
	kept := r.waiting[:0]
	var later []waiter // to route after the list is rebuilt (toPrimary may append to it)
	p := r.primary.Load()
	usable := p != nil && p.downAt.IsZero()
	for _, w := range r.waiting {
		req := w.req
		if req.State.Finished {
			continue // abandoned meanwhile
		}
		if h := w.refusedBy; h != nil {
			switch {
			case !h.status.CheckedAt.After(w.refusedAt):
				// No probe of the host since the refusal: wait for one (but
				// not past the request's deadline).
				if !req.Deadline.IsZero() && !now.Before(req.Deadline) {
					r.answer(req, w.refusedErr)
					continue
				}
				kept = append(kept, w)
				continue
			case p == h:
				// It still takes writes: the refusal was the session's own
				// (a read-only transaction the client set).
				r.answer(req, w.refusedErr)
				continue
			}
			w.refusedBy, w.since = nil, now
			if !usable {
				r.primaryWaits.Add(1)
			}
		}
		switch {
		case usable:
			later = append(later, w)
		case now.Sub(w.since) >= r.cfg.PrimaryWait:
			r.primaryWaitTimeouts.Add(1)
			r.answer(req, r.noPrimaryErr())
		case !req.Deadline.IsZero() && !now.Before(req.Deadline):
			r.primaryWaitTimeouts.Add(1)
			r.answer(req, &tether.Error{Code: tether.CodeTimeout, Retry: true,
				Message: fmt.Sprintf("%s: the request's deadline passed while it waited for a host that takes writes (not sent)", r.label)})
		default:
			kept = append(kept, w)
		}
	}
	clear(r.waiting[len(kept):])
	r.waiting = kept
	for _, w := range later {
		r.toPrimary(w.req)
	}
}

// failWaiting answers everything waiting with err.
func (r *Router) failWaiting(err error) {
	for _, w := range r.waiting {
		r.answer(w.req, err)
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
	for _, w := range r.waiting {
		if w.req.Client == c && !w.req.State.Finished {
			w.req.State.Abandoned = true
			r.answer(w.req, err)
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

// Position calls done with a position covering every write of cl answered
// so far: what its writes reported, or the primary's position asked now
// (Config.PositionSQL), or "" when cl is not pinned. Loop goroutine
// (sqlpool.Causal).
func (r *Router) Position(cl *sqlpool.Client, done func(string, error)) {
	cr, _ := cl.Route.(*clientRoute)
	switch {
	case cr == nil || !cr.pinned():
		done("", nil)
		return
	case cr.writing == 0 && cr.probeAfter.IsZero():
		done(cr.want, nil)
		return
	}
	p := r.primary.Load()
	if p == nil || r.cfg.PositionSQL == "" {
		done("", r.noPrimaryErr())
		return
	}
	answered := cr.answered
	rb := tether.NewResultBuilder(1 << 10)
	req := &sqlpool.Request{Kind: sqlpool.KindQuery, SQL: r.cfg.PositionSQL, Sink: rb, Deadline: time.Now().Add(r.cfg.Interval + probeTimeout)}
	req.Done = func(q *sqlpool.Request) {
		if q.Err != nil {
			done("", q.Err)
			return
		}
		res := rb.Result()
		if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
			done("", fmt.Errorf("%s: %s answered %d rows", r.label, r.cfg.PositionSQL, len(res.Rows)))
			return
		}
		pos := fmt.Sprint(res.Rows[0][0])
		if b, ok := res.Rows[0][0].([]byte); ok {
			pos = string(b)
		}
		if cr.want != "" && r.cfg.Merge != nil {
			pos = r.cfg.Merge(cr.want, pos)
		}
		// The client's own reads may use it only if nothing of it was
		// answered since the question was asked (a write answered after it
		// may be past pos).
		if cr.answered == answered && cr.writing == 0 && !cr.probeAfter.IsZero() {
			r.require(cr, pos)
			cr.probeAfter = time.Time{}
		}
		done(pos, nil)
	}
	p.Pool.Submit(req)
}

// After makes cl's reads wait for a replica that covers pos. Loop goroutine
// (sqlpool.Causal).
func (r *Router) After(cl *sqlpool.Client, pos string) error {
	if pos == "" {
		return nil
	}
	if r.cfg.ValidPosition != nil && !r.cfg.ValidPosition(pos) {
		return tether.Errorf(tether.CodeBadRequest, "%s: %q is not a position of this backend", r.label, pos)
	}
	r.require(route(cl), pos)
	return nil
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
