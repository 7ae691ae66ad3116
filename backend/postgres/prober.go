package postgres

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tether-php/tether/backend/topology"
)

// Prober asks one PostgreSQL server what it is (topology.Prober), over a
// blocking pgconn connection of its own (kept between probes, made again
// after a failure), never the pool's. One query: pg_is_in_recovery() (the
// role), transaction_read_only, pg_current_wal_insert_lsn() on a primary,
// pg_last_wal_replay_lsn() and pg_last_wal_receive_lsn() on a replica, the
// replay delay, whether replay is paused and whether a WAL receiver runs.
// A primary's position is pg_current_wal_insert_lsn(): every commit answered
// before the probe is below it, also with synchronous_commit off, where the
// WAL written out (pg_current_wal_lsn()) trails a commit by up to
// wal_writer_delay. A replica that has replayed up to it has every such
// commit (read-your-writes, backend/sqlroute).
// Every function it calls is open to any user.
type Prober struct {
	addr string
	cfg  *pgconn.Config

	// named: the host is a DNS name. After a probe that finds it is not a
	// primary the connection is closed, so that the next probe resolves the
	// name afresh: a writer endpoint moved to the promoted server is found
	// at once, not after the old server goes away.
	named bool

	mu     sync.Mutex
	conn   *pgconn.PgConn // nil: connect at the next probe
	closed bool
}

// probeSQL asks everything in one round trip. The CASEs keep the primary's
// functions off a replica (pg_current_wal_insert_lsn() fails in recovery). The lag
// is the server's own: 0 when all WAL received is replayed, else the time
// since the last replayed transaction's commit, in microseconds.
const probeSQL = `SELECT pg_is_in_recovery(),
  current_setting('transaction_read_only') = 'on',
  CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END,
  CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() END,
  pg_is_in_recovery() AND NOT pg_is_wal_replay_paused() AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver),
  CASE WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
    ELSE (extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000000)::bigint END,
  CASE WHEN pg_is_in_recovery() THEN pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint END`

// NewProber returns a Prober of the server dsn names, in the backend's DSN
// format (New), TLS included. It connects nothing: the first Probe does.
func NewProber(dsn string) (*Prober, error) {
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("new postgres prober: dsn: %w", err)
	}
	withTLSDefaults(pc, tls.NewLRUClientSessionCache(0))
	return &Prober{addr: net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))), cfg: pc, named: isHostName(pc.Host)}, nil
}

// isHostName reports whether host is a DNS name (not an IP address, not a
// Unix socket's directory): the server behind it may change (a cloud's
// writer endpoint).
func isHostName(host string) bool {
	return host != "" && !strings.HasPrefix(host, "/") && net.ParseIP(host) == nil
}

// Addr returns the address of the server probed (host:port, or socket
// directory:port).
func (p *Prober) Addr() string { return p.addr }

// errProberClosed: Probe after Close.
var errProberClosed = errors.New("prober closed")

// Probe implements topology.Prober: what the server says it is now. Any
// failure closes the connection; the next probe connects again.
func (p *Prober) Probe(ctx context.Context) (topology.HostStatus, error) {
	st := topology.HostStatus{Addr: p.addr, CheckedAt: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return st, fmt.Errorf("probe postgres %s: %w", p.addr, errProberClosed)
	}
	if p.conn == nil {
		c, err := pgconn.ConnectConfig(ctx, p.cfg)
		if err != nil {
			return st, fmt.Errorf("probe postgres %s: connect: %w", p.addr, err)
		}
		p.conn = c
	}
	res, err := p.conn.Exec(ctx, probeSQL).ReadAll()
	if err == nil && (len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 7) {
		err = errors.New("unexpected result shape")
	}
	if err != nil {
		_ = p.conn.Close(context.Background())
		p.conn = nil
		return st, fmt.Errorf("probe postgres %s: %w", p.addr, err)
	}
	row := res[0].Rows[0]
	inRecovery := string(row[0]) == "t"
	st.ReadOnly = string(row[1]) == "t"
	st.Position = string(row[2])
	st.ReceivedPosition = string(row[3])
	st.Replicating = string(row[4]) == "t"
	st.Role = topology.RolePrimary
	if inRecovery {
		st.Role = topology.RoleReplica
	}
	if p.named && (inRecovery || st.ReadOnly) {
		_ = p.conn.Close(context.Background())
		p.conn = nil
	}
	if row[5] != nil {
		us, err := strconv.ParseInt(string(row[5]), 10, 64)
		if err != nil {
			return st, fmt.Errorf("probe postgres %s: lag %q: %w", p.addr, row[5], err)
		}
		st.Lag, st.LagKnown = max(time.Duration(us)*time.Microsecond, 0), true
	}
	if row[6] != nil {
		n, err := strconv.ParseInt(string(row[6]), 10, 64)
		if err != nil {
			return st, fmt.Errorf("probe postgres %s: bytes behind %q: %w", p.addr, row[6], err)
		}
		st.BehindBy = max(n, 0)
	}
	return st, nil
}

// Close closes the Prober's connection; later probes fail. Safe to call
// twice.
func (p *Prober) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := p.conn.Close(ctx)
	p.conn = nil
	if err != nil {
		return fmt.Errorf("close postgres prober %s: %w", p.addr, err)
	}
	return nil
}

var _ topology.Prober = (*Prober)(nil)
