package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqldb"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/backend/sqlroute"
	"github.com/tether-php/tether/backend/topology"
	"github.com/tether-php/tether/internal/sqltables"
)

// Replicated is a MariaDB backend over a primary and its replicas
// (replicas = [...] in its config): a router (backend/sqlroute) over one
// pool per host, whose roles and lag a Prober per host reads from the
// servers. Key operations go through the router to the primary; the result
// cache's catalog is read from the primary and the change stream followed
// on the dsn's host.
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
	r, err := sqlroute.NewFromConfig(cfg, sqlroute.Config{Type: "mysql", Dialect: sqltables.MySQL, Covers: gtidCovers,
		ReadOnlyRefusal: readOnlyRefusal, ReplicaRefusal: readOnlyRefusal, TxReadOnlyRefusal: readOnlyRefusal, PositionSQL: "SELECT @@global.gtid_binlog_pos",
		Merge: gtidMerge, ValidPosition: validGTIDList},
		func(hc tether.BackendConfig) (*sqlpool.Pool, topology.Prober, string, error) {
			hb, err := New(hc)
			if err != nil {
				return nil, nil, "", err
			}
			pr, err := NewProber(hc.DSN)
			if err != nil {
				return nil, nil, "", fmt.Errorf("mysql: %w", err)
			}
			b.hosts = append(b.hosts, hb)
			return hb.Pool, pr, pr.Addr(), nil
		})
	if err != nil {
		return nil, err
	}
	b.Router = r
	b.KeyValue = sqldb.NewKeyValue("mysql", keySQL(), r)
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

// FollowChanges follows the binary log of the dsn's host.
func (b *Replicated) FollowChanges(ctx context.Context, ready func(), changed func(tables []string)) error {
	return b.hosts[0].FollowChanges(ctx, ready, changed)
}

// gtidCovers reports whether the MariaDB GTID list have includes every
// transaction of want: in every replication domain of want, have's sequence
// number is at least want's. An empty want is covered by anything.
func gtidCovers(have, want string) bool {
	h := gtidSeqs(have)
	for dom, seq := range gtidSeqs(want) {
		if h[dom] < seq {
			return false
		}
	}
	return true
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

// readOnlyRefusal reports whether err is the server refusing a statement
// because it runs read-only (ER_OPTION_PREVENTS_STATEMENT, 1290, naming
// --read-only: 1290 also names other options, such as --secure-file-priv):
// it did not run it.
func readOnlyRefusal(err error) bool {
	var te *tether.Error
	return errors.As(err, &te) && te.BackendCode == "1290" && strings.Contains(te.Message, "--read-only")
}

// gtidMerge returns the GTID list that covers both a and b: in each
// replication domain, the GTID of the higher sequence number.
func gtidMerge(a, b string) string {
	best := map[uint64]string{}
	seqs := map[uint64]uint64{}
	for _, list := range []string{a, b} {
		for _, g := range strings.Split(list, ",") {
			g = strings.TrimSpace(g)
			parts := strings.Split(g, "-")
			if len(parts) != 3 {
				continue
			}
			dom, err1 := strconv.ParseUint(parts[0], 10, 32)
			seq, err2 := strconv.ParseUint(parts[2], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if _, ok := best[dom]; !ok || seq > seqs[dom] {
				best[dom], seqs[dom] = g, seq
			}
		}
	}
	doms := make([]uint64, 0, len(best))
	for d := range best {
		doms = append(doms, d)
	}
	slices.Sort(doms)
	out := make([]string, len(doms))
	for i, d := range doms {
		out[i] = best[d]
	}
	return strings.Join(out, ",")
}

// validGTIDList reports whether s is a MariaDB GTID list ("0-1-42,1-2-7").
func validGTIDList(s string) bool {
	for _, g := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			return false
		}
		for i, p := range parts {
			bits := 64
			if i < 2 {
				bits = 32
			}
			if _, err := strconv.ParseUint(p, 10, bits); err != nil {
				return false
			}
		}
	}
	return true
}
