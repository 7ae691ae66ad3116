package sqltables

import "strings"

// This file holds the statements that are not queries or DML: DDL, LOAD,
// COPY, EXPLAIN, SHOW and the statements that touch no table.

// statementHead dispatches on a statement's first word; stop means the
// statement has been consumed.
func (a *Analyzer) statementHead(t token, wi *wordInfo, lv *level) (stop bool) {
	if t.kind != tWord {
		a.uncertain("unknown statement")
		a.skipRest()
		return true
	}
	switch wi.kw {
	case kwSelect, kwValues, kwTable, kwWith:
		a.kind = Read
		a.startStatement(wi, lv)
		return false
	case kwInsert, kwReplace, kwUpdate, kwDelete, kwMerge:
		a.kind = Write
		if a.startStatement(wi, lv) {
			return false
		}
	case kwCreate:
		a.kind = DDL
		a.create()
		return true
	case kwAlter:
		a.kind = DDL
		a.alter()
		return true
	case kwDrop:
		a.kind = DDL
		a.drop()
		return true
	case kwRename:
		a.kind = DDL
		a.rename()
		return true
	case kwTruncate:
		a.kind = Write
		a.truncate()
		return true
	case kwLoad:
		a.kind = Write
		a.load()
		return true
	case kwRefresh:
		if !a.mysql && a.objectWord(false) == kwView {
			// REFRESH MATERIALIZED VIEW [CONCURRENTLY] v
			a.kind = Write
			if t := a.peek(); t.kind == tWord && strings.EqualFold(a.text(t), "concurrently") {
				a.next()
			}
			a.addName()
			a.skipRest()
			return true
		}
	case kwCopy:
		if !a.mysql {
			return a.copy()
		}
	case kwShow:
		a.kind = Read
		a.uncacheable("is a SHOW, HELP, HANDLER or CHECK, which reads server state")
		a.showReplica(t)
		a.skipRest()
		return true
	case kwExplain, kwAnalyze:
		return a.explain(wi.kw, lv)
	case kwSet:
		// SET runs expressions: the main loop checks their functions.
		a.kind = Other
		a.session = true
		return false
	case kwSession:
		a.kind = Other
		a.session = true
		a.skipRest()
		return true
	case kwDo:
		a.kind = Other
		if a.mysql {
			return false // DO expr, ...: as SET
		}
		a.uncertain("DO runs a code block, which might write")
		a.skipRest()
		return true
	case kwCall:
		a.kind = Other
		a.uncertain("calls a procedure or prepared statement, which might write")
		a.skipRest()
		return true
	case kwBegin:
		a.kind = Other
		if a.peekWord().kw == kwNot {
			a.uncertain("is a compound statement (BEGIN NOT ATOMIC), which might write")
		}
		a.skipRest()
		return true
	case kwQuiet, kwLock: // LOCK TABLES t WRITE, LOCK TABLE t
		a.kind = Other
		a.skipRest()
		return true
	}
	a.kind = Other
	a.uncertain("unknown statement")
	a.skipRest()
	return true
}

// explain handles EXPLAIN, DESCRIBE and ANALYZE: the statement they wrap
// is analyzed (EXPLAIN ANALYZE runs it: a wrapped write counts as a write),
// and a read is not cacheable.
func (a *Analyzer) explain(kw keyword, lv *level) bool {
	for {
		t := a.peek()
		switch {
		case t.kind == tEOF || t.kind == tError || isPunct(t, ';'):
			if kw == kwAnalyze {
				a.kind = Other // ANALYZE [TABLE] t: statistics
			} else {
				a.kind = Read // DESCRIBE t
				a.uncacheable("is an EXPLAIN or DESCRIBE")
			}
			return false
		case isPunct(t, '('):
			a.skipParens() // EXPLAIN (ANALYZE, FORMAT JSON)
		case t.kind == tWord:
			wi := lookup(a.text(t))
			if wi.kw == kwFor && a.mysql {
				// EXPLAIN FOR CONNECTION n: a connection of one server.
				a.uncacheable("is an EXPLAIN or DESCRIBE")
				a.primary("is an EXPLAIN FOR CONNECTION, which names a connection of one server")
			}
			switch wi.kw {
			case kwSelect, kwValues, kwTable, kwWith, kwInsert, kwReplace, kwUpdate, kwDelete, kwMerge:
				if wi.kw == kwTable && kw == kwAnalyze {
					break // MySQL's ANALYZE TABLE t
				}
				a.next()
				a.uncacheable("is an EXPLAIN or ANALYZE")
				return a.statementHead(t, wi, lv)
			}
			a.next()
		default:
			a.next()
		}
	}
}

// skipParens consumes a parenthesized group.
func (a *Analyzer) skipParens() {
	depth := 0
	for {
		t := a.next()
		switch {
		case t.kind == tEOF || t.kind == tError:
			a.uncertain("unbalanced parentheses")
			return
		case isPunct(t, '('):
			depth++
		case isPunct(t, ')'):
			depth--
			if depth == 0 {
				return
			}
		}
	}
}

// rest consumes the rest of the statement, its ';' included, calling visit
// (if not nil) for each word outside parentheses; visit may consume tokens.
func (a *Analyzer) rest(visit func(t token, wi *wordInfo)) {
	depth := 0
	for {
		t := a.next()
		switch t.kind {
		case tEOF, tError:
			if depth != 0 {
				a.uncertain("unbalanced parentheses")
			}
			return
		case tPunct:
			switch t.c {
			case '(':
				depth++
			case ')':
				depth--
				if depth < 0 {
					a.uncertain("unbalanced parentheses")
					depth = 0
				}
			case ';':
				if depth != 0 {
					a.uncertain("unbalanced parentheses")
				}
				return
			}
		case tWord:
			if depth == 0 && visit != nil {
				visit(t, lookup(a.text(t)))
			}
		}
	}
}

func (a *Analyzer) skipRest() { a.rest(nil) }

// readName reads a possibly qualified name, skipping ONLY.
func (a *Analyzer) readName() (schema, name token, ok bool) {
	for {
		t := a.peek()
		if t.kind == tQuoted {
			break
		}
		if t.kind != tWord {
			return schema, name, false
		}
		wi := lookup(a.text(t))
		if wi.kw == kwOnly && !a.mysql {
			a.next()
			continue
		}
		if wi.reserved {
			return schema, name, false
		}
		break
	}
	name = a.next()
	for a.peekPunct('.') {
		a.next()
		t := a.peek()
		if t.kind != tWord && t.kind != tQuoted {
			break
		}
		a.next()
		schema, name = name, t
	}
	return schema, name, true
}

// addName reads a name and records it as written.
func (a *Analyzer) addName() bool {
	schema, name, ok := a.readName()
	if !ok {
		a.uncertain("expected a table name")
		return false
	}
	a.addTable(schema, name, true)
	return true
}

// objectWord consumes the words before the kind of object a DDL statement
// names (OR REPLACE, TEMPORARY, DEFINER = ..., UNIQUE ...) and returns its
// keyword: kwTable, kwView, kwIndex, kwObject, or kwNone.
func (a *Analyzer) objectWord(create bool) keyword {
	for i := 0; i < 32; i++ {
		t := a.peek()
		if t.kind == tEOF || t.kind == tError || isPunct(t, ';') || isPunct(t, '(') {
			return kwNone
		}
		a.next()
		if t.kind != tWord {
			continue
		}
		switch kw := lookup(a.text(t)).kw; kw {
		case kwTemporary:
			if create {
				a.temporary = true
			}
		case kwTable, kwView, kwIndex, kwObject:
			return kw
		}
	}
	return kwNone
}

// skipIfExists consumes IF [NOT] EXISTS.
func (a *Analyzer) skipIfExists() {
	if a.peekWord().kw != kwIf {
		return
	}
	a.next()
	if a.peekWord().kw == kwNot {
		a.next()
	}
	if a.peekWord().kw == kwExists {
		a.next()
	}
}

// onTable consumes up to ON outside parentheses and records the table
// after it (CREATE INDEX i ON t, MySQL's DROP INDEX i ON t).
func (a *Analyzer) onTable(required bool) {
	found := false
	a.rest(func(t token, wi *wordInfo) {
		if wi.kw == kwOn && !found {
			found = true
			a.addName()
		}
	})
	if required && !found {
		a.uncertain("expected ON table")
	}
}

func (a *Analyzer) create() {
	switch a.objectWord(true) {
	case kwTable, kwView:
		a.skipIfExists()
		a.addName()
		a.skipRest()
	case kwIndex:
		a.onTable(true)
	default:
		a.uncertain("creates an object other than a table, view or index")
		a.skipRest()
	}
}

func (a *Analyzer) alter() {
	switch a.objectWord(false) {
	case kwTable:
		a.skipIfExists()
		if !a.addName() {
			a.skipRest()
			return
		}
		a.rest(func(t token, wi *wordInfo) {
			switch wi.kw {
			case kwRename:
				// RENAME [TO|AS] new (MySQL), RENAME TO new (PostgreSQL);
				// not RENAME [COLUMN] a TO b, RENAME INDEX ...
				switch a.peekWord().kw {
				case kwTo, kwAs:
					a.next()
					a.addName()
				case kwColumn, kwIndex:
				default:
					if a.mysql {
						a.addName()
					}
				}
			case kwTable:
				a.addName() // EXCHANGE PARTITION p WITH TABLE t2
			}
		})
	case kwView:
		a.addName()
		a.skipRest()
	case kwIndex:
		a.skipRest() // an index changes no result
	default:
		a.uncertain("alters an object other than a table, view or index")
		a.skipRest()
	}
}

func (a *Analyzer) drop() {
	switch a.objectWord(false) {
	case kwTable, kwView:
		a.skipIfExists()
		for a.addName() && a.peekPunct(',') {
			a.next()
		}
		a.cascade()
	case kwIndex:
		if a.mysql {
			a.onTable(false)
		} else {
			a.cascade()
		}
	default:
		a.uncertain("drops an object other than a table, view or index")
		a.skipRest()
	}
}

// cascade consumes the rest of a statement in which PostgreSQL's CASCADE
// reaches tables not named.
func (a *Analyzer) cascade() {
	a.rest(func(t token, wi *wordInfo) {
		if wi.kw == kwCascade && !a.mysql {
			a.uncertain("CASCADE reaches tables it does not name")
		}
	})
}

// rename handles MySQL's RENAME TABLE a TO b, c TO d.
func (a *Analyzer) rename() {
	if a.peekWord().kw != kwTable {
		a.uncertain("renames an object other than a table")
		a.skipRest()
		return
	}
	a.next()
	for a.addName() && a.peekWord().kw == kwTo {
		a.next()
		if !a.addName() || !a.peekPunct(',') {
			break
		}
		a.next()
	}
	a.skipRest()
}

// truncate handles TRUNCATE [TABLE] [ONLY] a [*], b ... [CASCADE].
func (a *Analyzer) truncate() {
	if a.peekWord().kw == kwTable {
		a.next()
	}
	for a.addName() {
		if a.peekPunct('*') {
			a.next()
		}
		if !a.peekPunct(',') {
			break
		}
		a.next()
	}
	a.cascade()
}

// load handles LOAD DATA|XML ... INTO TABLE t.
func (a *Analyzer) load() {
	found := false
	a.rest(func(t token, wi *wordInfo) {
		if wi.kw == kwInto && !found && a.peekWord().kw == kwTable {
			found = true
			a.next()
			a.addName()
		}
	})
	if !found {
		a.uncertain("LOAD without INTO TABLE")
	}
}

// copy handles PostgreSQL's COPY t FROM (a write), COPY t TO and
// COPY (query) TO (reads that are not cacheable). It reports whether the
// statement has been consumed.
func (a *Analyzer) copy() bool {
	a.uncacheable("is a COPY")
	// COPY ... TO a file or PROGRAM acts on the server's host; TO STDOUT
	// would do on a replica, but is not told apart (when unsure, the
	// primary).
	a.primary("is a COPY, which may write a file of the server or run a program")
	if a.peekPunct('(') {
		a.kind = Read // the main loop analyzes the query
		return false
	}
	schema, name, ok := a.readName()
	if !ok {
		a.kind = Other
		a.uncertain("expected a table name after COPY")
		a.skipRest()
		return true
	}
	var dir keyword
	a.rest(func(t token, wi *wordInfo) {
		if dir == kwNone && (wi.kw == kwFrom || wi.kw == kwTo) {
			dir = wi.kw
		}
	})
	switch dir {
	case kwFrom:
		a.kind = Write
		a.addTable(schema, name, true)
	case kwTo:
		a.kind = Read
		a.addTable(schema, name, false)
	default:
		a.kind = Other
		a.uncertain("COPY without FROM or TO")
	}
	return true
}
