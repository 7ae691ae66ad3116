package sqltables

import (
	"strings"
	"sync"
)

// Dialect selects the lexical rules and built-ins of a SQL dialect.
type Dialect uint8

const (
	// MySQL is MySQL and MariaDB with the default sql_mode: "x" is a
	// string, backslash escapes in strings, # and "-- " comments,
	// /*! */ and /*M! */ executable comments.
	MySQL Dialect = iota + 1
	// PostgreSQL is PostgreSQL with standard_conforming_strings on: "x" is
	// an identifier, E'' strings take backslash escapes, $$ and $tag$
	// quoting, nested comments, ::casts.
	PostgreSQL

	// ANSIQuotes, or-ed with MySQL, is sql_mode ANSI_QUOTES: "x" is an
	// identifier.
	ANSIQuotes Dialect = 1 << 6
	// NoBackslashEscapes, or-ed with MySQL, is sql_mode
	// NO_BACKSLASH_ESCAPES: a backslash in a string is an ordinary byte
	// (the server reports the mode in every OK packet's status flags).
	NoBackslashEscapes Dialect = 1 << 7
)

// Kind is what a statement does to tables.
type Kind uint8

const (
	// Other reads and writes no table: SET, BEGIN, COMMIT, CALL, DO, an
	// empty statement. CALL and the like are Other but not Certain.
	Other Kind = iota
	// Read only reads: SELECT, WITH ... SELECT, VALUES, TABLE, SHOW,
	// EXPLAIN of a read.
	Read
	// Write changes rows: INSERT, UPDATE, DELETE, REPLACE, MERGE, LOAD
	// DATA, TRUNCATE, COPY ... FROM, a PostgreSQL data-modifying WITH or
	// SELECT ... INTO new_table.
	Write
	// DDL changes the schema: CREATE, ALTER, DROP, RENAME.
	DDL
)

func (k Kind) String() string {
	switch k {
	case Read:
		return "read"
	case Write:
		return "write"
	case DDL:
		return "ddl"
	}
	return "other"
}

// rank orders kinds for a multi-statement string, which is as strong as its
// strongest statement.
func (k Kind) rank() int {
	switch k {
	case Read:
		return 1
	case Other:
		return 2
	case Write:
		return 3
	}
	return 4
}

// Info is what Analyze finds in a statement.
type Info struct {
	Kind Kind
	// Tables are the tables a Read reads, or the tables a Write or DDL
	// writes (creates, alters, drops, renames: old and new names), each
	// once, in order of appearance; nil for Other. A name is the
	// unqualified, unquoted, lower-cased table name: `db`.`T` and t give
	// "t". Matching on it can only over-invalidate (the same name in two
	// schemas, PostgreSQL's "T" and t), never miss a table. A name may
	// share memory with sql: strings.Clone one kept longer than sql.
	Tables []string
	// Certain is false when the analysis may have missed a table or a
	// write: an unterminated string or comment, unbalanced parentheses,
	// several statements, a CALL, a call of a function not known to be
	// read-only (it might write), a construct the lexer does not know. A
	// cache must then treat the statement as a write to every table
	// (drop the backend's cache) and must not cache its result.
	Certain bool
	// Cacheable is true for a Certain Read whose result depends only on
	// the rows of Tables (and the session's settings): no NOW(), RAND(),
	// variable, lock, FOR UPDATE, SELECT ... INTO or system table.
	Cacheable bool
	// Reason says why Cacheable is false: the first cause of uncertainty
	// when Certain is false, else the first non-cacheable construct, else
	// "not a read". Empty when Cacheable. It is a constant string: keeping
	// it allocates nothing.
	Reason string
	// Temporary is true when the statement creates a temporary table
	// (CREATE TEMPORARY TABLE, PostgreSQL SELECT ... INTO TEMP). From then
	// on the session's reads may name a table only it can see, which the
	// cache must not share with other sessions.
	Temporary bool
	// Session is true when the statement changes session state that later
	// statements' results may depend on: SET, USE, RESET, DISCARD,
	// PostgreSQL's set_config(). The cache must stop sharing the session's
	// reads with others (or key them on that state) from then on.
	Session bool
}

// Analyze returns what sql does to which tables. It is safe for concurrent
// use; it allocates the returned Tables and nothing else in the common case
// (an Analyzer allocates nothing).
func Analyze(d Dialect, sql string) Info {
	a := pool.Get().(*Analyzer)
	info := a.Analyze(d, sql)
	if info.Tables != nil {
		info.Tables = append([]string(nil), info.Tables...)
	}
	// Keep no reference to sql in the pool.
	clear(a.read)
	clear(a.written)
	a.lx.sql = ""
	pool.Put(a)
	return info
}

var pool = sync.Pool{New: func() any { return new(Analyzer) }}

// Analyzer analyzes statements with reusable scratch space. The zero value
// is ready to use; an Analyzer is not safe for concurrent use (keep one per
// event loop or connection).
type Analyzer struct {
	read, written []string
	// names maps identifiers that needed lower-casing or unquoting to the
	// result, so that a statement seen before allocates nothing.
	names  map[string]string
	levels [maxDepth]level

	lx              lexer
	mysql           bool
	depth           int
	kind            Kind // of the statement being analyzed
	certain         bool
	uncertainWhy    string
	uncacheableWhy  string
	temporary       bool
	session         bool
	peeked          token
	hasPeek         bool
	prev, prev2     token
	prevKw, prev2Kw keyword
	prevTable       bool // the previous token ended a table name
	newTable        bool // this token ended a table name
	pending         paren
	noArgs          bool // the call being opened is volatile without arguments
	noArgsWhy       string
	statements      int
	combined        Kind // of all statements so far
}

const (
	maxDepth  = 64   // parentheses deeper than this make the analysis uncertain
	maxTables = 64   // so do more tables than this in one string
	maxNames  = 4096 // lower-cased identifiers remembered before forgetting all
)

// stmt is the kind of clause a parenthesis level holds.
type stmt uint8

const (
	sNone   stmt = iota // an expression, or not known yet
	sSelect             // a query: FROM introduces tables
	sInsert
	sUpdate
	sDelete
	sMerge
	sFunc // a function's arguments
	sList // a column list, a type's arguments, options
)

// expect is what a level waits for next.
type expect uint8

const (
	eNone    expect = iota
	eTable          // a table reference (FROM, JOIN, ','): "name(" is a table function
	eTarget         // the table of INSERT, UPDATE, DELETE, MERGE: "name(" opens a column list
	eCTEName        // the name of a common table expression
)

// paren is what the next '(' opens.
type paren uint8

const (
	pNone paren = iota // decided by the level: a subquery, a table list, an expression
	pFunc
	pList
)

// level is the state of one parenthesis level of a statement.
type level struct {
	stmt     stmt
	expect   expect
	write    bool // a table named here is written
	from     bool // in a table list: ',' and JOIN bring another table
	head     bool // the next token is the level's first
	tablePos bool // the level was opened where a table was expected
	with     bool // in a WITH list, before the statement it qualifies
}

// Analyze returns what sql does to which tables. Info.Tables is valid until
// the next call; copy it to keep it.
func (a *Analyzer) Analyze(d Dialect, sql string) Info {
	a.start(d, sql)
	for {
		t := a.peek()
		if t.kind == tEOF {
			break
		}
		if t.kind == tError {
			a.next()
			break
		}
		if t.kind == tPunct && t.c == ';' {
			a.next()
			continue
		}
		a.statements++
		if a.statements == 2 {
			a.uncertain("several statements")
		}
		a.statement()
	}
	return a.result()
}

func (a *Analyzer) start(d Dialect, sql string) {
	base := d &^ (ANSIQuotes | NoBackslashEscapes)
	a.mysql = base != PostgreSQL
	a.lx.reset(sql, a.mysql, d&ANSIQuotes != 0, d&NoBackslashEscapes == 0)
	a.read = a.read[:0]
	a.written = a.written[:0]
	a.certain = base == MySQL || base == PostgreSQL && base == d
	a.uncertainWhy = ""
	if !a.certain {
		a.uncertainWhy = "unknown dialect"
	}
	a.uncacheableWhy = ""
	a.temporary = false
	a.session = false
	a.hasPeek = false
	a.prev, a.prev2 = token{}, token{}
	a.prevKw, a.prev2Kw = kwNone, kwNone
	a.prevTable, a.newTable = false, false
	a.pending = pNone
	a.noArgs = false
	a.statements = 0
	a.combined = Other
}

func (a *Analyzer) result() Info {
	info := Info{Kind: a.combined, Certain: a.certain, Temporary: a.temporary, Session: a.session}
	switch info.Kind {
	case Read:
		info.Tables = a.read
	case Write, DDL:
		info.Tables = a.written
	}
	if len(info.Tables) == 0 {
		info.Tables = nil
	}
	switch {
	case !a.certain:
		info.Reason = a.uncertainWhy
	case info.Kind != Read:
		info.Reason = "not a read"
	case a.uncacheableWhy != "":
		info.Reason = a.uncacheableWhy
	default:
		info.Cacheable = true
	}
	return info
}

func (a *Analyzer) uncertain(why string) {
	if a.certain {
		a.certain = false
		a.uncertainWhy = why
	}
}

func (a *Analyzer) uncacheable(why string) {
	if a.uncacheableWhy == "" {
		a.uncacheableWhy = why
	}
}

// write records that the statement writes, whatever it started as.
func (a *Analyzer) write() {
	if a.kind == Read || a.kind == Other {
		a.kind = Write
	}
}

func (a *Analyzer) next() token {
	var t token
	if a.hasPeek {
		a.hasPeek = false
		t = a.peeked
	} else {
		t = a.lx.next()
	}
	if t.kind == tError {
		a.uncertain(a.lx.err)
	}
	return t
}

func (a *Analyzer) peek() token {
	if !a.hasPeek {
		a.peeked = a.lx.next()
		a.hasPeek = true
	}
	return a.peeked
}

func (a *Analyzer) peekPunct(c byte) bool {
	t := a.peek()
	return t.kind == tPunct && t.c == c
}

// peekWord returns the keyword of the next token if it is a word.
func (a *Analyzer) peekWord() *wordInfo {
	t := a.peek()
	if t.kind != tWord {
		return &noWord
	}
	return lookup(a.text(t))
}

func (a *Analyzer) text(t token) string { return a.lx.sql[t.pos:t.end] }

// shift makes t the previous token.
func (a *Analyzer) shift(t token, kw keyword) {
	a.prev2, a.prev2Kw = a.prev, a.prevKw
	a.prev, a.prevKw = t, kw
}

func isPunct(t token, c byte) bool { return t.kind == tPunct && t.c == c }

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
		}
	case kwLock:
		lv.from = false
		if a.peekWord().kw == kwIn {
			a.uncacheable("is a locking read (LOCK IN SHARE MODE)")
		}
	case kwEndFrom:
		if a.prevKw != kwFor { // USE INDEX FOR ORDER BY (i)
			lv.from = false
		}
	case kwCalcFoundRows:
		a.uncacheable("uses SQL_CALC_FOUND_ROWS, which sets FOUND_ROWS()")
	case kwNext:
		if a.peekWord().kw == kwValue {
			a.uncacheable("uses a sequence (NEXT VALUE FOR)")
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

// addTable records a table read or written.
func (a *Analyzer) addTable(schema, name token, write bool) {
	n := a.ident(name)
	if n == "" {
		a.uncertain("empty table name")
		return
	}
	list := &a.read
	if write {
		list = &a.written
	} else {
		if schema.kind != tEOF {
			if isSystemSchema(a.ident(schema)) {
				a.uncacheable("reads a system schema, which changes without writes")
			}
		} else if !a.mysql && strings.HasPrefix(n, "pg_") {
			a.uncacheable("reads a system catalog, which changes without writes")
		}
	}
	for _, s := range *list {
		if s == n {
			return
		}
	}
	if len(*list) >= maxTables {
		a.uncertain("too many tables")
		return
	}
	*list = append(*list, n)
}

func isSystemSchema(s string) bool {
	switch s {
	case "information_schema", "performance_schema", "mysql", "sys", "pg_catalog", "pg_toast":
		return true
	}
	return false
}

// ident returns the identifier t unquoted and lower-cased, allocating only
// the first time a spelling that needs changing is seen.
func (a *Analyzer) ident(t token) string {
	raw := a.text(t)
	if t.kind == tWord {
		if isLowerASCII(raw) {
			return raw
		}
	} else if t.kind == tQuoted {
		open := 1
		if raw[0] == 'U' || raw[0] == 'u' {
			open = 3 // U&"..."
		}
		inner := raw[open : len(raw)-1]
		if isLowerASCII(inner) && strings.IndexByte(inner, raw[len(raw)-1]) < 0 {
			return inner
		}
	} else {
		return ""
	}
	if s, ok := a.names[raw]; ok {
		return s
	}
	var s string
	if t.kind == tWord {
		s = strings.ToLower(raw)
	} else {
		open := 1
		if raw[0] == 'U' || raw[0] == 'u' {
			open = 3
		}
		q := raw[len(raw)-1:]
		s = strings.ToLower(strings.ReplaceAll(raw[open:len(raw)-1], q+q, q))
	}
	if a.names == nil || len(a.names) >= maxNames {
		a.names = make(map[string]string)
	}
	a.names[strings.Clone(raw)] = s
	return s
}

func isLowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return false
		}
	}
	return true
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
