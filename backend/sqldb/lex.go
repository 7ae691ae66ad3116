package sqldb

import (
	"strings"
	"time"
)

// Keywords returns the first n keywords of a statement, upper-cased, skipping
// leading white space, comments and parentheses. It is a lexical look at the
// statement's head, enough to tell what kind of statement it is.
func Keywords(sql string, n int) []string {
	words := make([]string, 0, n)
	i := 0
	for i < len(sql) && len(words) < n {
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
				return words
			}
			i += end + 4
		case isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			words = append(words, strings.ToUpper(sql[i:j]))
			i = j
		default:
			return words
		}
	}
	return words
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// ContainsFold reports whether sql contains any of the (upper-case) needles,
// ignoring case.
func ContainsFold(sql string, needles ...string) bool {
	up := strings.ToUpper(sql)
	for _, n := range needles {
		if strings.Contains(up, n) {
			return true
		}
	}
	return false
}

// CreatesTemp reports whether the statement is CREATE TEMP[ORARY] ...
func CreatesTemp(words []string) bool {
	return len(words) >= 2 && words[0] == "CREATE" &&
		(words[1] == "TEMP" || words[1] == "TEMPORARY" ||
			len(words) >= 3 && (words[1] == "GLOBAL" || words[1] == "LOCAL") && (words[2] == "TEMP" || words[2] == "TEMPORARY"))
}

// Time layouts of the protocol's value mapping.
const (
	LayoutDate      = "2006-01-02"
	LayoutTime      = "15:04:05.999999"
	LayoutDateTime  = "2006-01-02T15:04:05.999999"
	LayoutTimestamp = time.RFC3339Nano
)
