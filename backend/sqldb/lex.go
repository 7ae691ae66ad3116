package sqldb

import (
	"strings"
	"time"

	"github.com/tether-php/tether/internal/sqltext"
)

// Keywords returns the first n keywords of a statement, upper-cased (see
// sqltext.Keywords).
func Keywords(sql string, n int) []string { return sqltext.Keywords(sql, n) }

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
