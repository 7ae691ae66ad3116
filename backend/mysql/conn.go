package mysql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlconn"
	"github.com/tether-php/tether/backend/sqlpool"
)

// conn is one MySQL server connection driven by the event loop: it writes
// each request's commands as it gets them (pipelined behind earlier ones)
// and decodes the answers as they arrive, rows straight into the request's
// sink. Loop goroutine only, once dialled.
//
// Statements with parameters run as server-side prepared statements
// (COM_STMT_PREPARE once per connection, COM_STMT_EXECUTE with bound
// parameters after), never with parameters interpolated into text. A
// statement without parameters goes as text (COM_QUERY): one round trip and
// no statement left on the server, as mysqli runs it. This is what most of a
// WordPress page is: SQL with its values already escaped in, a text that
// rarely comes twice, which prepared would cost a prepare, an execute and a
// close per statement and fill the statement cache with one-offs. The
// connection never announces CLIENT_MULTI_STATEMENTS, so a text holds one
// statement, as a prepared one does.
//
// A schema change behind a prepared statement (DDL by any client, racing
// the execute) can make the server refuse an execute with
// ER_NEED_REPREPARE (1615) before the statement does any work. Outside a
// transaction the statement is closed, prepared again and run once more,
// its answer given in turn (retry); in a transaction the request fails with
// tx_aborted naming the schema change (ErrSchemaChanged), and the statement
// is prepared afresh at its next use.
type conn struct {
	// The socket, the requests waiting behind a prepare, the answers
	// awaited (Exp), their order while a statement runs again after
	// ER_NEED_REPREPARE (retry).
	sqlconn.Conn[expect, *expect]

	drv      *driver
	threadID uint32
	version  string
	baseline map[string]string // the pooled variables' values after the setup

	big []byte // a packet split over several wire packets, being joined

	stmts   sqlconn.StmtCache[*stmt]
	rs      resultState // the state of the answer being decoded
	okp     ok          // scratch
	scratch []byte
	// inTx: the last OK said a transaction is open (SERVER_STATUS_IN_TRANS).
	inTx bool
}

// expectKind is the kind of answer a command gets.
type expectKind uint8

const (
	expLocal     expectKind = iota // no packet: a request answered by tetherd, in its turn (Await.Local)
	expOK                          // OK or ERR (a result set is read and dropped)
	expPrepare                     // COM_STMT_PREPARE's answer
	expResult                      // COM_STMT_EXECUTE's answer
	expText                        // a request's COM_QUERY answer (text-protocol rows)
	expCollation                   // SELECT @@session.collation_connection, read into the request's report
)

// expect is one answer awaited, and the request it belongs to (Await).
type expect struct {
	sqlconn.Await
	kind expectKind
	st   *stmt
	h    hints // what the statement's text says of session state
	// retried: the statement was prepared again once already for r.
	retried bool
	// fake: the command sent is DO 0 in place of the execute, whose answer
	// a test hook (testHookStale) turns into ER_NEED_REPREPARE.
	fake bool
}

// resultState follows the decoding of one answer over its packets.
type resultState struct {
	phase   uint8 // what the next packet is
	ncols   int
	ci      int
	cols    []column
	results int   // result sets seen so far in this answer
	err     error // a result over its limit: the rows go on being read, unused
	skip    int   // prepare: column definitions left to skip
}

// Phases of an answer.
const (
	phaseFirst   = iota // the first packet: OK, ERR, or a column count
	phaseColumns        // column definitions
	phaseRows           // rows, until the OK that ends them
	phaseSkip           // prepare: parameter and column definitions
)

// Head implements sqlconn.Entry.
func (e *expect) Head() *sqlconn.Await { return &e.Await }

const maxPayload = 1<<24 - 1

// Attach implements sqlpool.ServerConn.
func (c *conn) Attach(pc *sqlpool.Conn) {
	c.Start(pc, c.drv.loop(), c)
	c.stmts.Init(c.drv.stmtCacheSize, c.closeStmt)
}

// String implements sqlpool.ServerConn.
func (c *conn) String() string { return "mysql thread " + strconv.FormatUint(uint64(c.threadID), 10) }

// Close implements sqlpool.ServerConn: COM_QUIT if the socket takes it now,
// then close.
func (c *conn) Close() {
	quit := [5]byte{1, 0, 0, 0, gomysql.COM_QUIT}
	c.CloseSocket(quit[:])
	c.big = nil
}

// WriteRequest implements sqlconn.Protocol.
func (c *conn) WriteRequest(r *sqlpool.Request) {
	switch r.Kind {
	case sqlpool.KindQuery, sqlpool.KindExec:
		if len(r.Params) == 0 {
			c.text(r)
			return
		}
		st := c.stmts.Get(r.SQL)
		if st == nil {
			st = &stmt{sql: r.SQL, hints: sessionHints(r.SQL)}
			c.prepare(r, st, false)
			return
		}
		c.execute(r, st, false)
	case sqlpool.KindBegin:
		c.query(r, "START TRANSACTION", true)
	case sqlpool.KindCommit:
		c.query(r, "COMMIT", true)
	case sqlpool.KindRollback:
		c.query(r, "ROLLBACK", true)
	case sqlpool.KindApply:
		d := sqlpool.DiffProfiles(c.PC.Profile(), r.Profile)
		if d.Empty() {
			c.Local(r, nil)
			return
		}
		c.query(r, applySQL(d, c.baseline), true)
	case sqlpool.KindReset:
		// The server drops the prepared statements with the session state.
		c.stmts.Clear()
		c.command(gomysql.COM_RESET_CONNECTION, "")
		c.Exp = append(c.Exp, expect{kind: expOK, Await: sqlconn.Await{R: r}})
		if db := c.drv.cfg.DBName; db != "" {
			// The reset keeps the default schema a USE chose.
			c.command(gomysql.COM_INIT_DB, db)
			c.Exp = append(c.Exp, expect{kind: expOK, Await: sqlconn.Await{R: r}})
		}
		c.query(r, c.drv.setupSQL, true)
	case sqlpool.KindProbe:
		c.query(r, "DO 0", true)
	default:
		c.Local(r, fmt.Errorf("mysql: request kind %s", r.Kind))
	}
}

// prepare writes COM_STMT_PREPARE for r's statement st; r's execute waits
// for its answer, and the requests behind r with it. retried: st is prepared
// again for r after ER_NEED_REPREPARE.
func (c *conn) prepare(r *sqlpool.Request, st *stmt, retried bool) {
	c.command(gomysql.COM_STMT_PREPARE, r.SQL)
	c.Exp = append(c.Exp, expect{kind: expPrepare, Await: sqlconn.Await{R: r}, st: st, retried: retried})
	c.Blocked++
}

// query writes a text-protocol statement (tetherd's own: no parameters).
func (c *conn) query(r *sqlpool.Request, sql string, last bool) {
	c.command(gomysql.COM_QUERY, sql)
	c.Exp = append(c.Exp, expect{kind: expOK, Await: sqlconn.Await{R: r, Last: last}})
}

// command writes a command packet: cmd followed by arg.
func (c *conn) command(cmd byte, arg string) {
	start := c.beginPacket()
	c.Out = append(c.Out, cmd)
	c.Out = append(c.Out, arg...)
	c.endPacket(start)
}

func (c *conn) beginPacket() int {
	start := len(c.Out)
	c.Out = append(c.Out, 0, 0, 0, 0)
	return start
}

// endPacket writes the header of the packet begun at start (sequence 0, a
// command), splitting a payload of 16 MiB or more into several packets.
func (c *conn) endPacket(start int) {
	n := len(c.Out) - start - 4
	if n < maxPayload {
		c.Out[start], c.Out[start+1], c.Out[start+2], c.Out[start+3] = byte(n), byte(n>>8), byte(n>>16), 0
		return
	}
	payload := append([]byte(nil), c.Out[start+4:]...)
	c.Out = appendPackets(c.Out[:start], payload, 0)
}

// appendPackets appends payload as packets numbered from seq, split at the
// protocol's 16 MiB limit (a payload of exactly a multiple of it ends with an
// empty packet).
func appendPackets(dst, payload []byte, seq byte) []byte {
	for {
		n := min(len(payload), maxPayload)
		dst = append(dst, byte(n), byte(n>>8), byte(n>>16), seq)
		dst = append(dst, payload[:n]...)
		payload = payload[n:]
		seq++
		if n < maxPayload {
			return dst
		}
	}
}

// execute writes COM_STMT_EXECUTE for r on the prepared st, with r's
// parameters bound in the binary protocol. retried: st was prepared again
// for r after ER_NEED_REPREPARE.
func (c *conn) execute(r *sqlpool.Request, st *stmt, retried bool) {
	if len(r.Params) != st.nparams {
		c.Local(r, tether.Errorf(tether.CodeBadRequest, "expected %d arguments, got %d", st.nparams, len(r.Params)))
		return
	}
	if h := testHookStale.Load(); h != nil && (*h)(st.sql) {
		c.command(gomysql.COM_QUERY, "DO 0")
		c.expectResult(expect{kind: expResult, Await: sqlconn.Await{R: r}, st: st, h: st.hints, retried: retried, fake: true})
		return
	}
	start := c.beginPacket()
	c.Out = append(c.Out, gomysql.COM_STMT_EXECUTE)
	c.Out = binary.LittleEndian.AppendUint32(c.Out, st.id)
	c.Out = append(c.Out, 0)                           // no cursor
	c.Out = binary.LittleEndian.AppendUint32(c.Out, 1) // iteration count
	if n := len(r.Params); n > 0 {
		nulls := len(c.Out)
		for i := 0; i < (n+7)/8; i++ {
			c.Out = append(c.Out, 0)
		}
		c.Out = append(c.Out, 1) // types follow
		types := len(c.Out)
		for i := 0; i < n; i++ {
			c.Out = append(c.Out, 0, 0)
		}
		for i, v := range r.Params {
			typ, unsigned, err := c.appendParam(v)
			if err != nil {
				c.Out = c.Out[:start]
				c.Local(r, tether.Errorf(tether.CodeBadRequest, "parameter %d: %s", i+1, err))
				return
			}
			if typ == gomysql.MYSQL_TYPE_NULL {
				c.Out[nulls+i/8] |= 1 << (i % 8)
			}
			c.Out[types+2*i] = typ
			if unsigned {
				c.Out[types+2*i+1] = 0x80
			}
		}
	}
	c.endPacket(start)
	c.expectResult(expect{kind: expResult, Await: sqlconn.Await{R: r}, st: st, h: st.hints, retried: retried})
}

// text writes a request without parameters as COM_QUERY.
func (c *conn) text(r *sqlpool.Request) {
	c.command(gomysql.COM_QUERY, r.SQL)
	c.expectResult(expect{kind: expText, Await: sqlconn.Await{R: r}, h: sessionHints(r.SQL)})
}

// expectResult awaits e, a statement's answer, and the collation read back
// after it when its text may change the character set.
func (c *conn) expectResult(e expect) {
	if e.h&hintCollation == 0 {
		e.Last = true
		c.Exp = append(c.Exp, e)
		return
	}
	// MariaDB's tracker reports SET NAMES' character sets but not its
	// collation: the server is asked for it, in the same round trip.
	c.Exp = append(c.Exp, e)
	c.command(gomysql.COM_QUERY, "SELECT @@session.collation_connection")
	c.Exp = append(c.Exp, expect{kind: expCollation, Await: sqlconn.Await{R: e.R, Last: true}})
}

// appendParam appends one parameter's value and returns its type.
func (c *conn) appendParam(v any) (typ byte, unsigned bool, err error) {
	switch x := v.(type) {
	case nil:
		return gomysql.MYSQL_TYPE_NULL, false, nil
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		c.Out = append(c.Out, b)
		return gomysql.MYSQL_TYPE_TINY, false, nil
	case int64:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, uint64(x))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case int:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, uint64(x))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case int32:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, uint64(int64(x)))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case uint64:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, x)
		return gomysql.MYSQL_TYPE_LONGLONG, true, nil
	case float64:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, math.Float64bits(x))
		return gomysql.MYSQL_TYPE_DOUBLE, false, nil
	case float32:
		c.Out = binary.LittleEndian.AppendUint64(c.Out, math.Float64bits(float64(x)))
		return gomysql.MYSQL_TYPE_DOUBLE, false, nil
	case string:
		c.Out = gomysql.AppendLengthEncodedInteger(c.Out, uint64(len(x)))
		c.Out = append(c.Out, x...)
		return gomysql.MYSQL_TYPE_STRING, false, nil
	case []byte:
		if x == nil {
			return gomysql.MYSQL_TYPE_NULL, false, nil
		}
		c.Out = gomysql.AppendLengthEncodedInteger(c.Out, uint64(len(x)))
		c.Out = append(c.Out, x...)
		return gomysql.MYSQL_TYPE_STRING, false, nil
	}
	return 0, false, fmt.Errorf("unsupported type %T", v)
}

// Parse implements sqlconn.Protocol: it handles every whole packet read.
func (c *conn) Parse() {
	for !c.Closed() {
		b := c.Peek(4)
		if b == nil {
			return
		}
		n := int(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16)
		b, whole := c.Take(4 + n)
		if !whole {
			return
		}
		p := b[4:]
		if n == maxPayload || c.big != nil {
			c.big = append(c.big, p...)
			if n == maxPayload {
				continue
			}
			p, c.big = c.big, nil
		}
		c.handle(p)
	}
}

// handle decodes one packet of the answer awaited first.
func (c *conn) handle(p []byte) {
	if len(c.Exp) == 0 {
		if len(p) > 0 && p[0] == 0xff {
			c.Fail(fmt.Errorf("the server closed the session: %w", parseErr(p)))
		} else {
			c.Fail(errors.New("protocol error: a packet nobody waited for"))
		}
		return
	}
	if len(p) == 0 {
		c.Fail(errMalformed)
		return
	}
	e := &c.Exp[0]
	if e.fake && c.rs.phase == phaseFirst {
		p = errNeedReprepare
	}
	switch e.kind {
	case expPrepare:
		c.onPrepare(e, p)
	case expResult, expText:
		c.onResult(e, p, e.R.Kind == sqlpool.KindQuery)
	default:
		c.onResult(e, p, false)
	}
}

// onPrepare decodes COM_STMT_PREPARE's answer; once complete, the request's
// EXECUTE goes out and the requests behind it follow.
func (c *conn) onPrepare(e *expect, p []byte) {
	rs := &c.rs
	if rs.phase == phaseSkip {
		rs.skip--
		if rs.skip == 0 {
			c.prepared(e)
		}
		return
	}
	switch p[0] {
	case 0x00:
		if len(p) < 12 {
			c.Fail(errMalformed)
			return
		}
		st := e.st
		st.id = binary.LittleEndian.Uint32(p[1:])
		ncols := int(binary.LittleEndian.Uint16(p[5:]))
		st.nparams = int(binary.LittleEndian.Uint16(p[7:]))
		if rs.skip = st.nparams + ncols; rs.skip > 0 {
			rs.phase = phaseSkip
			return
		}
		c.prepared(e)
	case 0xff:
		r := e.R
		r.Err = c.drv.classify(parseErr(p))
		c.pop()
		c.Finish(r)
		c.Blocked--
		c.WritePending()
	default:
		c.Fail(errMalformed)
	}
}

// prepared caches the statement, writes the EXECUTE that waited for it and
// the requests behind it.
func (c *conn) prepared(e *expect) {
	r, st, retried := e.R, e.st, e.retried
	c.pop()
	c.stmts.Put(st.sql, st)
	c.Blocked--
	c.execute(r, st, retried)
	c.WritePending()
}

// onResult decodes a statement's answer: an OK, an ERR, or result sets
// (the first into the request's sink when rows is set; a second one with
// columns makes a query fail with unsupported, and an exec drops them all).
func (c *conn) onResult(e *expect, p []byte, rows bool) {
	rs := &c.rs
	r := e.R
	switch rs.phase {
	case phaseFirst:
		switch p[0] {
		case 0x00:
			if rows && rs.results == 0 {
				r.Sink.Columns(0)
			}
			c.ended(e, p)
		case 0xff:
			c.errored(e, p)
		default:
			if rows && rs.results > 0 && rs.err == nil {
				// A procedure's second SELECT: one reply holds one result set,
				// and dropping the rest would answer less than was asked.
				rs.err = tether.Errorf(tether.CodeUnsupported, "mysql: the statement returned more than one result set "+
					"(a procedure's SELECTs), and a query answers one: the statement ran (what it wrote stands) but its "+
					"results are not returned; make the procedure return one result set, or run it with exec for its effect")
			}
			n, _, _ := gomysql.LengthEncodedInt(p)
			rs.ncols, rs.ci = int(n), 0
			for len(rs.cols) < rs.ncols {
				rs.cols = append(rs.cols, column{})
			}
			if rows && rs.results == 0 {
				r.Sink.Columns(rs.ncols)
			}
			rs.phase = phaseColumns
			if rs.ncols == 0 {
				rs.phase = phaseRows
			}
		}
	case phaseColumns:
		col := &rs.cols[rs.ci]
		if err := parseColumn(p, col); err != nil {
			c.Fail(err)
			return
		}
		if rows && rs.results == 0 {
			r.Sink.Column(col.name)
		}
		if rs.ci++; rs.ci == rs.ncols {
			rs.phase = phaseRows
		}
	case phaseRows:
		// An ERR, the OK (0xfe) that ends the rows, or a row. A text row's
		// first byte is a length prefix, never 0xff, and 0xfe only in a
		// packet of 16 MiB or more.
		switch {
		case p[0] == 0xfe && len(p) < maxPayload:
			c.ended(e, p)
		case p[0] == 0xff:
			c.errored(e, p)
		case e.kind == expResult && p[0] == 0x00 || e.kind == expText:
			if !rows || rs.results > 0 || rs.err != nil {
				return
			}
			var err error
			if e.kind == expText {
				c.scratch, err = decodeTextRow(p, rs.cols[:rs.ncols], r.Sink, c.scratch)
			} else {
				c.scratch, err = decodeRow(p, rs.cols[:rs.ncols], r.Sink, c.scratch)
			}
			if err != nil {
				c.Fail(err)
				return
			}
			if err := r.Sink.EndRow(); err != nil { // the result passed max_result_bytes (tether.RowSink)
				rs.err = &tether.Error{Code: tether.CodeTooLarge, Err: err, Message: "mysql: result is over max_result_bytes"}
			}
		case e.kind == expCollation:
			if v, _, _, err := gomysql.LengthEncodedString(p); err == nil && r.Report != nil {
				r.Report.Settings = append(r.Report.Settings, sqlpool.Setting{Name: "collation_connection", Value: string(v)})
			}
		case e.kind != expResult:
			// A text row of a result set tetherd drops.
		default:
			c.Fail(errMalformed)
		}
	}
}

// ended handles the OK that ends a statement's answer, or one result set of
// several (a CALL's).
func (c *conn) ended(e *expect, p []byte) {
	o := &c.okp
	if err := parseOK(p, o); err != nil {
		c.Fail(err)
		return
	}
	r := e.R
	c.inTx = o.status&gomysql.SERVER_STATUS_IN_TRANS != 0
	c.drv.report(o, r, e.h)
	if (e.kind == expResult || e.kind == expText) && c.rs.results == 0 {
		r.Affected, r.InsertID = int64(o.affected), int64(o.insertID)
	}
	if o.status&gomysql.SERVER_MORE_RESULTS_EXISTS != 0 {
		c.rs.results++
		c.rs.phase = phaseFirst
		return
	}
	if c.rs.err != nil && r.Err == nil {
		r.Err = c.rs.err
	}
	c.completed(e)
}

// errored handles an ERR that ends an answer.
func (c *conn) errored(e *expect, p []byte) {
	if e.kind == expResult && c.rs.phase == phaseFirst && c.rs.results == 0 && e.R.Err == nil &&
		len(p) >= 3 && binary.LittleEndian.Uint16(p[1:]) == erNeedReprepare {
		c.stale(e, p)
		return
	}
	if e.R.Err == nil {
		e.R.Err = c.drv.classify(parseErr(p))
	}
	c.completed(e)
}

// erNeedReprepare is ER_NEED_REPREPARE: "Prepared statement needs to be
// re-prepared", an execute refused, before any work, for a schema change.
const erNeedReprepare = 1615

// errNeedReprepare is the ERR packet testHookStale fakes.
var errNeedReprepare = append([]byte{0xff, erNeedReprepare & 0xff, erNeedReprepare >> 8, '#', 'H', 'Y', '0', '0', '0'},
	"Prepared statement needs to be re-prepared"...)

// testHookStale, set by tests only, reports whether the execute of a
// statement is to be answered ER_NEED_REPREPARE: DO 0 is sent in its place
// (the statement does not run) and its OK taken for that error.
var testHookStale atomic.Pointer[func(sql string) bool]

// stale handles ER_NEED_REPREPARE ending the answer to an execute (e): the
// statement ran nothing. It is closed on this connection; outside a
// transaction it is prepared again and run once more, its answer held so
// that requests are answered in the order sent; in one, or when it was
// retried already, the request fails.
func (c *conn) stale(e *expect, p []byte) {
	r, st, retried := e.R, e.st, e.retried
	c.pop()
	c.stmts.Remove(st.sql, st)
	se := parseErr(p)
	switch {
	case !c.inTx && !retried && !r.State.Abandoned:
		c.HoldForRetry(r) // the collation read written after it: the retry writes its own
		c.prepare(r, &stmt{sql: r.SQL, hints: sessionHints(r.SQL)}, true)
		c.FlushLater()
		return
	case c.inTx:
		code := strconv.Itoa(erNeedReprepare)
		var pe *serverError
		errors.As(se, &pe)
		r.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, BackendCode: code,
			Message: "mysql: the schema changed under a prepared statement (" + pe.Message + ") in this transaction: " +
				"the statement did not run; roll the transaction back and run it again; the statement is prepared afresh at its next use",
			Err: fmt.Errorf("%w: %w", ErrSchemaChanged, se)}
	default:
		r.Err = c.drv.classify(se)
	}
	if !c.Awaits(r) {
		c.Finish(r)
	} // else the collation read written after it ends the request, as usual
	c.DrainLocal()
}

// unpooledWhy names, for logs, what the text filter looks for.
const unpooledWhy = "GET_LOCK, LAST_INSERT_ID, CALL, EXECUTE, HANDLER or XA"

// completed pops an answered expectation and finishes its request if that
// was its last answer.
func (c *conn) completed(e *expect) {
	r, last := e.R, e.Last
	if e.h&hintUnpooled != 0 {
		r.AddUnpooled("statement text (" + unpooledWhy + ")")
	}
	c.pop()
	if last {
		c.Finish(r)
	}
	c.DrainLocal()
}

// pop drops the first expectation and resets the decoding state.
func (c *conn) pop() {
	c.Pop()
	c.rs.phase, c.rs.results, c.rs.err, c.rs.skip = phaseFirst, 0, nil, 0
}

// stmt is a statement prepared on one connection.
type stmt struct {
	sql     string
	id      uint32
	nparams int
	hints   hints
}

// closeStmt writes COM_STMT_CLOSE for st (sqlconn.StmtCache): no answer
// comes to it.
func (c *conn) closeStmt(st *stmt) {
	start := c.beginPacket()
	c.Out = append(c.Out, gomysql.COM_STMT_CLOSE)
	c.Out = binary.LittleEndian.AppendUint32(c.Out, st.id)
	c.endPacket(start)
}

var _ sqlpool.ServerConn = (*conn)(nil)
