package sqlpool

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tether "github.com/tether-php/tether"
)

// Done is called by the ServerConn when the oldest request it was sent has
// its whole answer, with the outcome and the server's report in r.
func (c *Conn) Done(r *Request) {
	p := c.pool
	if len(c.sent) == 0 || c.sent[0] != r {
		panic(fmt.Sprintf("sqlpool: %s answered a request out of order", c.srv))
	}
	// Shift down rather than reslice, so that the slice keeps its room.
	n := copy(c.sent, c.sent[1:])
	c.sent[n] = nil
	c.sent = c.sent[:n]
	p.settle(c, r)
	if !r.State.Sent.IsZero() && r.Err == nil {
		p.learnCost(r.SQL, time.Since(r.State.Sent))
	}
	p.finish(r)
	if c.state == stateCancelling {
		if c.givenUpRuns() {
			// Another statement given up runs now: it needs a Cancel of its own.
			if c.killAgain {
				p.kill(c)
			}
			return
		}
		if c.killAgain {
			c.killing, c.killAgain = false, false // answered: the Cancel due is not needed
		}
		p.afterCancel(c)
		return
	}
	if len(c.sent) > 0 && c.sent[0].State.Abandoned {
		p.cancel(c) // the next one to run was given up while it waited behind others
		return
	}
	p.release(c)
}

// Fail is called by the ServerConn when the connection broke: every request
// in flight on it fails with err, and the connection is dropped.
func (c *Conn) Fail(err error) {
	if c.broken == nil {
		c.broken = err
	}
	c.pool.drop(c, err)
}

// settle applies the server's report on the session after r to the pool's
// view of the connection and of r's client, and turns a statement that left
// a transaction or table locks behind (outside a transaction of tetherd's)
// into an error: they cannot hold across pooled connections.
func (p *Pool) settle(c *Conn, r *Request) {
	rep := r.Report
	switch r.Kind {
	case KindBegin:
		if r.Err != nil {
			c.tx = nil
		} else {
			r.NewTx = c.tx
		}
	case KindCommit, KindRollback:
		tx := c.tx
		if tx != nil {
			tx.Conn, tx.Ended = nil, fmt.Errorf("%s: %w", p.name, tether.ErrTxDone)
			c.tx = nil
		}
		if r.Err != nil {
			// The server may have ended it or not: do not trust the session.
			c.dirty = "transaction did not end cleanly"
		} else if tx != nil && tx.EndedBy != "" {
			what := "commit"
			if r.Kind == KindRollback {
				what = "roll back"
			}
			r.Err = tether.Errorf(tether.CodeBadRequest, "%s: no transaction to %s: the server reports that the statement %s ended it "+
				"(COMMIT or ROLLBACK sent as SQL, or a statement that commits implicitly, such as DDL on MySQL); what ran "+
				"before that statement was ended with it, and every statement after it was committed on its own; use "+
				"commit and rollback, and keep such statements out of transactions", p.name, what, tx.EndedBy)
		}
	case KindQuery, KindExec:
		// A transaction that the server reports over after one of its
		// statements succeeded was ended by that statement, whatever its text.
		if tx := c.tx; tx != nil && r.Err == nil && tx.EndedBy == "" && (rep == nil || !rep.InTx) {
			tx.EndedBy = excerpt(r.SQL)
		}
	}
	if rep == nil {
		return
	}
	if (len(rep.Settings) > 0 || rep.Snapshot) && r.Kind != KindApply && r.Kind != KindReset {
		base := c.profile
		if rep.Snapshot {
			base = nil
		}
		c.profile = p.profiles.with(base, rep.Settings)
		if r.Client != nil {
			r.Client.Profile = c.profile
		} else if r.Tx != nil && r.Tx.Client != nil {
			r.Tx.Client.Profile = c.profile
		}
	}
	// tetherd's own statements that set the pooled variables to a profile
	// (KindApply) or set a reset session up (KindReset) leave nothing but
	// those: what the report makes of them (MariaDB does not report the
	// collation a character set change brings) must not send the connection
	// to a reset, which would also drop its prepared statements.
	if rep.Unpooled != "" && c.dirty == "" && r.Kind != KindApply && r.Kind != KindReset {
		c.dirty = rep.Unpooled
	}
	if c.tx == nil && (r.Kind == KindQuery || r.Kind == KindExec) {
		switch {
		case rep.InTx:
			c.dirty = "a transaction left open"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: the statement left a transaction open (the server reports it), which cannot hold across pooled connections: tetherd rolled it back; use begin and commit", p.name)
			}
		case rep.Locked:
			c.dirty = "table locks held"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: LOCK TABLES outside a transaction cannot hold across pooled connections: tetherd released the locks; run it inside begin and commit", p.name)
			}
		case rep.AutocommitOff:
			c.dirty = "autocommit off"
			if r.Err == nil {
				r.Err = tether.Errorf(tether.CodeBadRequest, "%s: the statement turned autocommit off (the server reports it), which cannot hold across pooled connections: tetherd reset the session; use begin and commit", p.name)
			}
		}
	}
}

// finish calls r.Done once; first its Intercept, which may take the request
// back (a router resubmitting it elsewhere).
func (p *Pool) finish(r *Request) {
	if r.State.Finished {
		return
	}
	if f := r.State.Intercept; f != nil {
		r.State.Intercept = nil
		if f(r) {
			return
		}
	}
	r.State.Finished = true
	r.Done(r)
}

// discard is the sink of a request given up on.
type discard struct{}

func (discard) Columns(int) {}

func (discard) Column([]byte) {}

func (discard) BeginRow() {}

func (discard) Nil() {}

func (discard) Bool(bool) {}

func (discard) Int(int64) {}

func (discard) Uint(uint64) {}

func (discard) Float(float64) {}

func (discard) Text([]byte) {}

func (discard) Bytes([]byte) {}

func (discard) DateTime([]byte) {}

func (discard) EndRow() error { return nil }

// excerpt quotes the start of a statement for an error message.
func excerpt(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 60 {
		sql = sql[:57] + "..."
	}
	return strconv.Quote(sql)
}
