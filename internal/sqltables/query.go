package sqltables

import "strings"

// This file holds the walk over queries and DML: SELECT, WITH, VALUES,
// TABLE, INSERT, REPLACE, UPDATE, DELETE, MERGE, and the expressions of SET
// and DO, one parenthesis level at a time.

// statement analyzes one statement, up to and including its ';'.
func (a *Analyzer) statement() {
	a.depth = 0
	a.levels[0] = level{head: true}
	a.kind = Other
	a.pending = pNone
	a.run()
	if a.statements == 1 || a.kind.rank() > a.combined.rank() {
		a.combined = a.kind
	}
}

// run is the main loop over one statement's tokens.
func (a *Analyzer) run() {
	for {
		t := a.next()
		lv := &a.levels[a.depth]
		kw := kwNone
		if lv.head && t.kind != tWord && t.kind != tQuoted && !isPunct(t, '(') {
			// A level that starts with neither a word nor '('.
			lv.head = false
			if a.depth == 0 {
				a.uncertain("unknown statement")
				if t.kind != tEOF && t.kind != tError && !isPunct(t, ';') {
					a.skipRest()
				}
				return
			}
		}
		switch t.kind {
		case tEOF, tError:
			a.end()
			return
		case tWord, tQuoted:
			var stop bool
			kw, stop = a.word(t, lv)
			if stop {
				return
			}
		case tPunct:
			switch t.c {
			case ';':
				a.end()
				return
			case '(':
				a.open(lv)
			case ')':
				a.notTable(lv)
				if a.depth == 0 {
					a.uncertain("unbalanced parentheses")
				} else {
					a.depth--
				}
			case ',':
				if lv.with {
					lv.expect = eCTEName
				} else if lv.from && lv.expect == eNone {
					lv.expect = eTable
				}
			case '.', '*':
				// t.* and PostgreSQL's "ONLY t *" stay where they are.
			default:
				a.notTable(lv)
			}
		case tVar:
			a.uncacheable("uses a user or system variable")
			// A user variable has a value only in the session, on the
			// primary (a replica's is NULL); := and INTO set it; a system
			// variable may differ between servers (read_only, server_id).
			a.primary("uses a user or system variable, which lives in the session on the primary or differs between servers")
			a.notTable(lv)
		case tString:
			if !a.mysql && isNowLiteral(a.text(t)) {
				a.uncacheable("casts 'now', 'today', 'tomorrow' or 'yesterday' to a date or time")
			}
			a.notTable(lv)
		default:
			a.notTable(lv)
		}
		a.prevTable, a.newTable = a.newTable, false
		a.shift(t, kw)
	}
}

// end checks the state at the end of a statement.
func (a *Analyzer) end() {
	if a.depth > 0 {
		a.uncertain("unbalanced parentheses")
	}
	if e := a.levels[0].expect; e == eTable || e == eTarget {
		a.uncertain("statement ends where a table name was expected")
	}
}

// notTable handles a token that is no table name.
func (a *Analyzer) notTable(lv *level) {
	if lv.expect == eTable || lv.expect == eTarget {
		a.uncertain("unexpected token where a table name was expected")
		lv.expect = eNone
	}
}

// open enters a parenthesis.
func (a *Analyzer) open(lv *level) {
	p := a.pending
	a.pending = pNone
	if a.depth+1 >= maxDepth {
		a.uncertain("parentheses nested too deep")
		a.skipRest()
		return
	}
	nl := level{head: true}
	switch {
	case p == pFunc:
		nl = level{stmt: sFunc}
		if a.noArgs && a.peekPunct(')') {
			a.uncacheable(a.noArgsWhy)
		}
		a.noArgs = false
	case p == pList:
		nl = level{stmt: sList}
	case lv.expect == eTable || lv.expect == eTarget:
		lv.expect = eNone
		nl.tablePos = true
		nl.write = lv.write
	case lv.head:
		// A statement or level that starts with '(': (SELECT ...) UNION ...
		lv.head = false
		if a.depth == 0 {
			a.kind = Read
			lv.stmt = sSelect
		}
		nl.tablePos = lv.tablePos
		nl.write = lv.write
	}
	a.depth++
	a.levels[a.depth] = nl
}

// word handles a word or quoted identifier; stop means the statement has
// been consumed.
func (a *Analyzer) word(t token, lv *level) (kw keyword, stop bool) {
	wi := &noWord
	afterDot := isPunct(a.prev, '.')
	if t.kind == tWord && !afterDot {
		wi = lookup(a.text(t))
	}
	if lv.head {
		lv.head = false
		if a.depth == 0 {
			return wi.kw, a.statementHead(t, wi, lv)
		}
		if a.subHead(t, wi, lv) {
			return wi.kw, false
		}
	}
	if lv.with {
		if lv.expect == eCTEName {
			if wi.kw != kwRecursive {
				lv.expect = eNone
				if a.peekPunct('(') {
					a.pending = pList // name(a, b) AS (...)
				}
			}
			return wi.kw, false
		}
		if t.kind == tWord && wi.kw != kwWith && a.startStatement(wi, lv) {
			lv.with = false
			return wi.kw, false
		}
	}
	if lv.expect == eTable || lv.expect == eTarget {
		switch {
		case wi.kw == kwModifier && a.mysql && lv.expect == eTarget, wi.kw == kwInto && lv.expect == eTarget,
			wi.kw == kwOnly && !a.mysql, wi.kw == kwLateral && lv.expect == eTable:
			return wi.kw, false
		}
		if t.kind == tQuoted || !wi.reserved {
			a.tableName(t, lv)
			return kwNone, false
		}
		if !(lv.stmt == sDelete && wi.kw == kwFrom) {
			a.uncertain("unexpected keyword where a table name was expected")
		}
		lv.expect = eNone
	}
	if a.peekPunct('(') {
		switch {
		case wi.nofn && !afterDot:
			// IN (...), EXISTS (...), VALUES (...): a list or subquery.
		case a.prevKw == kwAs || isPunct(a.prev, ')') || a.prev.kind == tCast || a.prevTable:
			// AS alias(a, b), ::numeric(10,2), CAST(x AS DECIMAL(10,2)).
			a.pending = pList
		default:
			var qual token
			if afterDot {
				qual = a.prev2
			}
			a.call(t, wi, qual)
			a.pending = pFunc
		}
	} else if wi.bare == bareBoth || wi.bare == bareMySQL && a.mysql || wi.bare == barePG && !a.mysql {
		a.uncacheable(wi.reason)
	}
	a.keyword(wi, lv)
	return wi.kw, false
}

// call checks a call of the function t, qualified by qual unless that is
// the zero token.
func (a *Analyzer) call(t token, wi *wordInfo, qual token) {
	if qual.kind != tEOF {
		// schema.f(): a stored function unless the schema is pg_catalog.
		if a.mysql || qual.kind != tWord || !strings.EqualFold(a.text(qual), "pg_catalog") {
			a.uncertain("calls a schema-qualified function, which might write")
			return
		}
		wi = lookup(a.text(t))
	}
	switch wi.fn {
	case fnSafe:
		a.noArgs = wi.noArgs
		a.noArgsWhy = wi.reason
		return
	case fnVolatile:
		a.uncacheable(wi.reason)
		a.session = a.session || wi.session
		if wi.primary != "" {
			a.primary(wi.primary)
		}
		return
	}
	if t.kind == tWord {
		name := a.text(t)
		switch {
		case hasPrefixFold(name, "json_"), hasPrefixFold(name, "jsonb_"), hasPrefixFold(name, "st_"),
			hasPrefixFold(name, "xml"):
			return
		case !a.mysql && (hasPrefixFold(name, "pg_") || hasPrefixFold(name, "txid_")):
			a.uncacheable("calls a PostgreSQL system function")
			if !wi.replica {
				a.primary("calls a PostgreSQL system function not known to be harmless on a replica (locks, notifications, server state)")
			}
			return
		}
	}
	a.uncertain("calls a function not known to be read-only, which might write")
}

// keyword acts on a keyword in the body of a statement.
func (a *Analyzer) keyword(wi *wordInfo, lv *level) {
	switch wi.kw {
	case kwSelect:
		lv.stmt = sSelect
		lv.write = false
		lv.from = false
	case kwValues:
		if lv.stmt != sInsert {
			lv.stmt = sSelect
			lv.write = false
			lv.from = false
		}
	case kwFrom:
		if a.prevKw == kwDistinct && (a.prev2Kw == kwIs || a.prev2Kw == kwNot) {
			return // IS [NOT] DISTINCT FROM
		}
		switch lv.stmt {
		case sSelect, sDelete, sUpdate:
			lv.expect = eTable
			lv.from = true
		}
	case kwJoin:
		if lv.from && a.prevKw != kwFor { // not USE INDEX FOR JOIN (i)
			lv.expect = eTable
		}
	case kwUsing:
		switch {
		case lv.stmt == sDelete && !a.peekPunct('('): // not JOIN ... USING (col)
			// PostgreSQL's DELETE ... USING lists tables it reads;
			// MySQL's lists the tables of the join it deletes from.
			if !a.mysql {
				lv.write = false
			}
			lv.from = true
			lv.expect = eTable
		case lv.stmt == sMerge:
			lv.write = false
			lv.expect = eTable
		}
	case kwSet:
		lv.from = false
		if lv.stmt == sUpdate {
			lv.write = false // PostgreSQL's UPDATE ... SET ... FROM reads
		}
	case kwInto:
		lv.from = false
		if lv.stmt == sSelect {
			a.selectInto(lv)
		}
	case kwTable:
		if lv.expect == eNone && (lv.stmt == sSelect || lv.stmt == sInsert) {
			// UNION TABLE t, INSERT INTO t TABLE u
			lv.stmt = sSelect
			lv.write = false
			lv.expect = eTable
		}
	case kwFor:
		// Not the end of a table list: USE INDEX FOR JOIN (i), MariaDB's
		// FOR SYSTEM_TIME ... may be followed by ", t2".
		switch a.peekWord().kw {
		case kwUpdate, kwShare, kwColumn: // FOR UPDATE, FOR SHARE, FOR NO KEY UPDATE, FOR KEY SHARE
			lv.from = false
			a.uncacheable("is a locking read (FOR UPDATE, FOR SHARE)")
			a.primary("is a locking read (FOR UPDATE, FOR SHARE), whose locks must be the primary's")
		}
	case kwLock:
		lv.from = false
		if a.peekWord().kw == kwIn {
			a.uncacheable("is a locking read (LOCK IN SHARE MODE)")
			a.primary("is a locking read (LOCK IN SHARE MODE), whose locks must be the primary's")
		}
	case kwEndFrom:
		if a.prevKw != kwFor { // USE INDEX FOR ORDER BY (i)
			lv.from = false
		}
	case kwCalcFoundRows:
		a.uncacheable("uses SQL_CALC_FOUND_ROWS, which sets FOUND_ROWS()")
		// The FOUND_ROWS() that follows runs on the primary.
		a.primary("uses SQL_CALC_FOUND_ROWS, which sets the session's FOUND_ROWS()")
	case kwNext:
		if a.peekWord().kw == kwValue {
			a.uncacheable("uses a sequence (NEXT VALUE FOR)")
			a.primary("uses a sequence (NEXT VALUE FOR, PREVIOUS VALUE FOR), which the primary owns")
		}
	}
}

// startStatement starts the statement a level holds (SELECT, WITH,
// INSERT ...); it reports false for a word that starts none.
func (a *Analyzer) startStatement(wi *wordInfo, lv *level) bool {
	switch wi.kw {
	case kwSelect, kwValues:
		lv.stmt = sSelect
		lv.write = false
	case kwTable:
		lv.stmt = sSelect
		lv.write = false
		lv.expect = eTable
	case kwWith:
		lv.with = true
		lv.write = false
		lv.expect = eCTEName
	case kwInsert, kwReplace, kwUpdate, kwDelete, kwMerge:
		if a.peekPunct('(') {
			return false // REPLACE(s, a, b)
		}
		a.dmlHead(wi.kw, lv)
	default:
		return false
	}
	return true
}

// subHead handles the first word inside a parenthesis; it reports whether
// the word was consumed.
func (a *Analyzer) subHead(t token, wi *wordInfo, lv *level) bool {
	// A data-modifying statement in parentheses is PostgreSQL's WITH x AS
	// (UPDATE ...): the statement writes (dmlHead says so).
	if t.kind == tWord && a.startStatement(wi, lv) {
		return true
	}
	if lv.tablePos && (t.kind == tQuoted || !wi.reserved) {
		// FROM (a JOIN b ON ...): a parenthesized table list.
		lv.from = true
		lv.expect = eTable
	}
	return false
}

// dmlHead starts an INSERT, REPLACE, UPDATE, DELETE or MERGE.
func (a *Analyzer) dmlHead(kw keyword, lv *level) {
	a.write()
	lv.write = true
	lv.expect = eTarget
	switch kw {
	case kwInsert, kwReplace:
		lv.stmt = sInsert
	case kwUpdate:
		lv.stmt = sUpdate
		lv.from = true // MySQL: UPDATE t1, t2 / t1 JOIN t2
	case kwDelete:
		lv.stmt = sDelete
		lv.from = true // MySQL: DELETE t1, t2 FROM ...
	case kwMerge:
		lv.stmt = sMerge
	}
}

// tableName reads a possibly qualified table name starting at first and
// records it, or checks it as a function if it is followed by '(' in FROM.
func (a *Analyzer) tableName(first token, lv *level) {
	var schema token
	name := first
	for a.peekPunct('.') {
		a.next()
		t := a.peek()
		if t.kind != tWord && t.kind != tQuoted {
			break
		}
		a.next()
		schema, name = name, t
	}
	exp := lv.expect
	lv.expect = eNone
	a.newTable = true
	if a.peekPunct('(') {
		if exp == eTable {
			// FROM generate_series(1, 3): a table function.
			a.newTable = false
			a.call(name, lookup(a.text(name)), schema)
			a.pending = pFunc
			return
		}
		a.pending = pList
	}
	if a.mysql && schema.kind == tEOF && name.kind == tWord && strings.EqualFold(a.text(name), "dual") {
		return
	}
	a.addTable(schema, name, lv.write)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isNowLiteral(s string) bool {
	if len(s) < 5 || len(s) > 11 || s[0] != '\'' {
		return false
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	return strings.EqualFold(s, "now") || strings.EqualFold(s, "today") ||
		strings.EqualFold(s, "tomorrow") || strings.EqualFold(s, "yesterday")
}

// selectInto handles INTO in a query: PostgreSQL creates a table from the
// result; MySQL sets variables or writes a file.
func (a *Analyzer) selectInto(lv *level) {
	if a.mysql {
		a.uncacheable("is a SELECT ... INTO")
		a.primary("is a SELECT ... INTO, which sets variables or writes a file")
		return
	}
	for {
		t := a.peek()
		if t.kind != tWord && t.kind != tQuoted {
			a.uncertain("unexpected token after SELECT ... INTO")
			return
		}
		a.next()
		if t.kind == tWord {
			switch lookup(a.text(t)).kw {
			case kwTemporary:
				a.temporary = true
				continue
			case kwTable:
				continue
			}
			if strings.EqualFold(a.text(t), "unlogged") {
				continue
			}
		}
		save := lv.write
		lv.write = true
		lv.expect = eTarget
		a.tableName(t, lv)
		lv.write = save
		a.write()
		a.uncacheable("is a SELECT ... INTO")
		return
	}
}
