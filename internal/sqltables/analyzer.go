package sqltables

import (
	"strings"
	"sync"
)

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
	primaryWhy      string // why the statement must run on the primary
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
	a.primaryWhy = ""
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
	a.replicaResult(&info)
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
			if s := a.ident(schema); isSystemSchema(s) {
				a.uncacheable("reads a system schema, which changes without writes")
				a.systemTable(s, n)
			}
		} else if !a.mysql && strings.HasPrefix(n, "pg_") {
			a.uncacheable("reads a system catalog, which changes without writes")
			a.systemTable("", n)
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
