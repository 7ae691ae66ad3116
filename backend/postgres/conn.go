package postgres

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlconn"
	"github.com/tether-php/tether/backend/sqlpool"
)

// conn is one PostgreSQL server connection driven by the event loop, in the
// extended protocol: each statement is parsed once per connection under a
// name of its own (Parse, Describe, Sync), then run with Bind, Execute and
// Sync, its parameters bound, never interpolated. Requests are written as they
// come, behind the earlier ones (pipelined: every one ends with its own Sync,
// so an error in one does not touch the next), and their answers decoded as
// they arrive, rows straight into the request's sink. Loop goroutine only,
// once dialled.
//
// A schema change behind a prepared statement (ALTER TABLE, DROP and CREATE
// of a table, by any client) makes the server refuse its next Bind: "cached
// plan must not change result type" (0A000), or an error of analysis
// (class 42) when it is analysed again with the parameter types inferred at
// its prepare. A Bind that fails has run nothing, so outside a transaction
// the statement is closed, prepared again and run once more, and its answer
// given in turn (retry); in a transaction, which the error has aborted, the
// request gets tx_aborted naming the schema change (ErrSchemaChanged), and
// the statement is prepared afresh at its next use. DDL that runs through
// tetherd also retires, on every connection of the backend, the statements
// that name its tables before they are used again (schemaGens), so that
// they do not meet the error at all, inside transactions too.
type conn struct {
	// The socket, the requests waiting behind a prepare (a Bind needs the
	// parameter types the prepare's answer brings), the answers awaited
	// (Exp), their order while a statement runs again after a stale
	// prepare (retry).
	sqlconn.Conn[expect, *expect]

	drv    *driver
	pid    uint32
	secret []byte
	addr   net.Addr    // where a CancelRequest goes
	tlsCfg *tls.Config // the session's TLS config, which its CancelRequest goes over too; nil: none

	stmts     sqlconn.StmtCache[*stmt]
	nextName  uint64
	scratch   []byte
	txChecked bool // a statement in the open transaction was checked: check again at its end

	// txDDL: DDL ran in the open transaction; its tables' statements are
	// retired again when it ends (txDDLTables, or all of them).
	txDDL       bool
	txDDLAll    bool
	txDDLTables []string
}

type expectKind uint8

const (
	expLocal   expectKind = iota // no message: a request answered by tetherd, in its turn (Await.Local)
	expPrepare                   // Parse, Describe, Sync
	expExec                      // Bind, Execute, Sync of a prepared statement
	expSimple                    // a simple Query of tetherd's own
	expCheck                     // checkSQL
	expVar                       // SELECT current_setting of the variable a SET set
	expApply                     // an unnamed Parse, Bind, Execute, Sync of tetherd's own
	expClose                     // Close of an evicted statement, Sync
)

// expect is one answer awaited (up to its ReadyForQuery), and its request
// (Await; none for expClose).
type expect struct {
	sqlconn.Await
	kind expectKind
	st   *stmt
	// expExec: bound once BindComplete came (the statement runs from
	// then on); stale is the error of a Bind refused for a schema change;
	// retries: how many times the statement was prepared again for it.
	bound   bool
	stale   *pgconn.PgError
	retries uint8
}

// maxStaleRetries bounds how many times one request's statement is prepared
// again after a Bind refused for a schema change. One is not enough: a
// migration's steps can commit one after another faster than a retry goes
// round under load, and each refused Bind ran nothing, so trying again is
// safe; the bound ends a loop with DDL that never stops.
const maxStaleRetries = 3

// Head implements sqlconn.Entry.
func (e *expect) Head() *sqlconn.Await { return &e.Await }

var errMalformed = errors.New("postgres: malformed message")

// Attach implements sqlpool.ServerConn.
func (c *conn) Attach(pc *sqlpool.Conn) {
	c.Start(pc, c.drv.loop(), c)
	c.stmts.Init(c.drv.stmtCacheSize, c.writeClose)
}

// String implements sqlpool.ServerConn.
func (c *conn) String() string { return "postgres pid " + strconv.FormatUint(uint64(c.pid), 10) }

// Close implements sqlpool.ServerConn: Terminate if the socket takes it now,
// then close.
func (c *conn) Close() { c.CloseSocket([]byte{'X', 0, 0, 0, 4}) }

// WriteRequest implements sqlconn.Protocol.
func (c *conn) WriteRequest(r *sqlpool.Request) {
	switch r.Kind {
	case sqlpool.KindQuery, sqlpool.KindExec:
		st := c.stmts.Get(r.SQL)
		if st != nil && c.drv.schema.changed(st) {
			c.stmts.Remove(st.sql, st) // DDL through tetherd changed a table it names: closed
			st = nil
		}
		if st == nil {
			c.prepare(r, 0)
			return
		}
		c.execute(r, st, 0)
	case sqlpool.KindBegin:
		c.txChecked = false
		c.simple(r, "BEGIN", true)
	case sqlpool.KindCommit, sqlpool.KindRollback:
		sql := "COMMIT"
		if r.Kind == sqlpool.KindRollback {
			sql = "ROLLBACK"
		}
		c.simple(r, sql, !c.txChecked)
		if c.txChecked {
			// What a SET LOCAL set is over now; what a SET set is not.
			c.txChecked = false
			c.simple(r, checkSQL, true)
			c.Exp[len(c.Exp)-1].kind = expCheck
		}
	case sqlpool.KindApply:
		c.apply(r)
	case sqlpool.KindReset:
		// DISCARD ALL drops the statements; ROLLBACK undoes a transaction's DDL.
		c.stmts.Clear()
		c.txDDL, c.txDDLAll, c.txDDLTables = false, false, nil
		for i, sql := range resetSQL {
			c.simple(r, sql, i == len(resetSQL)-1)
		}
	case sqlpool.KindProbe:
		c.simple(r, "SELECT 1", true)
	default:
		c.Local(r, fmt.Errorf("postgres: request kind %s", r.Kind))
	}
}

// prepare writes Parse, Describe and Sync of a new statement for r; its
// execution follows the answer. retries: how many times r's statement was
// prepared again after a Bind the server refused (maxStaleRetries at most).
func (c *conn) prepare(r *sqlpool.Request, retries uint8) {
	c.nextName++
	st := &stmt{sql: r.SQL, name: "tether_" + strconv.FormatUint(c.nextName, 10)}
	st.check, st.checkVar = checkFor(r.SQL, c.drv.pooled)
	c.drv.schema.analyze(st)
	c.Out, _ = (&pgproto3.Parse{Name: st.name, Query: r.SQL}).Encode(c.Out)
	c.Out, _ = (&pgproto3.Describe{ObjectType: 'S', Name: st.name}).Encode(c.Out)
	c.Out = appendSync(c.Out)
	c.Exp = append(c.Exp, expect{kind: expPrepare, Await: sqlconn.Await{R: r}, st: st, retries: retries})
	c.Blocked++
}

// writeClose closes st on the server (sqlconn.StmtCache), after whatever
// was written before, which may still use it.
func (c *conn) writeClose(st *stmt) {
	c.Out, _ = (&pgproto3.Close{ObjectType: 'S', Name: st.name}).Encode(c.Out)
	c.Out = appendSync(c.Out)
	c.Exp = append(c.Exp, expect{kind: expClose})
}

// simple writes a simple Query of tetherd's own.
func (c *conn) simple(r *sqlpool.Request, sql string, last bool) {
	c.Out, _ = (&pgproto3.Query{String: sql}).Encode(c.Out)
	c.Exp = append(c.Exp, expect{kind: expSimple, Await: sqlconn.Await{R: r, Last: last}})
}

// execute writes Bind, Execute and Sync for r on the prepared st, and the
// session check after them when st needs it. retries: how many times st was
// prepared again for r after a stale Bind.
func (c *conn) execute(r *sqlpool.Request, st *stmt, retries uint8) {
	if len(r.Params) != len(st.params) {
		c.Local(r, tether.Errorf(tether.CodeBadRequest, "expected %d arguments, got %d", len(st.params), len(r.Params)))
		return
	}
	start := len(c.Out)
	c.Out = append(c.Out, 'B', 0, 0, 0, 0, 0) // length, unnamed portal
	c.Out = append(c.Out, st.name...)
	c.Out = append(c.Out, 0)
	n := len(r.Params)
	c.Out = binary.BigEndian.AppendUint16(c.Out, uint16(n))
	formats := len(c.Out)
	for i := 0; i < n; i++ {
		c.Out = append(c.Out, 0, 0)
	}
	c.Out = binary.BigEndian.AppendUint16(c.Out, uint16(n))
	for i, v := range r.Params {
		var f int16
		var err error
		if c.Out, f, err = appendParam(c.Out, st.params[i], v); err != nil {
			c.Out = c.Out[:start]
			c.Local(r, tether.Errorf(tether.CodeBadRequest, "parameter %d: %s", i+1, err))
			return
		}
		binary.BigEndian.PutUint16(c.Out[formats+2*i:], uint16(f))
	}
	c.Out = append(c.Out, st.resultFormats...)
	binary.BigEndian.PutUint32(c.Out[start+1:], uint32(len(c.Out)-start-1))
	c.Out = append(c.Out, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0) // Execute: unnamed portal, all rows
	c.Out = appendSync(c.Out)
	switch st.check {
	case checkNone:
		c.Exp = append(c.Exp, expect{kind: expExec, Await: sqlconn.Await{R: r, Last: true}, st: st, retries: retries})
		return
	case checkUnpooled:
		r.AddUnpooled("a variable that is not pooled was set")
		c.Exp = append(c.Exp, expect{kind: expExec, Await: sqlconn.Await{R: r, Last: true}, st: st, retries: retries})
		return
	}
	// The server is asked, in the same round trip, what the statement left
	// behind. In a transaction, it is asked again at its end (a ROLLBACK
	// undoes a SET).
	if c.PC.InTx() {
		c.txChecked = true
	}
	c.Exp = append(c.Exp, expect{kind: expExec, Await: sqlconn.Await{R: r}, st: st, retries: retries})
	if st.check == checkVar {
		c.Out, _ = (&pgproto3.Query{String: "SELECT current_setting('" + st.checkVar + "')"}).Encode(c.Out)
		c.Exp = append(c.Exp, expect{kind: expVar, Await: sqlconn.Await{R: r, Last: true}, st: st})
		return
	}
	c.Out, _ = (&pgproto3.Query{String: checkSQL}).Encode(c.Out)
	c.Exp = append(c.Exp, expect{kind: expCheck, Await: sqlconn.Await{R: r, Last: true}})
}

// apply writes the set_config statement that brings the session's pooled
// variables to r.Profile.
func (c *conn) apply(r *sqlpool.Request) {
	d := sqlpool.DiffProfiles(c.PC.Profile(), r.Profile)
	if d.Empty() {
		c.Local(r, nil)
		return
	}
	n := len(d.Set) + len(d.Reset)
	c.Out, _ = (&pgproto3.Parse{Query: applySQL(n)}).Encode(c.Out)
	params := make([][]byte, 0, 2*n)
	for _, s := range d.Set {
		params = append(params, []byte(s.Name), []byte(s.Value))
	}
	for _, name := range d.Reset {
		params = append(params, []byte(name), nil)
	}
	c.Out, _ = (&pgproto3.Bind{Parameters: params}).Encode(c.Out)
	c.Out = append(c.Out, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0)
	c.Out = appendSync(c.Out)
	c.Exp = append(c.Exp, expect{kind: expApply, Await: sqlconn.Await{R: r, Last: true}})
}

func appendSync(b []byte) []byte { return append(b, 'S', 0, 0, 0, 4) }

// Parse implements sqlconn.Protocol: it handles every whole message read.
func (c *conn) Parse() {
	for !c.Closed() {
		b := c.Peek(5)
		if b == nil {
			return
		}
		n := int(binary.BigEndian.Uint32(b[1:]))
		if n < 4 {
			c.Fail(errMalformed)
			return
		}
		m, whole := c.Take(1 + n)
		if !whole {
			return
		}
		c.handle(m[0], m[5:])
	}
}

// handle decodes one message: the asynchronous ones wherever they come, the
// rest as part of the answer awaited first.
func (c *conn) handle(typ byte, body []byte) {
	switch typ {
	case 'N': // NoticeResponse
		return
	case 'S': // ParameterStatus: a reported variable changed
		var ps pgproto3.ParameterStatus
		if ps.Decode(body) != nil || len(c.Exp) == 0 || c.Exp[0].R == nil {
			return
		}
		c.drv.reportParameter(c.Exp[0].R, ps.Name, ps.Value)
		return
	case 'A': // NotificationResponse
		if len(c.Exp) > 0 && c.Exp[0].R != nil {
			c.Exp[0].R.AddUnpooled("LISTEN")
		}
		return
	}
	if len(c.Exp) == 0 {
		if typ == 'E' {
			c.Fail(fmt.Errorf("the server closed the session: %w", parseError(body)))
		} else {
			c.Fail(fmt.Errorf("protocol error: message %q nobody waited for", typ))
		}
		return
	}
	e := &c.Exp[0]
	r := e.R
	if typ == 'E' {
		switch {
		case e.kind == expCheck || e.kind == expVar:
			// The statement's outcome stands; the session is not trusted.
			r.AddUnpooled("session check failed: " + parseError(body).Error())
		case e.kind == expExec && !e.bound && e.stale == nil && r.Err == nil:
			pe := parseError(body)
			if staleCode(pe.Code) {
				e.stale = pe // decided at ReadyForQuery: retry, or answer
				return
			}
			r.Err = c.drv.classify(pe)
		case r != nil && r.Err == nil:
			r.Err = c.drv.classify(parseError(body))
		}
		return // ReadyForQuery follows
	}
	if typ == 'Z' {
		c.ready(e, body)
		return
	}
	switch e.kind {
	case expPrepare:
		st := e.st
		switch typ {
		case 't':
			var pd pgproto3.ParameterDescription
			if pd.Decode(body) != nil {
				c.Fail(errMalformed)
				return
			}
			st.params = append([]uint32(nil), pd.ParameterOIDs...)
		case 'T':
			var rd pgproto3.RowDescription
			if rd.Decode(body) != nil {
				c.Fail(errMalformed)
				return
			}
			st.setColumns(rd.Fields)
		}
	case expExec:
		switch typ {
		case '2': // BindComplete: the columns are known from the prepare
			e.bound = true
			if r.Kind == sqlpool.KindQuery {
				r.Sink.Columns(len(e.st.cols))
				for i := range e.st.cols {
					r.Sink.Column(e.st.cols[i].name)
				}
			}
		case 'D':
			if r.Kind != sqlpool.KindQuery || r.Err != nil {
				return
			}
			if err := c.decodeRow(r, e.st, body); err != nil {
				c.Fail(err)
			}
		case 'C':
			if r.Kind == sqlpool.KindExec {
				r.Affected = affectedRows(body)
			}
		}
	case expSimple:
		if typ == 'C' && r.Kind == sqlpool.KindCommit && r.Err == nil && strings.HasPrefix(string(body), "ROLLBACK") {
			r.Err = &tether.Error{Code: tether.CodeBackendError, BackendCode: "25P02",
				Message: "postgres: the transaction was rolled back, not committed: a statement in it had failed"}
		}
	case expCheck:
		if typ == 'D' {
			c.checkRow(r, body)
		}
	case expVar:
		if typ == 'D' {
			var dr pgproto3.DataRow
			if dr.Decode(body) != nil || len(dr.Values) != 1 {
				r.AddUnpooled("session variable unreadable")
				return
			}
			if r.Report == nil {
				r.Report = &sqlpool.Report{}
			}
			r.Report.Settings = append(r.Report.Settings, sqlpool.Setting{Name: e.st.checkVar, Value: string(dr.Values[0])})
		}
	}
}

// ready handles the ReadyForQuery that ends an answer.
func (c *conn) ready(e *expect, body []byte) {
	r := e.R
	if len(body) < 1 {
		c.Fail(errMalformed)
		return
	}
	// The last ReadyForQuery of a request says where its session stands: a
	// statement prepared inside a transaction that it then ends (ROLLBACK)
	// was 'T' after its Parse and is 'I' after it ran.
	if r != nil && body[0] != 'I' {
		if r.Report == nil {
			r.Report = &sqlpool.Report{}
		}
		r.Report.InTx = true
	} else if r != nil && r.Report != nil {
		r.Report.InTx = false
	}
	switch e.kind {
	case expPrepare:
		st, retries := e.st, e.retries
		c.Pop()
		c.Blocked--
		if r.Err != nil {
			c.Finish(r)
			c.WritePending()
			return
		}
		if st.resultFormats == nil {
			st.resultFormats = []byte{0, 0}
		}
		c.stmts.Put(st.sql, st)
		c.execute(r, st, retries)
		c.WritePending()
		return
	case expExec:
		if e.stale != nil {
			c.staleBind(e, body[0])
			return
		}
		if e.st.ddl && r.Err == nil {
			c.ddlDone(e.st, body[0] != 'I')
		}
	case expSimple:
		if (r.Kind == sqlpool.KindCommit || r.Kind == sqlpool.KindRollback) && c.txDDL {
			// The COMMIT or ROLLBACK itself (its session check, when one
			// follows, is expCheck): committed, or rolled back to the schema
			// before, the statements prepared in between are stale.
			c.drv.schema.bump(c.txDDLTables, c.txDDLAll)
			c.txDDL, c.txDDLAll, c.txDDLTables = false, false, nil
		}
	case expCheck:
		if r.Report == nil {
			r.Report = &sqlpool.Report{}
		}
		r.Report.Snapshot = true
	}
	last := e.Last
	c.Pop()
	if last && r != nil {
		c.Finish(r)
	}
	c.DrainLocal()
}

// staleBind handles the end of an answer whose Bind the server refused for a
// schema change (e.stale), with status the session's transaction status
// after it. The statement ran nothing. It is retired on this connection;
// outside a transaction it is prepared again and run once more, its answer
// held so that requests are answered in the order sent; in one, or when it
// was retried maxStaleRetries times already, the request fails.
func (c *conn) staleBind(e *expect, status byte) {
	r, st, pe, last, retries := e.R, e.st, e.stale, e.Last, e.retries
	c.Pop()
	c.stmts.Remove(st.sql, st)
	if status == 'I' && retries < maxStaleRetries && !r.State.Abandoned {
		c.HoldForRetry(r) // the session check written after it: the retry writes its own
		c.prepare(r, retries+1)
		c.FlushLater()
		return
	}
	switch {
	case status == 'I':
		r.Err = c.drv.classify(pe)
	case pe.Code == "0A000" || pe.Code == "26000" || pe.Code == "42804" || pe.Code == "42883":
		// Errors a statement prepared now would not meet.
		r.Err = &tether.Error{Code: tether.CodeTxAborted, Retry: true, BackendCode: pe.Code,
			Message: "postgres: the schema changed under a prepared statement (" + pe.Message + "), which aborted the transaction: " +
				"roll it back and run it again; the statement is prepared afresh at its next use",
			Err: fmt.Errorf("%w: %w", ErrSchemaChanged, pe)}
	default:
		r.Err = c.drv.classify(pe) // what a fresh prepare would answer too (42P01: the table is gone)
	}
	if last {
		c.Finish(r)
	}
	c.DrainLocal()
}

// staleCode reports whether an error of a Bind (before BindComplete) comes
// from the statement's plan going stale: the result type changed (0A000), the
// statement is gone (26000), or its analysis again, with the parameter types
// of its prepare, failed (class 42: an operator for a column whose type
// changed, a table dropped). Other errors of a Bind are the parameters'.
func staleCode(code string) bool {
	return code == "0A000" || code == "26000" || strings.HasPrefix(code, "42")
}

// ddlDone retires, on every connection, the statements that name the tables
// a DDL statement changed; in a transaction, again when it ends.
func (c *conn) ddlDone(st *stmt, inTx bool) {
	c.drv.schema.bump(st.ddlTables, st.ddlAll)
	if inTx {
		c.txDDL = true
		c.txDDLAll = c.txDDLAll || st.ddlAll
		c.txDDLTables = append(c.txDDLTables, st.ddlTables...)
	}
}

// decodeRow hands a DataRow's cells to the request's sink.
func (c *conn) decodeRow(r *sqlpool.Request, st *stmt, b []byte) error {
	if len(b) < 2 {
		return errMalformed
	}
	n := int(binary.BigEndian.Uint16(b))
	if n != len(st.cols) {
		return errMalformed
	}
	pos := 2
	r.Sink.BeginRow()
	for i := 0; i < n; i++ {
		if len(b) < pos+4 {
			return errMalformed
		}
		l := int32(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		if l < 0 {
			r.Sink.Nil()
			continue
		}
		if len(b) < pos+int(l) {
			return errMalformed
		}
		col := &st.cols[i]
		var err error
		if c.scratch, err = decodeCell(r.Sink, col.oid, col.bin, b[pos:pos+int(l)], c.scratch); err != nil {
			return err
		}
		pos += int(l)
	}
	if err := r.Sink.EndRow(); err != nil { // the result passed max_result_bytes (tether.RowSink)
		r.Err = &tether.Error{Code: tether.CodeTooLarge, Err: err, Message: "postgres: result is over max_result_bytes"}
	}
	return nil
}

// checkRow reads one row of checkSQL's answer into the request's report.
func (c *conn) checkRow(r *sqlpool.Request, b []byte) {
	var dr pgproto3.DataRow
	if dr.Decode(b) != nil || len(dr.Values) != 2 {
		r.AddUnpooled("session check unreadable")
		return
	}
	name, value := string(dr.Values[0]), string(dr.Values[1])
	if r.Report == nil {
		r.Report = &sqlpool.Report{}
	}
	if strings.HasPrefix(name, "@") {
		r.AddUnpooled(name[1:])
		return
	}
	lname := strings.ToLower(name)
	if c.drv.pooled[lname] {
		r.Report.Settings = append(r.Report.Settings, sqlpool.Setting{Name: lname, Value: value})
		return
	}
	r.AddUnpooled("session variable " + name + " (not pooled)")
}

// affectedRows reads the row count from a CommandComplete tag ("INSERT 0 3",
// "UPDATE 2", "SELECT 5"); 0 for tags without one.
func affectedRows(body []byte) int64 {
	end := len(body)
	for end > 0 && body[end-1] == 0 {
		end--
	}
	var n int64
	i := end
	for i > 0 && body[i-1] >= '0' && body[i-1] <= '9' {
		i--
	}
	if i == end || i == 0 || body[i-1] != ' ' {
		return 0
	}
	for _, d := range body[i:end] {
		n = n*10 + int64(d-'0')
	}
	return n
}

// stmt is a statement prepared on one connection.
type stmt struct {
	sql           string
	name          string
	params        []uint32 // the parameters' inferred types
	cols          []pgColumn
	resultFormats []byte // the Bind message's result format codes, encoded
	check         check  // what to ask the server after it
	checkVar      string // the variable a checkVar statement sets

	// What DDL through tetherd makes it stale (schemaGens): the tables it
	// names, or any DDL (anyTable: the analysis was not certain), since
	// generation gen. ddl: the statement is DDL itself, of ddlTables (or of
	// unknown objects: ddlAll).
	tables    []string
	anyTable  bool
	gen       uint64
	ddl       bool
	ddlAll    bool
	ddlTables []string
}

type pgColumn struct {
	name []byte
	oid  uint32
	bin  bool
}

// setColumns records the columns of a RowDescription and the result formats
// to ask for them in.
func (st *stmt) setColumns(fields []pgproto3.FieldDescription) {
	st.cols = make([]pgColumn, len(fields))
	st.resultFormats = binary.BigEndian.AppendUint16(nil, uint16(len(fields)))
	for i, f := range fields {
		bin := binaryResult(f.DataTypeOID)
		st.cols[i] = pgColumn{name: append([]byte(nil), f.Name...), oid: f.DataTypeOID, bin: bin}
		format := uint16(0)
		if bin {
			format = 1
		}
		st.resultFormats = binary.BigEndian.AppendUint16(st.resultFormats, format)
	}
}

var _ sqlpool.ServerConn = (*conn)(nil)
