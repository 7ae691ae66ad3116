package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	gosql "github.com/go-sql-driver/mysql"

	"github.com/tether-php/tether/backend/topology"
)

// Prober asks one MariaDB server what it is (topology.Prober), over a
// blocking connection of its own through go-sql-driver (one at most, kept
// between probes), never the pool's. It reads @@read_only (the role: off is
// a primary, on a replica), @@gtid_binlog_pos or @@gtid_slave_pos (the
// position) and SHOW SLAVE STATUS (the threads, Seconds_Behind_Master,
// Gtid_IO_Pos). The DSN's user needs SLAVE MONITOR and BINLOG MONITOR (or
// what includes them). MySQL's GTIDs are not read yet: a MySQL server's
// probe fails.
type Prober struct {
	addr string
	db   *sql.DB
	// named: the address is a DNS name. After a probe that finds the
	// server read-only its connection is dropped, so that the next probe
	// resolves the name afresh: a writer endpoint moved to the promoted
	// server is found at once, not after the old server goes away.
	named bool
}

// NewProber returns a Prober of the server dsn names, in the backend's DSN
// format (New): address, user, password, TLS; the DSN's session variables
// are not set. It connects nothing: the first Probe does.
func NewProber(dsn string) (*Prober, error) {
	dsn, own, err := cutParams(dsn, "tls-ca", "tls-server-name")
	if err != nil {
		return nil, fmt.Errorf("new mysql prober: dsn: %w", err)
	}
	mc, err := gosql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("new mysql prober: dsn: %w", err)
	}
	if _, err := tlsConfig(mc, own); err != nil {
		return nil, fmt.Errorf("new mysql prober: dsn: %w", err)
	}
	mc.Params = nil
	connector, err := gosql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("new mysql prober: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	host := mc.Addr
	if h, _, err := net.SplitHostPort(mc.Addr); err == nil {
		host = h
	}
	return &Prober{addr: mc.Addr, db: db, named: mc.Net == "tcp" && net.ParseIP(host) == nil}, nil
}

// Addr returns the address of the server probed (host:port or socket path).
func (p *Prober) Addr() string { return p.addr }

// Probe implements topology.Prober: what the server says it is now. A
// failed query fails the probe (the connection is then dropped by the
// driver and made again next time).
func (p *Prober) Probe(ctx context.Context) (topology.HostStatus, error) {
	st := topology.HostStatus{Addr: p.addr, CheckedAt: time.Now()}
	var readOnly bool
	var binlogPos, slavePos string
	err := p.db.QueryRowContext(ctx, "SELECT @@global.read_only, @@global.gtid_binlog_pos, @@global.gtid_slave_pos").
		Scan(&readOnly, &binlogPos, &slavePos)
	if err != nil {
		return st, fmt.Errorf("probe mysql %s: read role: %w", p.addr, err)
	}
	st.ReadOnly = readOnly
	st.Role = topology.RolePrimary
	st.Position = binlogPos
	st.LagKnown = true
	if readOnly {
		st.Role = topology.RoleReplica
		st.Position = slavePos
		if p.named {
			// Once this probe is done with it: dropping the idle connection
			// closes it; the next probe dials (and resolves) afresh.
			defer func() { p.db.SetMaxIdleConns(0); p.db.SetMaxIdleConns(1) }()
		}
	}
	slave, err := p.slaveStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("probe mysql %s: show slave status: %w", p.addr, err)
	}
	if slave == nil {
		return st, nil
	}
	// A server with a replication source configured reports on it whatever
	// its read_only says (a writable replica is a setup error routing must
	// see, not hide).
	st.Replicating = slave["Slave_IO_Running"] == "Yes" && slave["Slave_SQL_Running"] == "Yes"
	st.ReceivedPosition = slave["Gtid_IO_Pos"]
	st.BehindBy = gtidBehind(slavePos, st.ReceivedPosition)
	if sbm, ok := slave["Seconds_Behind_Master"]; ok && sbm != "" {
		secs, err := strconv.ParseInt(sbm, 10, 64)
		if err != nil {
			return st, fmt.Errorf("probe mysql %s: Seconds_Behind_Master %q: %w", p.addr, sbm, err)
		}
		st.Lag, st.LagKnown = time.Duration(secs)*time.Second, true
	} else {
		st.Lag, st.LagKnown = 0, false
	}
	return st, nil
}

// slaveStatus returns SHOW SLAVE STATUS's row by column name (NULL as ""),
// nil when the server replicates from nothing.
func (p *Prober) slaveStatus(ctx context.Context) (map[string]string, error) {
	rows, err := p.db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, rows.Err()
}

// gtidBehind returns by how many transactions the GTID list applied trails
// received, summed over the replication domains (a domain's sequence numbers
// grow by one per transaction). Unparsable lists count as 0.
func gtidBehind(applied, received string) int64 {
	a, b := gtidSeqs(applied), gtidSeqs(received)
	var n int64
	for dom, seq := range b {
		if seq > a[dom] {
			n += int64(seq - a[dom])
		}
	}
	return n
}

// gtidSeqs maps each domain of a MariaDB GTID list ("0-1-42,1-2-7") to its
// sequence number.
func gtidSeqs(list string) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, g := range strings.Split(list, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			continue
		}
		dom, err1 := strconv.ParseUint(parts[0], 10, 32)
		seq, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 == nil && err2 == nil {
			out[dom] = seq
		}
	}
	return out
}

// Close closes the Prober's connection. Safe to call twice.
func (p *Prober) Close() error {
	if err := p.db.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("close mysql prober %s: %w", p.addr, err)
	}
	return nil
}

var _ topology.Prober = (*Prober)(nil)
