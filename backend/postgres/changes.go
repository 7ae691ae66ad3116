package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	tether "github.com/tether-php/tether"
)

// The change stream: logical replication (pglogrepl for the replication
// protocol), so that tetherd's result cache drops what a write from anywhere
// else made stale (tether.ChangeFollower).
//
// It needs wal_level = logical and the DSN's user to have REPLICATION. Its
// output plugin is test_decoding, which every PostgreSQL ships, rather than
// pgoutput: pgoutput reads a publication, and a publication that publishes
// updates and deletes makes the server refuse every UPDATE and DELETE on a
// table without a primary key or replica identity, which would break
// applications for the sake of a cache. Only the table names of its output
// are read. Each stream makes a temporary replication slot, which the server
// drops when the stream's connection ends: a tetherd that dies leaves no slot
// holding WAL back. It is one server connection beyond max_conns. DDL is not
// streamed: a change of a table's columns by another client is seen within
// the TTL.

// statusEvery is how often the stream tells the server how far it has read
// (within wal_sender_timeout, 60 s by default).
const statusEvery = 10 * time.Second

// FollowChanges implements tether.ChangeFollower: it calls ready once the
// stream is open, then changed with the tables (unqualified, lower case)
// of each committed transaction's row changes and truncations. It returns
// when ctx ends (nil) or the stream breaks (the error).
func (b *Backend) FollowChanges(ctx context.Context, ready func(), changed func(tables []string)) error {
	cfg := b.d.cfg.Copy()
	cfg.RuntimeParams = map[string]string{}
	for k, v := range b.d.cfg.RuntimeParams {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres change stream: connect for replication (the user needs REPLICATION; wal_level logical): %w", err)
	}
	defer conn.Close(context.Background())
	slot := fmt.Sprintf("tether_%d_%08x", os.Getpid(), rand.Uint32())
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "test_decoding",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication}); err != nil {
		return fmt.Errorf("postgres change stream: create temporary slot %s (needs wal_level logical): %w", slot, err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{`"include-xids" '0'`, `"skip-empty-xacts" '1'`},
	}); err != nil {
		return fmt.Errorf("postgres change stream: start replication: %w", err)
	}
	ready()

	// A transaction's changes come together after its commit, between its
	// BEGIN and COMMIT lines: their tables are gathered, and reported once,
	// at its COMMIT.
	var tables []string
	unknown := false
	var read pglogrepl.LSN // how far the stream has been read
	next := time.Now().Add(statusEvery)
	for {
		if !time.Now().Before(next) {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: read}); err != nil {
				return streamErr(ctx, err)
			}
			next = time.Now().Add(statusEvery)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return streamErr(ctx, err)
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("postgres change stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("postgres change stream: %w", err)
				}
				if ka.ServerWALEnd > read {
					read = ka.ServerWALEnd
				}
				if ka.ReplyRequested {
					next = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("postgres change stream: %w", err)
				}
				if end := x.WALStart + pglogrepl.LSN(len(x.WALData)); end > read {
					read = end
				}
				switch line := x.WALData; {
				case bytes.HasPrefix(line, []byte("table ")):
					names, ok := decodedTables(line[len("table "):])
					if !ok {
						unknown = true
					}
					for _, name := range names {
						if !slices.Contains(tables, name) {
							tables = append(tables, name)
						}
					}
				case bytes.HasPrefix(line, []byte("COMMIT")):
					if unknown {
						changed(nil)
					} else if len(tables) > 0 {
						changed(tables)
					}
					tables, unknown = tables[:0], false
				}
			}
		}
	}
}

// decodedTables reads the tables test_decoding names at the start of a
// change ("public.posts: UPDATE: ...", or for a TRUNCATE "public.a, s.\"B\":
// TRUNCATE: ..."), each unqualified and in lower case (quote_identifier's
// quoting undone), as tether.Catalog names tables. It reports false for text it cannot read.
func decodedTables(b []byte) (names []string, ok bool) {
	for {
		_, rest, ok := decodedIdent(b) // the schema
		if !ok || len(rest) == 0 || rest[0] != '.' {
			return names, false
		}
		table, rest, ok := decodedIdent(rest[1:])
		if !ok {
			return names, false
		}
		names = append(names, strings.ToLower(table))
		switch {
		case bytes.HasPrefix(rest, []byte(", ")):
			b = rest[2:]
		case len(rest) > 0 && rest[0] == ':':
			return names, true
		default:
			return names, false
		}
	}
}

// decodedIdent reads one identifier as quote_identifier writes it: plain, or
// in double quotes with "" for a quote.
func decodedIdent(b []byte) (ident string, rest []byte, ok bool) {
	if len(b) == 0 {
		return "", nil, false
	}
	if b[0] != '"' {
		n := bytes.IndexAny(b, ".:, ")
		if n <= 0 {
			return "", nil, false
		}
		return string(b[:n]), b[n:], true
	}
	var out []byte
	for i := 1; i < len(b); i++ {
		if b[i] != '"' {
			out = append(out, b[i])
			continue
		}
		if i+1 < len(b) && b[i+1] == '"' {
			out = append(out, '"')
			i++
			continue
		}
		return string(out), b[i+1:], true
	}
	return "", nil, false
}

// streamErr is nil when ctx ended (the stream was stopped), else err wrapped.
func streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("postgres change stream: %w", err)
}

var _ tether.ChangeFollower = (*Backend)(nil)
