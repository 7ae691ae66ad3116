package postgres

import (
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

// The change stream: logical replication (pglogrepl, the pgoutput plugin
// every PostgreSQL since 10 ships), so that tetherd's result cache drops
// what a write from anywhere else made stale (tether.ChangeFollower).
//
// It needs wal_level = logical, the DSN's user to have REPLICATION, and a
// publication named "tether" in the backend's database (CREATE PUBLICATION
// tether FOR ALL TABLES, by a superuser; or FOR TABLE the tables read
// through the cache). Each stream makes a temporary replication slot, which
// the server drops when the stream's connection ends: a tetherd that dies
// leaves no slot holding WAL back. It is one server connection beyond
// max_conns. DDL is not streamed: a change of a table's columns by another
// client is seen within the TTL.

// Publication is the publication the change stream reads.
const Publication = "tether"

// statusEvery is how often the stream tells the server how far it has read
// (within wal_sender_timeout, 60 s by default).
const statusEvery = 10 * time.Second

// FollowChanges implements tether.ChangeFollower: it calls ready once the
// stream is open, then changed with the table ("schema.table", lower case)
// of each row change and truncation as its transaction commits. It returns
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
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication}); err != nil {
		return fmt.Errorf("postgres change stream: create temporary slot %s (needs wal_level logical): %w", slot, err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + Publication + "'"},
	}); err != nil {
		return fmt.Errorf("postgres change stream: start replication from publication %q: %w", Publication, err)
	}
	ready()

	// A transaction's changes come together after its commit: their tables
	// are gathered, and reported once, at its commit message.
	relations := map[uint32]string{}
	var tables []string
	unknown := false
	relation := func(id uint32) {
		name, ok := relations[id]
		switch {
		case !ok:
			unknown = true // pgoutput names a relation before its first change: not seen, so not known
		case !slices.Contains(tables, name):
			tables = append(tables, name)
		}
	}
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
				m, err := pglogrepl.Parse(x.WALData)
				if err != nil {
					return fmt.Errorf("postgres change stream: %w", err)
				}
				switch m := m.(type) {
				case *pglogrepl.RelationMessage:
					relations[m.RelationID] = strings.ToLower(m.Namespace + "." + m.RelationName)
				case *pglogrepl.InsertMessage:
					relation(m.RelationID)
				case *pglogrepl.UpdateMessage:
					relation(m.RelationID)
				case *pglogrepl.DeleteMessage:
					relation(m.RelationID)
				case *pglogrepl.TruncateMessage:
					for _, id := range m.RelationIDs {
						relation(id)
					}
				case *pglogrepl.CommitMessage:
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

// streamErr is nil when ctx ended (the stream was stopped), else err wrapped.
func streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("postgres change stream: %w", err)
}

var _ tether.ChangeFollower = (*Backend)(nil)
