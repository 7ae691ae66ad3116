package sqltables

import "strings"

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // an unquoted identifier or keyword
	tQuoted         // a quoted identifier: `x` (MySQL) or "x" (PostgreSQL)
	tString         // a string literal
	tNumber         // a numeric literal
	tParam          // a placeholder: ?, $1
	tVar            // a MySQL @user or @@system variable
	tCast           // PostgreSQL ::
	tPunct          // any other single byte
	tError          // an unterminated string, quoted identifier or comment
)

// token is a slice sql[pos:end] of the statement; c is the byte of a tPunct.
type token struct {
	kind     tokKind
	c        byte
	pos, end int
}

// lexer splits a statement into tokens, skipping white space and comments.
// It never allocates.
type lexer struct {
	sql    string
	pos    int
	mysql  bool
	ansi   bool   // MySQL's ANSI_QUOTES: "x" is an identifier
	bs     bool   // backslash escapes in MySQL strings (not NO_BACKSLASH_ESCAPES)
	inExec bool   // inside a MySQL /*! ... */ executable comment
	err    string // why the last tError token
}

func (l *lexer) reset(sql string, mysql, ansi, bs bool) {
	*l = lexer{sql: sql, mysql: mysql, ansi: ansi, bs: bs}
}

func (l *lexer) fail(pos int, why string) token {
	l.err = why
	l.pos = len(l.sql)
	l.inExec = false
	return token{kind: tError, pos: pos, end: len(l.sql)}
}

// next returns the next token; after a tError or at the end, tEOF.
func (l *lexer) next() token {
	s := l.sql
	for l.pos < len(s) {
		i := l.pos
		c := s[i]
		// The common bytes first, by table.
		switch class[c] {
		case cSpace:
			l.pos++
			continue
		case cWord:
			if l.mysql || c != 'E' && c != 'e' && c != 'U' && c != 'u' {
				j := i + 1
				for j < len(s) && class[s[j]] >= cWord {
					j++
				}
				l.pos = j
				return token{kind: tWord, pos: i, end: j}
			}
		case cPunct:
			l.pos++
			return token{kind: tPunct, c: c, pos: i, end: i + 1}
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (!l.mysql || i+2 == len(s) || s[i+2] <= ' '):
			// MySQL wants "-- " (or a control character): "1--1" is 1 - -1.
			l.skipLine()
		case c == '#' && l.mysql:
			l.skipLine()
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if l.mysql && !l.inExec && i+2 < len(s) && (s[i+2] == '!' || s[i+2] == 'M' && i+3 < len(s) && s[i+3] == '!') {
				// An executable comment: its content is SQL that MySQL
				// (/*! */) or MariaDB (/*M! */) runs, so it is lexed as
				// code; the optional version number is skipped.
				j := i + 3
				if s[i+2] == 'M' {
					j++
				}
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
				l.pos = j
				l.inExec = true
				continue
			}
			if !l.skipComment() {
				return l.fail(i, "unterminated comment")
			}
		case c == '*' && l.inExec && i+1 < len(s) && s[i+1] == '/':
			l.pos += 2
			l.inExec = false
		case c == '\'':
			return l.quoted(i, i, '\'', l.mysql && l.bs, tString)
		case c == '"':
			if l.mysql && !l.ansi {
				return l.quoted(i, i, '"', l.bs, tString)
			}
			return l.quoted(i, i, '"', false, tQuoted)
		case c == '`' && l.mysql:
			return l.quoted(i, i, '`', false, tQuoted)
		case isIdentStart(c):
			if !l.mysql {
				// E'..' strings take backslash escapes; U&'..' and U&".."
				// are standard strings and identifiers.
				if (c == 'E' || c == 'e') && i+1 < len(s) && s[i+1] == '\'' {
					return l.quoted(i, i+1, '\'', true, tString)
				}
				if (c == 'U' || c == 'u') && i+2 < len(s) && s[i+1] == '&' && (s[i+2] == '\'' || s[i+2] == '"') {
					if s[i+2] == '"' {
						return l.quoted(i, i+2, '"', false, tQuoted)
					}
					return l.quoted(i, i+2, '\'', false, tString)
				}
			}
			j := i + 1
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			l.pos = j
			return token{kind: tWord, pos: i, end: j}
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (isIdentByte(s[j]) || s[j] == '.' ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			l.pos = j
			return token{kind: tNumber, pos: i, end: j}
		case c == '$' && !l.mysql:
			return l.dollar(i)
		case c == '?':
			l.pos++
			return token{kind: tParam, pos: i, end: i + 1}
		case c == '@' && l.mysql:
			return l.variable(i)
		case c == ':' && !l.mysql && i+1 < len(s) && s[i+1] == ':':
			l.pos += 2
			return token{kind: tCast, pos: i, end: i + 2}
		default:
			l.pos++
			return token{kind: tPunct, c: c, pos: i, end: i + 1}
		}
	}
	if l.inExec {
		return l.fail(len(s), "unterminated executable comment")
	}
	return token{kind: tEOF, pos: len(s), end: len(s)}
}

func (l *lexer) skipLine() {
	j := strings.IndexByte(l.sql[l.pos:], '\n')
	if j < 0 {
		l.pos = len(l.sql)
		return
	}
	l.pos += j + 1
}

// skipComment skips a /* */ comment at l.pos; PostgreSQL's nest. It reports
// false if the comment does not end.
func (l *lexer) skipComment() bool {
	s := l.sql
	depth := 0
	for j := l.pos; j+1 < len(s); {
		switch {
		case s[j] == '/' && s[j+1] == '*':
			if depth == 0 || !l.mysql {
				depth++
			}
			j += 2
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				l.pos = j
				return true
			}
		default:
			j++
		}
	}
	return false
}

// quoted lexes a string or quoted identifier whose opening quote q is at
// open (start is the token's first byte, before any prefix). A doubled quote
// stands for one; backslash escapes the next byte when bs.
func (l *lexer) quoted(start, open int, q byte, bs bool, kind tokKind) token {
	s := l.sql
	for j := open + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if bs {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			l.pos = j + 1
			return token{kind: kind, pos: start, end: j + 1}
		}
	}
	if kind == tQuoted {
		return l.fail(start, "unterminated quoted identifier")
	}
	return l.fail(start, "unterminated string")
}

// dollar lexes what starts with '$' in PostgreSQL: a parameter ($1), a
// dollar-quoted string ($$..$$, $tag$..$tag$) or a lone '$'.
func (l *lexer) dollar(i int) token {
	s := l.sql
	j := i + 1
	if j < len(s) && s[j] >= '0' && s[j] <= '9' {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		l.pos = j
		return token{kind: tParam, pos: i, end: j}
	}
	if j < len(s) && isIdentStart(s[j]) {
		for j < len(s) && isIdentByte(s[j]) && s[j] != '$' {
			j++
		}
	}
	if j >= len(s) || s[j] != '$' {
		l.pos = i + 1
		return token{kind: tPunct, c: '$', pos: i, end: i + 1}
	}
	tag := s[i : j+1]
	k := strings.Index(s[j+1:], tag)
	if k < 0 {
		return l.fail(i, "unterminated dollar-quoted string")
	}
	l.pos = j + 1 + k + len(tag)
	return token{kind: tString, pos: i, end: l.pos}
}

// variable lexes a MySQL @name, @'name', @`name` or @@[scope.]name.
func (l *lexer) variable(i int) token {
	s := l.sql
	j := i + 1
	if j < len(s) && s[j] == '@' {
		j++
	}
	if j < len(s) && (s[j] == '\'' || s[j] == '"' || s[j] == '`') {
		t := l.quoted(i, j, s[j], s[j] != '`', tVar)
		if t.kind == tError {
			return t
		}
		return token{kind: tVar, pos: i, end: t.end}
	}
	for j < len(s) && (isIdentByte(s[j]) || s[j] == '.') {
		j++
	}
	l.pos = j
	return token{kind: tVar, pos: i, end: j}
}

// Byte classes: cPunct bytes are always a token of their own; cWord and
// cDigit bytes continue an identifier ('$' too).
const (
	cOther = iota
	cSpace
	cPunct
	cWord
	cDigit
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch b := byte(c); {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v':
			t[c] = cSpace
		case b >= '0' && b <= '9', b == '$':
			t[c] = cDigit
		case isIdentStart(b):
			t[c] = cWord
		case b == '(' || b == ')' || b == ',' || b == '.' || b == '=' || b == ';' || b == '<' || b == '>' ||
			b == '+' || b == '%' || b == '!' || b == '|' || b == '&' || b == '^' || b == '~' || b == '[' ||
			b == ']' || b == '{' || b == '}':
			t[c] = cPunct
		}
	}
	return t
}()

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentByte(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}
