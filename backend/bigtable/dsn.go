package bigtable

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// EmulatorInProcess is the DSN's emulator value that runs the Go client's
// in-memory emulator (bttest) inside tetherd: for development only, nothing
// is durable.
const EmulatorInProcess = "inprocess"

// DSN is a parsed data source name:
//
//	bigtable://PROJECT/INSTANCE[?app_profile=ID][&emulator=HOST:PORT|inprocess][&table=NAME:FAM,FAM...][&metrics=false]
//
// Without emulator=, the BIGTABLE_EMULATOR_HOST environment variable (as the
// client library reads it) selects an emulator; otherwise tetherd reaches
// Cloud Bigtable with Application Default Credentials.
type DSN struct {
	Project, Instance string
	AppProfile        string // the app profile of every data request; "" is the instance's default
	// Emulator is "" (Cloud Bigtable), a host:port, or EmulatorInProcess.
	Emulator string
	// Tables are created at Open, with their column families, when missing.
	// Only on an emulator: on Cloud Bigtable tables belong to their owner.
	Tables []TableSpec
	// Metrics enables the client library's built-in export of client-side
	// metrics to Cloud Monitoring (its default). Always off on an emulator.
	Metrics bool
}

// TableSpec is a table to create on an emulator, from table=NAME:FAM,FAM.
type TableSpec struct {
	Name     string
	Families []string
}

// ParseDSN parses s; see DSN for the format. It reads BIGTABLE_EMULATOR_HOST
// when s names no emulator.
func ParseDSN(s string) (DSN, error) {
	bad := func(format string, args ...any) (DSN, error) {
		return DSN{}, fmt.Errorf("bigtable: dsn %q: %s", s, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, "bigtable://")
	if !ok {
		return bad("must start with bigtable://")
	}
	path, query, _ := strings.Cut(rest, "?")
	// Not url.Parse: a legacy project ID ("example.com:proj") is not a host.
	project, instance, ok := strings.Cut(path, "/")
	if !ok || project == "" || instance == "" || strings.Contains(instance, "/") {
		return bad("want bigtable://PROJECT/INSTANCE")
	}
	d := DSN{Project: project, Instance: instance, Metrics: true}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := q[k]
		if k != "table" && len(vs) > 1 {
			return bad("%s is given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "app_profile":
			d.AppProfile = v
		case "emulator":
			if v == "" {
				return bad("emulator: want host:port or %s", EmulatorInProcess)
			}
			d.Emulator = v
		case "metrics":
			if d.Metrics, err = strconv.ParseBool(v); err != nil {
				return bad("metrics: want true or false, got %q", v)
			}
		case "table":
			for _, v := range vs {
				ts, err := parseTableSpec(v)
				if err != nil {
					return bad("table=%s: %v", v, err)
				}
				d.Tables = append(d.Tables, ts)
			}
		default:
			return bad("unknown parameter %q (known: app_profile, emulator, metrics, table)", k)
		}
	}
	if d.Emulator == "" {
		d.Emulator = os.Getenv("BIGTABLE_EMULATOR_HOST")
	}
	if len(d.Tables) > 0 && d.Emulator == "" {
		return bad("table= creates tables and is only allowed on an emulator")
	}
	if d.Emulator != "" {
		d.Metrics = false
	}
	return d, nil
}

func parseTableSpec(s string) (TableSpec, error) {
	name, fams, _ := strings.Cut(s, ":")
	if !validTableName(name) {
		return TableSpec{}, fmt.Errorf("bad table name %q", name)
	}
	ts := TableSpec{Name: name}
	if fams == "" {
		return ts, nil
	}
	for f := range strings.SplitSeq(fams, ",") {
		if !validFamilyName(f) {
			return TableSpec{}, fmt.Errorf("bad column family name %q", f)
		}
		ts.Families = append(ts.Families, f)
	}
	return ts, nil
}

// validTableName reports a Bigtable table ID: [_a-zA-Z0-9][-_.a-zA-Z0-9]*,
// at most 50 characters.
func validTableName(s string) bool {
	if s == "" || len(s) > 50 || s[0] == '-' || s[0] == '.' {
		return false
	}
	return allNameChars(s)
}

// validFamilyName reports a column family name: [-_.a-zA-Z0-9]+, at most 64
// characters.
func validFamilyName(s string) bool {
	return s != "" && len(s) <= 64 && allNameChars(s)
}

func allNameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
