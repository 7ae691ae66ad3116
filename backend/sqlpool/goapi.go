package sqlpool

import (
	"context"
	"errors"
	"fmt"

	tether "github.com/tether-php/tether"
)

// The Go API of a pool: tether.Querier and tether.Transactor for callers on
// other goroutines (the key API, joins, tests). Each call posts a Request to
// the loop and waits for its answer, so it takes exactly the path a client's
// frame takes, on the same connections.

// Query implements tether.Querier.
func (p *Pool) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if err := p.checkPaging(s); err != nil {
		return nil, err
	}
	rb := tether.NewResultBuilder(s.MaxBytes)
	r := &Request{Kind: KindQuery, SQL: s.SQL, Params: s.Params, Sink: rb}
	if err := p.Do(ctx, r); err != nil {
		return nil, err
	}
	return rb.Result(), nil
}

// Exec implements tether.Querier.
func (p *Pool) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if err := p.checkPaging(s); err != nil {
		return nil, err
	}
	r := &Request{Kind: KindExec, SQL: s.SQL, Params: s.Params}
	if err := p.Do(ctx, r); err != nil {
		return nil, err
	}
	return &tether.Result{Affected: r.Affected, InsertID: r.InsertID}, nil
}

func (p *Pool) checkPaging(s tether.Statement) error {
	if e := tether.RefusePaging(p.name, s.PageSize, s.Cursor); e != nil {
		return e
	}
	return nil
}

// Begin implements tether.Transactor. ctx bounds only the begin: the
// transaction lasts until Commit or Rollback.
func (p *Pool) Begin(ctx context.Context) (tether.Tx, error) {
	r := &Request{Kind: KindBegin}
	if err := p.Do(ctx, r); err != nil {
		return nil, err
	}
	return &goTx{pool: p, tx: r.NewTx}, nil
}

// Do submits r on the loop and waits for its answer, or for ctx: a request
// given up on (ctx done) is answered at once and, if it is running,
// cancelled on the server. r.Done must be nil; Do sets it. When the loop has
// stopped (or stops before answering) it returns an error wrapping
// ErrPoolClosed at once; a panic while submitting r answers it internal.
func (p *Pool) Do(ctx context.Context, r *Request) error {
	if p.loop == nil {
		return p.closedErr()
	}
	done := make(chan struct{})
	r.Done = func(*Request) { close(done) }
	if d, ok := ctx.Deadline(); ok && (r.Deadline.IsZero() || d.Before(r.Deadline)) {
		r.Deadline = d
	}
	if err := p.loop.Post(func() { p.submitSafely(r) }); err != nil {
		return p.loopGoneErr()
	}
	select {
	case <-done:
	case <-p.loop.Done():
		select {
		case <-done:
		default:
			return p.loopGoneErr()
		}
	case <-ctx.Done():
		err := ctx.Err()
		if p.loop.Post(func() { p.Abandon(r, p.ctxErr(err)) }) != nil {
			return p.loopGoneErr()
		}
		select {
		case <-done:
		case <-p.loop.Done():
			select {
			case <-done:
			default:
				return p.loopGoneErr()
			}
		}
	}
	return r.Err
}

// submitSafely is Submit for a Go caller: a panic in it answers r internal
// (unless something answered it already) instead of leaving Do waiting.
func (p *Pool) submitSafely(r *Request) {
	defer func() {
		if v := recover(); v != nil {
			e := tether.RecoverPanic(p.log, p.label, r.Kind.String(), v)
			if !r.State.Finished {
				r.Err = e
				p.finish(r)
			}
		}
	}()
	p.Submit(r)
}

// loopGoneErr is the error of a Go call made after the loop stopped.
func (p *Pool) loopGoneErr() error {
	return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: ErrPoolClosed,
		Message: p.name + ": backend is closed (its event loop has stopped)"}
}

func (p *Pool) ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return p.timeoutErr(true)
	}
	return fmt.Errorf("%s: %w", p.name, err)
}

// goTx is a transaction for Go callers.
type goTx struct {
	pool *Pool
	tx   *Tx
}

func (t *goTx) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	rb := tether.NewResultBuilder(s.MaxBytes)
	r := &Request{Kind: KindQuery, SQL: s.SQL, Params: s.Params, Sink: rb, Tx: t.tx}
	if err := t.pool.Do(ctx, r); err != nil {
		return nil, err
	}
	return rb.Result(), nil
}

func (t *goTx) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	r := &Request{Kind: KindExec, SQL: s.SQL, Params: s.Params, Tx: t.tx}
	if err := t.pool.Do(ctx, r); err != nil {
		return nil, err
	}
	return &tether.Result{Affected: r.Affected, InsertID: r.InsertID}, nil
}

func (t *goTx) Commit(ctx context.Context) error {
	return t.pool.Do(ctx, &Request{Kind: KindCommit, Tx: t.tx})
}

func (t *goTx) Rollback(ctx context.Context) error {
	return t.pool.Do(ctx, &Request{Kind: KindRollback, Tx: t.tx})
}

var (
	_ tether.Backend    = (*Pool)(nil)
	_ tether.Querier    = (*Pool)(nil)
	_ tether.Transactor = (*Pool)(nil)
	_ tether.Tx         = (*goTx)(nil)
)
