package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/sqltables"
)

// The change stream: the server's binary log, read as a replica reads it
// (go-mysql's replication.BinlogSyncer), so that tetherd's result cache drops
// what a write from anywhere else made stale (tether.ChangeFollower).
//
// It needs the server's binary log on (log_bin; binlog_format ROW names the
// tables of every row change, STATEMENT or MIXED make each statement drop the
// backend's whole cache) and the DSN's user to hold REPLICATION SLAVE and
// BINLOG MONITOR (MariaDB; REPLICATION CLIENT on MySQL). It is one server
// connection beyond max_conns.

// FollowChanges implements tether.ChangeFollower: it reads the binary log from
// its current end, calls ready once the stream is open, then changed with the
// tables (unqualified, lower case) of each committed transaction's row
// changes and with nil for a
// statement of unknown reach (DDL, a statement-format write). It returns when
// ctx ends (nil) or the stream breaks (the error).
func (b *Backend) FollowChanges(ctx context.Context, ready func(), changed func(tables []string)) error {
	d := b.d
	db, err := d.sideDB()
	if err != nil {
		return fmt.Errorf("mysql change stream: %w", err)
	}
	file, pos, flavor, err := binlogEnd(ctx, db)
	if err != nil {
		return fmt.Errorf("mysql change stream: %w", err)
	}
	cfg := replication.BinlogSyncerConfig{
		// A replica's id must be unique among the server's replicas: one
		// tetherd per web host, each its own random id.
		ServerID:        1<<24 + rand.Uint32N(1<<30),
		Flavor:          flavor,
		User:            d.cfg.User,
		Password:        d.cfg.Passwd,
		HeartbeatPeriod: time.Second,
		ReadTimeout:     5 * time.Second,
		// tetherd reconnects itself, from the log's end, and drops the
		// backend's cache then: what happened meanwhile is not read.
		DisableRetrySync:     true,
		MaxReconnectAttempts: 1,
		Logger:               slog.New(slog.DiscardHandler),
		// Only the table of a row change is needed, not its rows.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
	}
	if d.tls != nil && !d.tlsPreferred {
		cfg.TLSConfig = d.tls
	}
	if d.cfg.Net == "unix" {
		socket := d.cfg.Addr
		cfg.Host, cfg.Port = "localhost", 0
		cfg.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", socket)
		}
	} else {
		host, port, err := net.SplitHostPort(d.cfg.Addr)
		if err != nil {
			return fmt.Errorf("mysql change stream: address %q: %w", d.cfg.Addr, err)
		}
		var p uint16
		if _, err := fmt.Sscan(port, &p); err != nil {
			return fmt.Errorf("mysql change stream: port %q: %w", port, err)
		}
		cfg.Host, cfg.Port = host, p
	}
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()
	streamer, err := syncer.StartSync(gomysql.Position{Name: file, Pos: pos})
	if err != nil {
		return fmt.Errorf("mysql change stream: reading the binary log from %s:%d: %w", file, pos, err)
	}
	ready()
	// A transaction's row changes come after its commit, before its XID
	// event (or COMMIT, for non-transactional tables): their tables are
	// gathered, and reported once, at its end. Compressed transactions
	// (MySQL's binlog_transaction_compression) hold their events inside.
	var tables []string
	unknown, inTx := false, false
	end := func() {
		switch {
		case unknown:
			changed(nil)
		case len(tables) > 0:
			changed(tables)
		}
		tables, unknown, inTx = tables[:0], false, false
	}
	var handle func(ev *replication.BinlogEvent)
	handle = func(ev *replication.BinlogEvent) {
		switch e := ev.Event.(type) {
		case *replication.RowsEvent:
			if e.Table == nil {
				unknown = true
				return
			}
			if name := strings.ToLower(string(e.Table.Table)); !slices.Contains(tables, name) {
				tables = append(tables, name)
			}
		case *replication.XIDEvent:
			end()
		case *replication.TransactionPayloadEvent:
			for _, inner := range e.Events {
				handle(inner)
			}
		case *replication.QueryEvent:
			switch q := string(e.Query); queryKind(q) {
			case queryBegin:
				inTx = true
			case queryEnd: // a rolled back mix with non-transactional tables changed them too
				end()
			case queryXAEnd:
				// A prepared XA transaction's rows came at its PREPARE, with
				// others' commits since: what it wrote is not kept apart.
				unknown = true
				end()
			case queryStatement:
				// A statement-format write (binlog_format STATEMENT or MIXED),
				// or DDL.
				info := sqltables.Analyze(sqltables.MySQL, q)
				if info.Certain && info.Kind == sqltables.Write && len(info.Tables) > 0 {
					for _, name := range info.Tables {
						if !slices.Contains(tables, name) {
							tables = append(tables, name)
						}
					}
				} else if !info.Certain || info.Kind == sqltables.Write || info.Kind == sqltables.DDL {
					unknown = true
				}
				if !inTx {
					end()
				}
			}
		}
	}
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("mysql change stream: %w", err)
		}
		handle(ev)
	}
}

// Kinds of binlog query events.
const (
	queryStatement = iota // a statement: a write, DDL, or anything else
	queryBegin            // BEGIN, XA START
	queryEnd              // COMMIT, ROLLBACK
	queryXAEnd            // XA COMMIT, XA ROLLBACK
	queryIgnore           // XA END, XA PREPARE, SAVEPOINT, RELEASE SAVEPOINT, ROLLBACK TO
)

// queryKind tells what a binlog query event does to the transaction around it.
func queryKind(q string) int {
	s := strings.ToUpper(strings.TrimSpace(q))
	has := func(w string) bool { return s == w || strings.HasPrefix(s, w+" ") }
	switch {
	case has("BEGIN"), has("XA START"), has("XA BEGIN"):
		return queryBegin
	case has("XA COMMIT"), has("XA ROLLBACK"):
		return queryXAEnd
	case has("ROLLBACK TO"), has("SAVEPOINT"), has("RELEASE SAVEPOINT"), has("XA END"), has("XA PREPARE"):
		return queryIgnore
	case has("COMMIT"), has("ROLLBACK"):
		return queryEnd
	}
	return queryStatement
}

// binlogEnd returns the binary log's current end and the server's flavour
// ("mariadb" or "mysql").
func binlogEnd(ctx context.Context, db *sql.DB) (file string, pos uint32, flavor string, err error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", 0, "", err
	}
	flavor = gomysql.MySQLFlavor
	if strings.Contains(strings.ToLower(version), "mariadb") {
		flavor = gomysql.MariaDBFlavor
	}
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return "", 0, "", fmt.Errorf("SHOW MASTER STATUS (the user needs BINLOG MONITOR on MariaDB, REPLICATION CLIENT on MySQL): %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", 0, "", err
		}
		return "", 0, "", tether.Errorf(tether.CodeUnavailable, "the server's binary log is off: change_stream needs log_bin (binlog_format ROW)")
	}
	cols, err := rows.Columns()
	if err != nil {
		return "", 0, "", err
	}
	vals := make([]any, len(cols))
	var p uint64
	vals[0], vals[1] = &file, &p
	for i := 2; i < len(vals); i++ {
		vals[i] = new(sql.RawBytes)
	}
	if err := rows.Scan(vals...); err != nil {
		return "", 0, "", err
	}
	if file == "" {
		return "", 0, "", errors.New("SHOW MASTER STATUS named no binary log file")
	}
	return file, uint32(p), flavor, nil
}

var _ tether.ChangeFollower = (*Backend)(nil)
