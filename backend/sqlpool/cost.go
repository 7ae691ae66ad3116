package sqlpool

import (
	"context"
	"fmt"
	"time"

	tether "github.com/tether-php/tether"
)

// learnCost folds one run of sql into what its statements take here.
func (p *Pool) learnCost(sql string, d time.Duration) {
	if p.costs == nil {
		p.costs = make(map[string]time.Duration)
	}
	old, ok := p.costs[sql]
	switch {
	case ok:
		d = old - old/4 + d/4
	case len(p.costs) >= maxCosts:
		return
	}
	p.costs[sql] = d
	p.maxCost = max(p.maxCost, d)
}

// tooLate returns the error for a waiting request that cannot be answered
// before its deadline if sent now (its deadline passed, or its statement
// takes longer than is left), or nil.
func (p *Pool) tooLate(r *Request) error {
	if r.Deadline.IsZero() {
		return nil
	}
	left := time.Until(r.Deadline)
	if left <= 0 {
		return p.timeoutErr(false) // passed, and the sweep has not come by yet
	}
	if left >= p.maxCost {
		return nil
	}
	cost, known := p.costs[r.SQL]
	if !known || left >= cost {
		return nil
	}
	return &tether.Error{Code: tether.CodeTimeout, Retry: true, Err: context.DeadlineExceeded,
		Message: fmt.Sprintf("%s: deadline too near to run the statement (%s left after waiting for a connection, it takes about %s here); it was not sent",
			p.name, left.Round(time.Millisecond), cost.Round(time.Millisecond))}
}
