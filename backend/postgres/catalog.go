package postgres

import (
	"context"
	"fmt"

	tether "github.com/tether-php/tether"
)

// CacheCatalog implements tether.CacheCatalog from pg_catalog (readable by
// every user), over every schema: views (ReadAll), sequences and foreign
// tables (NoCache), tables with inheritance or partitions (ReadAll and
// WriteAll: a read of the parent reads the children, a write to one may
// land in another), tables with triggers or rules and the parents of
// cascading foreign keys (WriteAll).
func (b *Backend) CacheCatalog(ctx context.Context) (*tether.Catalog, error) {
	cat := &tether.Catalog{ReadAll: map[string]bool{}, NoCache: map[string]bool{}, WriteAll: map[string]bool{}}
	for _, q := range []struct {
		sql  string
		sets []map[string]bool
	}{
		{"SELECT lower(relname) FROM pg_class WHERE relkind = 'v' AND " + userSchemas, []map[string]bool{cat.ReadAll}},
		{"SELECT lower(relname) FROM pg_class WHERE relkind IN ('S', 'f') AND " + userSchemas, []map[string]bool{cat.NoCache}},
		{`SELECT lower(c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid IN (i.inhrelid, i.inhparent)
			UNION SELECT lower(relname) FROM pg_class WHERE relkind = 'p'`, []map[string]bool{cat.ReadAll, cat.WriteAll}},
		{`SELECT lower(c.relname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal
			UNION SELECT lower(c.relname) FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.rulename <> '_RETURN'
			UNION SELECT lower(c.relname) FROM pg_constraint k JOIN pg_class c ON c.oid = k.confrelid
				WHERE k.contype = 'f' AND (k.confdeltype IN ('c', 'n', 'd') OR k.confupdtype IN ('c', 'n', 'd'))`, []map[string]bool{cat.WriteAll}},
	} {
		r, err := b.Query(ctx, tether.Statement{SQL: q.sql})
		if err != nil {
			return nil, fmt.Errorf("postgres catalog: %w", err)
		}
		for _, row := range r.Rows {
			for _, set := range q.sets {
				set[fmt.Sprint(row[0])] = true
			}
		}
	}
	return cat, nil
}

// userSchemas leaves out the system catalogs, whose views (pg_catalog's,
// information_schema's "tables", "columns", "views"...) would otherwise mark
// an application's tables of the same names; reads of the catalogs are never
// cached anyway.
const userSchemas = "relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)"

var _ tether.CacheCatalog = (*Backend)(nil)
