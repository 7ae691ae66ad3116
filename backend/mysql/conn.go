package mysql

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync/atomic"
	"syscall"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"golang.org/x/sys/unix"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
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
	drv      *driver
	fd       int
	threadID uint32
	version  string
	pc       *sqlpool.Conn
	baseline map[string]string // the pooled variables' values after the setup

	out     []byte // output the socket has not taken, from wpos
	wpos    int
	wantOut bool
	in      []byte // input read, parsed up to rpos
	rlen    int
	rpos    int
	big     []byte // a packet split over several wire packets, being joined

	stmts   stmtCache
	pending []*sqlpool.Request // accepted, waiting behind a prepare to be written
	blocked int                // prepares in flight: pending waits for their answers
	exp     []expect           // answers awaited, oldest first
	rs      resultState        // the state of the answer being decoded
	okp     ok                 // scratch
	scratch []byte
	closed  bool
	// flushDue: registered to flush at the end of the loop's turn.
	flushDue bool
	// inTx: the last OK said a transaction is open (SERVER_STATUS_IN_TRANS).
	inTx bool

	// answers keeps answers in the order sent while a statement runs again
	// after ER_NEED_REPREPARE (retry).
	answers sqlpool.AnswerOrder
}

// expectKind is the kind of answer a command gets.
type expectKind uint8

const (
	expOK        expectKind = iota // OK or ERR (a result set is read and dropped)
	expPrepare                     // COM_STMT_PREPARE's answer
	expResult                      // COM_STMT_EXECUTE's answer
	expText                        // a request's COM_QUERY answer (text-protocol rows)
	expLocal                       // no packet: a request answered by tetherd, in its turn
	expCollation                   // SELECT @@session.collation_connection, read into the request's report
)

// expect is one answer awaited, and the request it belongs to.
type expect struct {
	kind expectKind
	r    *sqlpool.Request
	st   *stmt
	h    hints // what the statement's text says of session state
	last bool  // the request is complete with this answer
	err  error // expLocal's outcome
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

const (
	maxPayload  = 1<<24 - 1
	readChunk   = 16 << 10
	keepBufSize = 1 << 20 // larger buffers are dropped once empty
)

// Attach implements sqlpool.ServerConn.
func (c *conn) Attach(pc *sqlpool.Conn) {
	c.pc = pc
	c.stmts.init(c.drv.stmtCacheSize)
}

// Fd implements sqlpool.ServerConn.
func (c *conn) Fd() int { return c.fd }

// String implements sqlpool.ServerConn.
func (c *conn) String() string { return "mysql thread " + strconv.FormatUint(uint64(c.threadID), 10) }

// Close implements sqlpool.ServerConn: COM_QUIT if the socket takes it now,
// then close.
func (c *conn) Close() {
	if c.closed {
		return
	}
	c.closed = true
	quit := [5]byte{1, 0, 0, 0, gomysql.COM_QUIT}
	evloop.RawWrite(c.fd, quit[:])
	unix.Close(c.fd)
	c.out, c.in, c.big = nil, nil, nil
}

// fail reports a broken connection to the pool, which drops it.
func (c *conn) fail(err error) {
	if c.closed {
		return
	}
	c.pc.Fail(err)
}

// Send implements sqlpool.ServerConn.
func (c *conn) Send(r *sqlpool.Request) {
	c.answers.Sent(r)
	c.pending = append(c.pending, r)
	c.writePending()
}

// writePending writes the requests waiting, up to the first that needs a
// statement prepared, and flushes.
func (c *conn) writePending() {
	for c.blocked == 0 && len(c.pending) > 0 && !c.closed {
		r := c.pending[0]
		n := copy(c.pending, c.pending[1:])
		c.pending[n] = nil
		c.pending = c.pending[:n]
		c.write(r)
	}
	c.flushLater()
	c.drainLocal()
}

// flushLater writes the commands at the end of the loop's turn, with the
// others of the turn (evloop.Loop.FlushLater).
func (c *conn) flushLater() {
	if !c.flushDue && c.wpos < len(c.out) {
		c.flushDue = true
		c.drv.loop().FlushLater(c)
	}
}

// Flush implements evloop.Flusher.
func (c *conn) Flush() {
	c.flushDue = false
	c.flush()
}

func (c *conn) write(r *sqlpool.Request) {
	switch r.Kind {
	case sqlpool.KindQuery, sqlpool.KindExec:
		if len(r.Params) == 0 {
			c.text(r)
			return
		}
		st := c.stmts.get(r.SQL)
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
		d := sqlpool.DiffProfiles(c.pc.Profile(), r.Profile)
		if d.Empty() {
			c.exp = append(c.exp, expect{kind: expLocal, r: r, last: true})
			return
		}
		c.query(r, applySQL(d, c.baseline), true)
	case sqlpool.KindReset:
		// The server drops the prepared statements with the session state.
		c.stmts.clear()
		c.command(gomysql.COM_RESET_CONNECTION, "")
		c.exp = append(c.exp, expect{kind: expOK, r: r})
		if db := c.drv.cfg.DBName; db != "" {
			// The reset keeps the default schema a USE chose.
			c.command(gomysql.COM_INIT_DB, db)
			c.exp = append(c.exp, expect{kind: expOK, r: r})
		}
		c.query(r, c.drv.setupSQL, true)
	case sqlpool.KindProbe:
		c.query(r, "DO 0", true)
	default:
		c.exp = append(c.exp, expect{kind: expLocal, r: r, last: true, err: fmt.Errorf("mysql: request kind %s", r.Kind)})
	}
}

// prepare writes COM_STMT_PREPARE for r's statement st; r's execute waits
// for its answer, and the requests behind r with it. retried: st is prepared
// again for r after ER_NEED_REPREPARE.
func (c *conn) prepare(r *sqlpool.Request, st *stmt, retried bool) {
	c.command(gomysql.COM_STMT_PREPARE, r.SQL)
	c.exp = append(c.exp, expect{kind: expPrepare, r: r, st: st, retried: retried})
	c.blocked++
}

// query writes a text-protocol statement (tetherd's own: no parameters).
func (c *conn) query(r *sqlpool.Request, sql string, last bool) {
	c.command(gomysql.COM_QUERY, sql)
	c.exp = append(c.exp, expect{kind: expOK, r: r, last: last})
}

// command writes a command packet: cmd followed by arg.
func (c *conn) command(cmd byte, arg string) {
	start := c.beginPacket()
	c.out = append(c.out, cmd)
	c.out = append(c.out, arg...)
	c.endPacket(start)
}

func (c *conn) beginPacket() int {
	start := len(c.out)
	c.out = append(c.out, 0, 0, 0, 0)
	return start
}

// endPacket writes the header of the packet begun at start (sequence 0, a
// command), splitting a payload of 16 MiB or more into several packets.
func (c *conn) endPacket(start int) {
	n := len(c.out) - start - 4
	if n < maxPayload {
		c.out[start], c.out[start+1], c.out[start+2], c.out[start+3] = byte(n), byte(n>>8), byte(n>>16), 0
		return
	}
	payload := append([]byte(nil), c.out[start+4:]...)
	c.out = appendPackets(c.out[:start], payload, 0)
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
		c.exp = append(c.exp, expect{kind: expLocal, r: r, last: true,
			err: tether.Errorf(tether.CodeBadRequest, "expected %d arguments, got %d", st.nparams, len(r.Params))})
		return
	}
	if h := testHookStale.Load(); h != nil && (*h)(st.sql) {
		c.command(gomysql.COM_QUERY, "DO 0")
		c.expectResult(expect{kind: expResult, r: r, st: st, h: st.hints, retried: retried, fake: true})
		return
	}
	start := c.beginPacket()
	c.out = append(c.out, gomysql.COM_STMT_EXECUTE)
	c.out = binary.LittleEndian.AppendUint32(c.out, st.id)
	c.out = append(c.out, 0)                           // no cursor
	c.out = binary.LittleEndian.AppendUint32(c.out, 1) // iteration count
	if n := len(r.Params); n > 0 {
		nulls := len(c.out)
		for i := 0; i < (n+7)/8; i++ {
			c.out = append(c.out, 0)
		}
		c.out = append(c.out, 1) // types follow
		types := len(c.out)
		for i := 0; i < n; i++ {
			c.out = append(c.out, 0, 0)
		}
		for i, v := range r.Params {
			typ, unsigned, err := c.appendParam(v)
			if err != nil {
				c.out = c.out[:start]
				c.exp = append(c.exp, expect{kind: expLocal, r: r, last: true,
					err: tether.Errorf(tether.CodeBadRequest, "parameter %d: %s", i+1, err)})
				return
			}
			if typ == gomysql.MYSQL_TYPE_NULL {
				c.out[nulls+i/8] |= 1 << (i % 8)
			}
			c.out[types+2*i] = typ
			if unsigned {
				c.out[types+2*i+1] = 0x80
			}
		}
	}
	c.endPacket(start)
	c.expectResult(expect{kind: expResult, r: r, st: st, h: st.hints, retried: retried})
}

// text writes a request without parameters as COM_QUERY.
func (c *conn) text(r *sqlpool.Request) {
	c.command(gomysql.COM_QUERY, r.SQL)
	c.expectResult(expect{kind: expText, r: r, h: sessionHints(r.SQL)})
}

// expectResult awaits e, a statement's answer, and the collation read back
// after it when its text may change the character set.
func (c *conn) expectResult(e expect) {
	if e.h&hintCollation == 0 {
		e.last = true
		c.exp = append(c.exp, e)
		return
	}
	// MariaDB's tracker reports SET NAMES' character sets but not its
	// collation: the server is asked for it, in the same round trip.
	c.exp = append(c.exp, e)
	c.command(gomysql.COM_QUERY, "SELECT @@session.collation_connection")
	c.exp = append(c.exp, expect{kind: expCollation, r: e.r, last: true})
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
		c.out = append(c.out, b)
		return gomysql.MYSQL_TYPE_TINY, false, nil
	case int64:
		c.out = binary.LittleEndian.AppendUint64(c.out, uint64(x))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case int:
		c.out = binary.LittleEndian.AppendUint64(c.out, uint64(x))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case int32:
		c.out = binary.LittleEndian.AppendUint64(c.out, uint64(int64(x)))
		return gomysql.MYSQL_TYPE_LONGLONG, false, nil
	case uint64:
		c.out = binary.LittleEndian.AppendUint64(c.out, x)
		return gomysql.MYSQL_TYPE_LONGLONG, true, nil
	case float64:
		c.out = binary.LittleEndian.AppendUint64(c.out, math.Float64bits(x))
		return gomysql.MYSQL_TYPE_DOUBLE, false, nil
	case float32:
		c.out = binary.LittleEndian.AppendUint64(c.out, math.Float64bits(float64(x)))
		return gomysql.MYSQL_TYPE_DOUBLE, false, nil
	case string:
		c.out = gomysql.AppendLengthEncodedInteger(c.out, uint64(len(x)))
		c.out = append(c.out, x...)
		return gomysql.MYSQL_TYPE_STRING, false, nil
	case []byte:
		if x == nil {
			return gomysql.MYSQL_TYPE_NULL, false, nil
		}
		c.out = gomysql.AppendLengthEncodedInteger(c.out, uint64(len(x)))
		c.out = append(c.out, x...)
		return gomysql.MYSQL_TYPE_STRING, false, nil
	}
	return 0, false, fmt.Errorf("unsupported type %T", v)
}

// flush writes what the socket takes now; the rest when it is writable.
func (c *conn) flush() {
	for c.wpos < len(c.out) && !c.closed {
		n, errno := evloop.RawWrite(c.fd, c.out[c.wpos:])
		switch errno {
		case 0:
			c.wpos += n
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if !c.wantOut {
				c.wantOut = true
				c.drv.loop().WantWrite(c.fd, true)
			}
			return
		}
		c.fail(fmt.Errorf("write: %w", errno))
		return
	}
	c.out, c.wpos = c.out[:0], 0
	if cap(c.out) > keepBufSize {
		c.out = nil
	}
	if c.wantOut {
		c.wantOut = false
		c.drv.loop().WantWrite(c.fd, false)
	}
}

// OnWritable implements evloop.Watcher.
func (c *conn) OnWritable() { c.flush() }

// OnReadable implements evloop.Watcher: it reads what the socket has and
// handles every whole packet.
func (c *conn) OnReadable() {
	for !c.closed {
		if len(c.in) == 0 {
			c.in = make([]byte, readChunk)
		}
		if c.rlen == len(c.in) {
			c.makeRoom(readChunk)
		}
		n, errno := evloop.RawRead(c.fd, c.in[c.rlen:])
		if errno == unix.EAGAIN {
			break
		}
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n <= 0 {
			err := error(io.EOF)
			if errno != 0 {
				err = fmt.Errorf("read: %w", syscall.Errno(errno))
			}
			c.fail(err)
			return
		}
		room := len(c.in) - c.rlen
		c.rlen += n
		c.parse()
		if n < room {
			break // the socket is drained
		}
	}
	if c.closed {
		return
	}
	if c.rpos == c.rlen {
		c.rpos, c.rlen = 0, 0
		if len(c.in) > keepBufSize {
			c.in = nil
		}
	}
}

// makeRoom makes at least n bytes free after rlen, moving unparsed input to
// the front or growing the buffer.
func (c *conn) makeRoom(n int) {
	unparsed := c.rlen - c.rpos
	if c.rpos > 0 && len(c.in)-unparsed >= n {
		copy(c.in, c.in[c.rpos:c.rlen])
		c.rpos, c.rlen = 0, unparsed
		return
	}
	if len(c.in)-c.rlen >= n {
		return
	}
	nb := make([]byte, max(2*len(c.in), unparsed+n))
	copy(nb, c.in[c.rpos:c.rlen])
	c.in, c.rpos, c.rlen = nb, 0, unparsed
}

// parse handles every whole packet read.
func (c *conn) parse() {
	for !c.closed {
		avail := c.rlen - c.rpos
		if avail < 4 {
			return
		}
		b := c.in[c.rpos:]
		n := int(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16)
		if avail < 4+n {
			c.makeRoom(4 + n - avail)
			return
		}
		p := c.in[c.rpos+4 : c.rpos+4+n]
		c.rpos += 4 + n
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
	if len(c.exp) == 0 {
		if len(p) > 0 && p[0] == 0xff {
			c.fail(fmt.Errorf("the server closed the session: %w", parseErr(p)))
		} else {
			c.fail(errors.New("protocol error: a packet nobody waited for"))
		}
		return
	}
	if len(p) == 0 {
		c.fail(errMalformed)
		return
	}
	e := &c.exp[0]
	if e.fake && c.rs.phase == phaseFirst {
		p = errNeedReprepare
	}
	switch e.kind {
	case expPrepare:
		c.onPrepare(e, p)
	case expResult, expText:
		c.onResult(e, p, e.r.Kind == sqlpool.KindQuery)
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
			c.fail(errMalformed)
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
		r := e.r
		r.Err = c.drv.classify(parseErr(p))
		c.pop()
		c.finish(r)
		c.blocked--
		c.writePending()
	default:
		c.fail(errMalformed)
	}
}

// prepared caches the statement, writes the EXECUTE that waited for it and
// the requests behind it.
func (c *conn) prepared(e *expect) {
	r, st, retried := e.r, e.st, e.retried
	c.pop()
	c.stmts.put(st, c)
	c.blocked--
	c.execute(r, st, retried)
	c.writePending()
}

// onResult decodes a statement's answer: an OK, an ERR, or result sets
// (the first into the request's sink when rows is set; a second one with
// columns makes a query fail with unsupported, and an exec drops them all).
func (c *conn) onResult(e *expect, p []byte, rows bool) {
	rs := &c.rs
	r := e.r
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
			c.fail(err)
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
				c.fail(err)
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
			c.fail(errMalformed)
		}
	}
}

// ended handles the OK that ends a statement's answer, or one result set of
// several (a CALL's).
func (c *conn) ended(e *expect, p []byte) {
	o := &c.okp
	if err := parseOK(p, o); err != nil {
		c.fail(err)
		return
	}
	r := e.r
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
	if e.kind == expResult && c.rs.phase == phaseFirst && c.rs.results == 0 && e.r.Err == nil &&
		len(p) >= 3 && binary.LittleEndian.Uint16(p[1:]) == erNeedReprepare {
		c.stale(e, p)
		return
	}
	if e.r.Err == nil {
		e.r.Err = c.drv.classify(parseErr(p))
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
	r, st, retried := e.r, e.st, e.retried
	c.pop()
	c.stmts.remove(st, c)
	se := parseErr(p)
	switch {
	case !c.inTx && !retried && !r.State.Abandoned:
		c.holdOrder(r)
		for i := range c.exp {
			if c.exp[i].r == r {
				c.exp[i].last = false // the collation read written after it: the retry writes its own
			}
		}
		c.prepare(r, &stmt{sql: r.SQL, hints: sessionHints(r.SQL)}, true)
		c.flushLater()
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
	for i := range c.exp {
		if c.exp[i].r == r {
			// The collation read written after it ends the request, as usual.
			c.drainLocal()
			return
		}
	}
	c.finish(r)
	c.drainLocal()
}

// holdOrder starts holding answers so that r, about to run again, is
// answered before the requests sent after it.
func (c *conn) holdOrder(r *sqlpool.Request) {
	inflight := make([]*sqlpool.Request, len(c.exp))
	for i := range c.exp {
		inflight[i] = c.exp[i].r
	}
	c.answers.Hold(r, inflight, c.pending)
}

// unpooledWhy names, for logs, what the text filter looks for.
const unpooledWhy = "GET_LOCK, LAST_INSERT_ID, CALL, EXECUTE, HANDLER or XA"

// completed pops an answered expectation and finishes its request if that
// was its last answer.
func (c *conn) completed(e *expect) {
	r, last := e.r, e.last
	if e.h&hintUnpooled != 0 {
		r.AddUnpooled("statement text (" + unpooledWhy + ")")
	}
	c.pop()
	if last {
		c.finish(r)
	}
	c.drainLocal()
}

// pop drops the first expectation and resets the decoding state.
func (c *conn) pop() {
	// Shift down rather than reslice, so that the slice keeps its room.
	n := copy(c.exp, c.exp[1:])
	c.exp[n] = expect{}
	c.exp = c.exp[:n]
	c.rs.phase, c.rs.results, c.rs.err, c.rs.skip = phaseFirst, 0, nil, 0
}

// drainLocal answers the requests answered by tetherd once it is their turn.
func (c *conn) drainLocal() {
	for !c.closed && len(c.exp) > 0 && c.exp[0].kind == expLocal {
		e := c.exp[0]
		c.pop()
		if e.r.Err == nil {
			e.r.Err = e.err
		}
		if e.last {
			c.finish(e.r)
		}
	}
}

// finish answers r to the pool; while a retry is held (holdOrder), once
// every request sent before it has been answered.
func (c *conn) finish(r *sqlpool.Request) {
	if c.closed {
		return
	}
	if !c.answers.Holding() {
		c.pc.Done(r) // the hot path: no retry in progress
		return
	}
	c.answers.Finish(r, c.isClosed, c.pc.Done) // Done may send more: Send keeps them in order
}

func (c *conn) isClosed() bool { return c.closed }

// stmt is a statement prepared on one connection.
type stmt struct {
	sql     string
	id      uint32
	nparams int
	hints   hints
	elem    *list.Element
}

// stmtCache keeps a connection's prepared statements by SQL text, the least
// recently used closed past its size.
type stmtCache struct {
	size int
	m    map[string]*stmt
	lru  list.List // front: most recently used
}

func (s *stmtCache) init(size int) {
	s.size = max(size, 1)
	s.m = make(map[string]*stmt)
	s.lru.Init()
}

func (s *stmtCache) get(sql string) *stmt {
	st := s.m[sql]
	if st != nil {
		s.lru.MoveToFront(st.elem)
	}
	return st
}

// put caches st, closing the least recently used statement on c when full.
func (s *stmtCache) put(st *stmt, c *conn) {
	if old := s.m[st.sql]; old != nil {
		s.lru.Remove(old.elem)
	}
	st.elem = s.lru.PushFront(st)
	s.m[st.sql] = st
	for len(s.m) > s.size {
		victim := s.lru.Remove(s.lru.Back()).(*stmt)
		delete(s.m, victim.sql)
		start := c.beginPacket()
		c.out = append(c.out, gomysql.COM_STMT_CLOSE)
		c.out = binary.LittleEndian.AppendUint32(c.out, victim.id)
		c.endPacket(start)
	}
}

// remove closes st on c, if it is the statement cached for its SQL.
func (s *stmtCache) remove(st *stmt, c *conn) {
	if s.m[st.sql] != st {
		return
	}
	s.lru.Remove(st.elem)
	delete(s.m, st.sql)
	start := c.beginPacket()
	c.out = append(c.out, gomysql.COM_STMT_CLOSE)
	c.out = binary.LittleEndian.AppendUint32(c.out, st.id)
	c.endPacket(start)
}

// clear forgets every statement (the server dropped them).
func (s *stmtCache) clear() {
	clear(s.m)
	s.lru.Init()
}

var _ sqlpool.ServerConn = (*conn)(nil)
