package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/backend/sqlroute"
	"github.com/tether-php/tether/backend/topology"
	"github.com/tether-php/tether/internal/sqltables"
)

// Replicated is a PostgreSQL backend over a primary and its streaming
// replicas (replicas = [...] in its config): a router (backend/sqlroute)
// over one pool per host, whose roles and lag a Prober per host reads from
// the servers. Key operations go through the router to the primary; the
// result cache's catalog is read from the primary and the change stream
// followed on the dsn's host.
type Replicated struct {
	*sqlroute.Router
	*sqldb.KeyValue
	hosts []*Backend
}

// newBackend is the registered constructor: a Backend for one server, a
// Replicated one when the config names replicas.
func newBackend(cfg tether.BackendConfig) (tether.Backend, error) {
	if len(cfg.Replicas) == 0 {
		return New(cfg)
	}
	return NewReplicated(cfg)
}

// NewReplicated returns a backend over cfg.DSN's server and cfg.Replicas'.
// It connects nothing.
func NewReplicated(cfg tether.BackendConfig) (*Replicated, error) {
	b := &Replicated{}
	r, err := sqlroute.NewFromConfig(cfg, sqlroute.Config{Type: "postgres", Dialect: sqltables.PostgreSQL, Covers: lsnCovers,
		ReadOnlyRefusal: readOnlyRefusal, ReplicaRefusal: replicaRefusal, PositionSQL: "SELECT pg_current_wal_insert_lsn()::text",
		Merge: lsnMerge, ValidPosition: func(pos string) bool { _, ok := parseLSN(pos); return ok }},
		func(hc tether.BackendConfig) (*sqlpool.Pool, topology.Prober, string, error) {
			hb, err := New(hc)
			if err != nil {
				return nil, nil, "", err
			}
			pr, err := NewProber(hc.DSN)
			if err != nil {
				return nil, nil, "", fmt.Errorf("postgres: %w", err)
			}
			b.hosts = append(b.hosts, hb)
			return hb.Pool, pr, pr.Addr(), nil
		})
	if err != nil {
		return nil, err
	}
	b.Router = r
	b.KeyValue = sqldb.NewKeyValue("postgres", keySQL(), r)
	return b, nil
}

// CacheCatalog reads the tables' catalog on the primary (the dsn's host
// while none takes writes).
func (b *Replicated) CacheCatalog(ctx context.Context) (*tether.Catalog, error) {
	i := b.PrimaryIndex()
	if i < 0 {
		i = 0
	}
	return b.hosts[i].CacheCatalog(ctx)
}

// FollowChanges follows logical replication from the dsn's host.
func (b *Replicated) FollowChanges(ctx context.Context, ready func(), changed func(tables []string)) error {
	return b.hosts[0].FollowChanges(ctx, ready, changed)
}

// lsnCovers reports whether the WAL position have ("16/B374D848") is at or
// past want. An unreadable position covers nothing; an empty want is
// covered by anything.
func lsnCovers(have, want string) bool {
	if want == "" {
		return true
	}
	h, ok1 := parseLSN(have)
	w, ok2 := parseLSN(want)
	return ok1 && ok2 && h >= w
}

// lsnMerge returns the later of two WAL positions (an unreadable one loses).
func lsnMerge(a, b string) string {
	x, okA := parseLSN(a)
	y, okB := parseLSN(b)
	if !okB || okA && x >= y {
		return a
	}
	return b
}

func parseLSN(s string) (uint64, bool) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, false
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return h<<32 | l, true
}

var (
	_ tether.Backend        = (*Replicated)(nil)
	_ tether.Querier        = (*Replicated)(nil)
	_ tether.Transactor     = (*Replicated)(nil)
	_ tether.KeyValue       = (*Replicated)(nil)
	_ tether.CacheCatalog   = (*Replicated)(nil)
	_ tether.ChangeFollower = (*Replicated)(nil)
	_ sqlpool.Backend       = (*Replicated)(nil)
)

// readOnlyRefusal reports whether err is the server refusing a statement in
// a read-only transaction (25006, read_only_sql_transaction: a standby, or
// default_transaction_read_only): it did not run it.
func readOnlyRefusal(err error) bool {
	var te *tether.Error
	return errors.As(err, &te) && te.BackendCode == "25006"
}

// replicaRefusal reports whether err is a standby refusing, before any row,
// what only a primary can run: a write (25006), or a read of a temporary or
// unlogged relation (0A000 "... during recovery").
func replicaRefusal(err error) bool {
	var te *tether.Error
	if !errors.As(err, &te) {
		return false
	}
	return te.BackendCode == "25006" || te.BackendCode == "0A000" && strings.Contains(te.Message, "during recovery")
}
