package cassandra

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	tether "github.com/tether-php/tether"
)

// Defaults of the DSN's query parameters (docs/cassandra.md).
const (
	DefaultPort              = 9042
	DefaultPageSize          = 5000
	DefaultTimeout           = 11 * time.Second // above Cassandra's own read (5s) and range (10s) timeouts
	DefaultReconnectInterval = time.Second
	DefaultMaxValueBytes     = 16 << 20 // Cassandra's default max_mutation_size: half of a 32 MiB commit log segment
	DefaultRequestsPerConn   = 256      // in-flight requests allowed per pooled connection (max_requests)
)

// config is a parsed DSN plus the pool settings of tether.BackendConfig.
type config struct {
	hosts            []string // host:port
	keyspace         string   // may be empty: tables are then named "keyspace.table"
	username         string
	password         string
	consistency      gocql.Consistency
	serial           gocql.Consistency
	localDC          string
	timeout          time.Duration
	connectTimeout   time.Duration
	acquireTimeout   time.Duration
	reconnect        time.Duration
	discovery        bool
	proto            int
	pageSize         int
	maxValueBytes    int
	maxRequests      int
	numConns         int
	maxPreparedStmts int
	writeCoalesce    time.Duration
}

// parseDSN reads a DSN of the form
//
//	cassandra://[user[:password]@]host[:port][,host[:port]...]/[keyspace][?param=value&...]
//
// with the parameters consistency, serial_consistency, local_dc, timeout,
// reconnect_interval, discovery, proto, page_size, max_value_bytes,
// max_requests and write_coalesce. Unknown parameters are an error. Errors name the DSN field
// and the value given, never the password.
func parseDSN(cfg tether.BackendConfig) (*config, error) {
	// net/url takes one host: split the host list off first, and let url.Parse
	// read the rest (user info with %-escapes, path, query).
	rest, ok := strings.CutPrefix(cfg.DSN, "cassandra://")
	if !ok {
		scheme, _, _ := strings.Cut(cfg.DSN, "://")
		return nil, fmt.Errorf("dsn: scheme %q: must be cassandra://", scheme)
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hostList := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostList = authority[:i+1], authority[i+1:]
	}
	u, err := url.Parse("cassandra://" + userinfo + "host" + tail)
	if err != nil {
		// url.Parse quotes the whole DSN, password included: say less.
		return nil, fmt.Errorf("dsn: not a cassandra://host/keyspace URL")
	}
	c := &config{
		consistency:      gocql.One,
		serial:           gocql.Serial,
		timeout:          DefaultTimeout,
		connectTimeout:   time.Duration(cfg.ConnectTimeout),
		acquireTimeout:   time.Duration(cfg.AcquireTimeout),
		reconnect:        DefaultReconnectInterval,
		discovery:        true,
		pageSize:         DefaultPageSize,
		maxValueBytes:    DefaultMaxValueBytes,
		numConns:         max(cfg.MaxConns, 1),
		maxPreparedStmts: cfg.StmtCacheSize,
	}
	c.maxRequests = c.numConns * DefaultRequestsPerConn
	if c.connectTimeout <= 0 {
		c.connectTimeout = 2 * time.Second
	}
	if c.acquireTimeout <= 0 {
		c.acquireTimeout = time.Second
	}
	if c.maxPreparedStmts <= 0 {
		c.maxPreparedStmts = 1000
	}
	if u.User != nil {
		c.username = u.User.Username()
		c.password, _ = u.User.Password()
	}
	if hostList == "" {
		return nil, fmt.Errorf("dsn: no host: want cassandra://host[:port][,host...]/keyspace")
	}
	for _, h := range strings.Split(hostList, ",") {
		hp, err := hostPort(h)
		if err != nil {
			return nil, err
		}
		c.hosts = append(c.hosts, hp)
	}
	c.keyspace = strings.Trim(u.Path, "/")
	if c.keyspace != "" && !validName(c.keyspace) {
		return nil, fmt.Errorf("dsn: keyspace %q: letters, digits and '_' only", c.keyspace)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("dsn: query %q: %v", u.RawQuery, err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.set(k, q.Get(k)); err != nil {
			return nil, fmt.Errorf("dsn: %s=%s: %w", k, q.Get(k), err)
		}
	}
	return c, nil
}

// set applies one DSN parameter.
func (c *config) set(key, v string) error {
	var err error
	switch key {
	case "consistency":
		c.consistency, err = parseConsistency(v)
	case "serial_consistency":
		c.serial, err = parseConsistency(v)
		if err == nil && c.serial != gocql.Serial && c.serial != gocql.LocalSerial {
			err = fmt.Errorf("must be SERIAL or LOCAL_SERIAL")
		}
	case "local_dc":
		c.localDC = v
	case "timeout":
		c.timeout, err = positiveDuration(v)
	case "reconnect_interval":
		c.reconnect, err = positiveDuration(v)
	case "discovery":
		c.discovery, err = strconv.ParseBool(v)
	case "proto":
		c.proto, err = strconv.Atoi(v)
		if err == nil && (c.proto < 3 || c.proto > 5) {
			err = fmt.Errorf("must be 3, 4 or 5")
		}
	case "page_size":
		c.pageSize, err = positiveInt(v)
	case "max_value_bytes":
		c.maxValueBytes, err = positiveInt(v)
	case "max_requests":
		c.maxRequests, err = positiveInt(v)
	case "write_coalesce":
		c.writeCoalesce, err = time.ParseDuration(v)
		if err == nil && c.writeCoalesce < 0 {
			err = fmt.Errorf("must not be negative")
		}
	default:
		return fmt.Errorf("unknown parameter (want consistency, serial_consistency, local_dc, timeout, " +
			"reconnect_interval, discovery, proto, page_size, max_value_bytes, max_requests or write_coalesce)")
	}
	return err
}

func parseConsistency(v string) (gocql.Consistency, error) {
	switch strings.ToUpper(v) {
	case "ANY":
		return gocql.Any, nil
	case "ONE":
		return gocql.One, nil
	case "TWO":
		return gocql.Two, nil
	case "THREE":
		return gocql.Three, nil
	case "QUORUM":
		return gocql.Quorum, nil
	case "ALL":
		return gocql.All, nil
	case "LOCAL_QUORUM":
		return gocql.LocalQuorum, nil
	case "EACH_QUORUM":
		return gocql.EachQuorum, nil
	case "LOCAL_ONE":
		return gocql.LocalOne, nil
	case "SERIAL":
		return gocql.Serial, nil
	case "LOCAL_SERIAL":
		return gocql.LocalSerial, nil
	}
	return 0, fmt.Errorf("unknown consistency level (want ONE, QUORUM, LOCAL_QUORUM, ALL, ...)")
}

func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return d, err
}

func positiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return n, err
}

// hostPort checks one "host[:port]" of the DSN and adds the default port.
func hostPort(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("dsn: empty host in the host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or an IPv6 address without brackets and port).
		host, port = strings.Trim(h, "[]"), strconv.Itoa(DefaultPort)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("dsn: host %q: bad port", h)
	}
	if host == "" {
		return "", fmt.Errorf("dsn: host %q: no host name", h)
	}
	return net.JoinHostPort(host, port), nil
}

// validName reports whether s is an unquoted CQL name (keyspace, table).
func validName(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
