// Package cassandra is the Apache Cassandra backend, on the Apache Cassandra
// Go driver (github.com/apache/cassandra-gocql-driver/v2).
//
// One Backend is one driver session to one cluster: a pool of max_conns
// connections per node, each multiplexing many requests, with token-aware
// routing (requests go straight to a replica of their partition) over a
// round-robin, or with local_dc a DC-aware, choice of nodes. Every statement
// that takes parameters (SELECT, INSERT, UPDATE, DELETE, BATCH) is prepared
// once per node by the driver and cached by its text, so parameters are
// always bound, never interpolated.
//
// It offers tether.Querier (CQL, paged with Statement.PageSize and Cursor)
// and tether.KeyValue, whose keys are a table's partition key columns, then
// its clustering columns. docs/cassandra.md describes the DSN, the value mapping, and how the
// Thrift-era model of column families and super columns maps onto tables.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/semaphore"

	tether "github.com/tether-php/tether"
)

// Backend is a Cassandra cluster behind one driver session. It implements
// tether.Backend, tether.Querier and tether.KeyValue.
type Backend struct {
	// Logger receives the driver's warnings and errors (a node going down,
	// a failed reconnect); nil means slog.Default(). Set it before Open.
	Logger *slog.Logger

	cfg       *config
	sess      atomic.Pointer[gocql.Session] // replaced by heal when the driver gives up on every node
	stop      chan struct{}
	healed    chan struct{}
	noHostsAt atomic.Int64        // when a request last found no connection (unix ns)
	slots     *semaphore.Weighted // max_requests in flight
	closed    atomic.Bool
	inUse     atomic.Int64
	waits     atomic.Int64
	tables    sync.Map // "keyspace.table" -> *table
}

// New returns a backend for cfg.DSN (cassandra://[user:pass@]host[:port][,...]/[keyspace][?params],
// see docs/cassandra.md). It checks the configuration and connects nothing.
func New(cfg tether.BackendConfig) (*Backend, error) {
	c, err := parseDSN(cfg)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	return &Backend{cfg: c}, nil
}

// Open implements tether.Backend: it creates the driver session (which
// connects to every node it discovers, or to the listed hosts alone with
// discovery=false) and checks it with a read of system.local. It returns an
// unavailable error, retryable, when no node can be reached within
// connect_timeout, and never waits past ctx.
func (b *Backend) Open(ctx context.Context) error {
	if b.sess.Load() != nil {
		return fmt.Errorf("cassandra: already open")
	}
	c := b.cfg
	cluster := gocql.NewCluster(c.hosts...)
	cluster.Keyspace = c.keyspace
	cluster.Consistency = c.consistency
	cluster.SerialConsistency = c.serial
	cluster.Timeout = c.timeout
	cluster.ConnectTimeout = c.connectTimeout
	cluster.NumConns = c.numConns
	cluster.PageSize = c.pageSize
	cluster.MaxPreparedStmts = c.maxPreparedStmts
	cluster.ProtoVersion = c.proto
	// The driver holds each request up to WriteCoalesceWaitTime (default
	// 200 us) to batch writes to a connection. tetherd's requests come one per
	// PHP call, so the wait is pure latency: measured on the E1 read, 1.1 ms
	// with the default (the timer fires late on a busy host) and 50-60 us with
	// none. write_coalesce in the DSN turns it back on for write-heavy loads.
	cluster.WriteCoalesceWaitTime = c.writeCoalesce
	// A node that went away is redialled every reconnect_interval; a connection
	// that broke is redialled once at once, then the node is marked down so that
	// requests fail fast (unavailable) instead of waiting on it.
	cluster.ReconnectInterval = c.reconnect
	cluster.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 1, Interval: 100 * time.Millisecond}
	// Token-aware routing needs each keyspace's replication, not table schemas.
	cluster.Metadata.CacheMode = gocql.KeyspaceOnly
	if !c.discovery {
		// Only the listed hosts (a proxy, a NAT, a port forward): the addresses
		// the nodes advertise are not reachable from here.
		cluster.DisableInitialHostLookup = true
		cluster.Events.DisableTopologyEvents = true
	}
	cluster.PoolConfig.HostSelectionPolicy = hostPolicy(c)
	if c.username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: c.username, Password: c.password}
	}
	cluster.Logger = logger{b.log()}

	// CreateSession takes no context: let it finish in the background if ctx
	// ends first, and close what it made.
	type made struct {
		s   *gocql.Session
		err error
	}
	ch := make(chan made, 1)
	go func() {
		s, err := cluster.CreateSession()
		ch <- made{s, err}
	}()
	var m made
	select {
	case m = <-ch:
	case <-ctx.Done():
		go func() {
			if m := <-ch; m.s != nil {
				m.s.Close()
			}
		}()
		return unavailable(c, ctx.Err())
	}
	if m.err != nil {
		return unavailable(c, m.err)
	}
	vctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	var version string
	if err := m.s.Query("SELECT release_version FROM system.local").WithContext(vctx).Scan(&version); err != nil {
		m.s.Close()
		return unavailable(c, err)
	}
	b.sess.Store(m.s)
	b.stop, b.healed = make(chan struct{}), make(chan struct{})
	go b.heal(cluster)
	b.slots = semaphore.NewWeighted(int64(c.maxRequests))
	b.log().Debug("cassandra: connected", "hosts", strings.Join(c.hosts, ","), "release_version", version)
	return nil
}

// unavailable wraps a failure to connect, keeping Cassandra's code (bad
// credentials: 256) when it gave one.
func unavailable(c *config, err error) error {
	e := &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: fmt.Errorf("%w: %w", tether.ErrUnavailable, err),
		Message: fmt.Sprintf("cassandra: connect %s: %v", strings.Join(c.hosts, ","), err)}
	if ce, ok := classify(context.Background(), err, true).(*tether.Error); ok {
		e.BackendCode = ce.BackendCode
	}
	return e
}

func (b *Backend) log() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

// Close implements tether.Backend: it stops taking requests, waits within ctx
// for those in flight, and closes the session. Safe to call twice.
func (b *Backend) Close(ctx context.Context) error {
	if b.sess.Load() == nil || b.closed.Swap(true) {
		return nil
	}
	if err := b.slots.Acquire(ctx, int64(b.cfg.maxRequests)); err == nil {
		defer b.slots.Release(int64(b.cfg.maxRequests))
	}
	close(b.stop)
	<-b.healed
	// gocql's Session.Close can block for good when it comes while the
	// control connection reconnects (its heartbeat waits on a schema refresh
	// that the close has stopped): seen in the tests after nodes were taken
	// down. tetherd's shutdown must not hang on it: wait a bounded time, then
	// leave the driver to finish on its own.
	done := make(chan struct{})
	go func() {
		b.sess.Load().Close()
		close(done)
	}()
	wait := sessionCloseWait
	if d, ok := ctx.Deadline(); ok && time.Until(d) > wait {
		wait = time.Until(d)
	}
	select {
	case <-done:
	case <-time.After(wait):
		b.log().Warn("cassandra: the driver's session did not close in time; leaving it to close on its own", "waited", wait)
	}
	return nil
}

// sessionCloseWait bounds how long Close waits for the driver's session.
const sessionCloseWait = 5 * time.Second

// Stats implements tether.Backend. Connections multiplex requests, so the
// numbers differ from a SQL pool's: Open is the connections of the nodes that
// are up (max_conns each), InUse the requests in flight, Idle the pooled
// connections when none is, and Waiting how many requests had to wait for a
// free max_requests slot.
func (b *Backend) Stats() tether.PoolStats {
	s := tether.PoolStats{InUse: int(b.inUse.Load()), Waiting: b.waits.Load()}
	if b.sess.Load() == nil || b.sess.Load().Closed() {
		return s
	}
	for _, h := range b.session().GetHosts() {
		if h.IsUp() {
			s.Open += b.cfg.numConns
		}
	}
	if s.InUse == 0 {
		s.Idle = s.Open
	}
	return s
}

// acquire takes one of max_requests slots, waiting at most acquire_timeout
// (and never past ctx). It returns a busy error when none came free.
func (b *Backend) acquire(ctx context.Context) error {
	if b.slots == nil || b.closed.Load() {
		return &tether.Error{Code: tether.CodeUnavailable, Message: "cassandra: " + ErrNotOpen.Error(), Err: ErrNotOpen}
	}
	if !b.slots.TryAcquire(1) {
		b.waits.Add(1)
		wctx, cancel := context.WithTimeout(ctx, b.cfg.acquireTimeout)
		defer cancel()
		if err := b.slots.Acquire(wctx, 1); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &tether.Error{Code: tether.CodeBusy, Retry: true, Err: tether.ErrBusy,
				Message: fmt.Sprintf("cassandra: %d requests in flight for %s (max_requests, acquire_timeout)", b.cfg.maxRequests, b.cfg.acquireTimeout)}
		}
	}
	b.inUse.Add(1)
	return nil
}

func (b *Backend) release() {
	b.inUse.Add(-1)
	b.slots.Release(1)
}

// Query implements tether.Querier. It returns one page of rows: at most
// s.PageSize (0: the DSN's page_size, 5000), after s.Cursor (nil: from the
// start). Result.Cursor resumes after the last row and is nil when no more
// follow. A cursor is only valid with the statement text it came from:
// another gives a bad_request error.
func (b *Backend) Query(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	if len(s.Params) > 0 && !preparable(s.SQL) {
		return nil, badRequest("only SELECT, INSERT, UPDATE, DELETE and BATCH statements take parameters")
	}
	if s.PageSize < 0 {
		return nil, badRequest("page size %d is negative", s.PageSize)
	}
	vals := make([]any, len(s.Params))
	for i, p := range s.Params {
		vals[i] = param{v: p, maxBytes: b.cfg.maxValueBytes}
	}
	return b.page(ctx, s.SQL, vals, s.PageSize, s.Cursor, s.MaxBytes, isRead(s.SQL))
}

// Exec implements tether.Querier, as Query does. Cassandra does not count the
// rows a write touched: Affected is 0, except for a conditional statement
// (IF ...), whose Affected is 1 when it was applied, 0 when not, and whose
// Result holds the [applied] row Cassandra returns.
func (b *Backend) Exec(ctx context.Context, s tether.Statement) (*tether.Result, error) {
	res, err := b.Query(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(res.Columns) > 0 && res.Columns[0] == "[applied]" && len(res.Rows) == 1 {
		if ok, _ := res.Rows[0][0].(bool); ok {
			res.Affected = 1
		}
	}
	return res, nil
}

// page runs one statement and reads one page of its rows.
func (b *Backend) page(ctx context.Context, stmt string, vals []any, pageSize int, cursor []byte, maxBytes int, read bool) (*tether.Result, error) {
	if pageSize <= 0 {
		pageSize = b.cfg.pageSize
	}
	var state []byte
	if len(cursor) > 0 {
		var err error
		if state, err = openCursor(stmt, cursor); err != nil {
			return nil, err
		}
	}
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	defer b.release()
	// Prefetch(0): never fetch the next page behind our back; the client asks.
	iter := b.session().Query(stmt, vals...).WithContext(ctx).PageSize(pageSize).PageState(state).Prefetch(0).Iter()
	res, rerr := readPage(iter, maxBytes)
	if err := iter.Close(); err != nil {
		if errors.Is(err, gocql.ErrNoConnections) {
			b.noHostsAt.Store(time.Now().UnixNano())
		}
		return nil, classify(ctx, err, read)
	}
	if rerr != nil {
		return nil, classify(ctx, rerr, read)
	}
	if st := iter.PageState(); len(st) > 0 && res.Columns != nil {
		res.Cursor = sealCursor(stmt, st)
	}
	return res, nil
}

// readPage reads the rows of the iterator's current page, and no more.
func readPage(iter *gocql.Iter, maxBytes int) (*tether.Result, error) {
	cols := iter.Columns()
	res := &tether.Result{Rows: [][]any{}}
	if len(cols) == 0 {
		return res, nil
	}
	res.Columns = make([]string, len(cols))
	var dest []any
	var cells []cell
	width := make([]int, len(cols)) // destinations per column: a tuple's elements are scanned one by one
	for i, c := range cols {
		res.Columns[i] = c.Name
		width[i] = 1
		if t, ok := c.TypeInfo.(gocql.TupleTypeInfo); ok {
			width[i] = len(t.Elems)
		}
	}
	for i, w := range width {
		for j := 0; j < w; j++ {
			cells = append(cells, cell{raw: cols[i].TypeInfo.Type() == gocql.TypeTuple})
		}
	}
	dest = make([]any, len(cells))
	for i := range cells {
		dest[i] = &cells[i]
	}
	size := 0
	for n := iter.NumRows(); n > 0; n-- {
		if !iter.Scan(dest...) {
			break
		}
		row := make([]any, len(cols))
		k := 0
		for i, w := range width {
			if cols[i].TypeInfo.Type() == gocql.TypeTuple {
				v, err := tupleJSON(cells[k : k+w])
				if err != nil {
					return nil, err
				}
				row[i] = v
			} else {
				row[i] = cells[k].v
				cells[k].v = nil
			}
			size += tether.ValueSize(row[i])
			k += w
		}
		if maxBytes > 0 && size > maxBytes {
			return nil, &tether.Error{Code: tether.CodeTooLarge,
				Message: fmt.Sprintf("cassandra: result is over max_result_bytes (%d) after %d rows", maxBytes, len(res.Rows))}
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// tupleJSON assembles a tuple column from its elements. The driver hands a
// null tuple over as null elements: a tuple whose elements are all null reads
// as null.
func tupleJSON(elems []cell) (any, error) {
	null := true
	for _, e := range elems {
		null = null && e.nul
	}
	if null {
		return nil, nil
	}
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		var p []byte
		if !e.nul {
			p = e.buf
		}
		var err error
		if b, err = appendJSON(b, e.typ, p); err != nil {
			return nil, err
		}
	}
	return string(append(b, ']')), nil
}

// A cursor is a version byte, the FNV-1a hash of the statement text, then
// the driver's paging state.
const cursorVersion = 1

func sealCursor(stmt string, state []byte) []byte {
	h := fnv.New32a()
	h.Write([]byte(stmt))
	return append(h.Sum([]byte{cursorVersion}), state...)
}

// checkCursor checks a cursor's form before the statement it belongs to is known.
func checkCursor(cursor []byte) error {
	if cursor != nil && (len(cursor) <= 5 || cursor[0] != cursorVersion) {
		return &tether.Error{Code: tether.CodeBadRequest, Message: "cassandra: not a cursor", Err: ErrCursor}
	}
	return nil
}

func openCursor(stmt string, cursor []byte) ([]byte, error) {
	h := fnv.New32a()
	h.Write([]byte(stmt))
	want := h.Sum([]byte{cursorVersion})
	if len(cursor) <= len(want) || string(cursor[:len(want)]) != string(want) {
		return nil, &tether.Error{Code: tether.CodeBadRequest, Message: "cassandra: " + ErrCursor.Error(), Err: ErrCursor}
	}
	return cursor[len(want):], nil
}

// firstWord is the statement's first keyword, lower case.
func firstWord(stmt string) string {
	s := strings.TrimLeftFunc(stmt, unicode.IsSpace)
	if n := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '*' || r == '(' }); n >= 0 {
		s = s[:n]
	}
	return strings.ToLower(s)
}

// preparable reports whether the driver prepares the statement (and so binds
// its parameters); it sends any other statement as text and drops the
// parameters silently.
func preparable(stmt string) bool {
	s := strings.TrimSpace(stmt)
	var w string
	if n := strings.IndexFunc(s, unicode.IsSpace); n >= 0 {
		w = strings.ToLower(s[:n])
	}
	if w == "begin" { // BEGIN [UNLOGGED|COUNTER] BATCH ... APPLY BATCH
		s = strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == ';' })
		w = strings.ToLower(s[strings.LastIndexFunc(s, unicode.IsSpace)+1:])
	}
	switch w {
	case "select", "insert", "update", "delete", "batch":
		return true
	}
	return false
}

// isRead reports a statement that changes nothing, safe to retry.
func isRead(stmt string) bool { return firstWord(stmt) == "select" }

// logger passes the driver's warnings and errors to slog.
type logger struct{ l *slog.Logger }

func (l logger) Error(msg string, f ...gocql.LogField)   { l.l.Error("cassandra: "+msg, attrs(f)...) }
func (l logger) Warning(msg string, f ...gocql.LogField) { l.l.Warn("cassandra: "+msg, attrs(f)...) }
func (l logger) Info(string, ...gocql.LogField)          {}
func (l logger) Debug(string, ...gocql.LogField)         {}

func attrs(fields []gocql.LogField) []any {
	out := make([]any, 0, 2*len(fields))
	for _, f := range fields {
		out = append(out, f.Name, f.Value.Any())
	}
	return out
}

var (
	_ tether.Backend  = (*Backend)(nil)
	_ tether.Querier  = (*Backend)(nil)
	_ tether.KeyValue = (*Backend)(nil)
)

// session returns the current driver session.
func (b *Backend) session() *gocql.Session { return b.sess.Load() }

// heal replaces the session when the driver does not bring a lost node back:
// seen in make test, after a node's connections were cut and it returned,
// with requests still failing "no hosts available in the pool" 15 s later
// while the driver listed the node as up. Every second it looks; a session
// with no node up, or whose requests found no connection in the last two
// seconds, is replaced by a new one as soon as one can be created, so that
// service resumes by itself.
func (b *Backend) heal(cluster *gocql.ClusterConfig) {
	defer close(b.healed)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		old := b.sess.Load()
		recent := time.Since(time.Unix(0, b.noHostsAt.Load())) < 2*time.Second
		if anyHostUp(old) && !recent {
			continue
		}
		// A token-aware policy belongs to one session (the driver panics
		// on a second): every attempt gets its own.
		cluster.PoolConfig.HostSelectionPolicy = hostPolicy(b.cfg)
		fresh, err := cluster.CreateSession()
		if err != nil {
			continue // still down
		}
		b.sess.Store(fresh)
		b.log().Info("cassandra: replaced the session after every node was down", "hosts", len(fresh.GetHosts()))
		old.Close()
	}
}

// hostPolicy returns a new token-aware host selection policy, DC-aware when
// local_dc is set.
func hostPolicy(c *config) gocql.HostSelectionPolicy {
	fallback := gocql.RoundRobinHostPolicy()
	if c.localDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(c.localDC)
	}
	return gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas())
}

func anyHostUp(s *gocql.Session) bool {
	for _, h := range s.GetHosts() {
		if h.IsUp() {
			return true
		}
	}
	return false
}
