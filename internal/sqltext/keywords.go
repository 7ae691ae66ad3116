// Package sqltext holds the smallest look at a SQL statement's text that
// several packages share: its leading keywords. It imports nothing of
// tetherd's, so that the root package and the backends can both use it.
package sqltext

import "strings"

// Keywords returns the first n keywords of a statement, upper-cased, skipping
// leading white space, comments and parentheses. It is a lexical look at the
// statement's head, enough to tell what kind of statement it is.
func Keywords(sql string, n int) []string {
	words := make([]string, 0, n)
	for i := 0; len(words) < n; {
		var w string
		if w, i = next(sql, i); w == "" {
			break
		}
		words = append(words, strings.ToUpper(w))
	}
	return words
}

// First returns a statement's first word as it is written (not upper-cased:
// compare it with strings.EqualFold), past white space, comments and opening
// parentheses; "" when the text starts with none. It does not allocate.
func First(sql string) string {
	w, _ := next(sql, 0)
	return w
}

// next returns the word that starts at i or after white space, comments,
// parentheses and semicolons there, and the index just past it; "" when
// something else (a quote, an operator, the end) comes first.
func next(sql string, i int) (string, int) {
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' || c == ';':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-', c == '#':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return "", len(sql)
			}
			i += end + 4
		case isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			return sql[i:j], j
		default:
			return "", i
		}
	}
	return "", i
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// ContainsFold reports whether sql contains word, an upper-case ASCII word,
// in any case. It does not allocate.
func ContainsFold(sql, word string) bool {
	n := len(word)
	for i := 0; i+n <= len(sql); i++ {
		j := 0
		for j < n {
			c := sql[i+j]
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			if c != word[j] {
				break
			}
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}
