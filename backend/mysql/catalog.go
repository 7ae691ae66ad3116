package mysql

import (
	"context"
	"fmt"
	"strings"

	tether "github.com/tether-php/tether"
)

// CacheCatalog implements tether.CacheCatalog from information_schema, over
// every schema the DSN's user can see: views (ReadAll), sequences and tables
// whose rows live elsewhere (NoCache: FEDERATED, CONNECT, SPIDER), MERGE
// tables (ReadAll and WriteAll: they are other tables), tables with
// triggers and the parents of cascading foreign keys (WriteAll).
//
// information_schema.TRIGGERS shows a trigger only to a user with the
// TRIGGER privilege on its table: a catalog read by a user who may write
// where it cannot see triggers would miss them, so it fails (and the cache
// drops the backend's whole cache on every write) unless the user holds
// TRIGGER globally or wherever it holds INSERT, UPDATE or DELETE at the
// schema level, without table-level write grants or roles.
func (b *Backend) CacheCatalog(ctx context.Context) (*tether.Catalog, error) {
	if err := b.triggersVisible(ctx); err != nil {
		return nil, err
	}
	cat := &tether.Catalog{ReadAll: map[string]bool{}, NoCache: map[string]bool{}, WriteAll: map[string]bool{}}
	for _, q := range []struct {
		sql  string
		sets []map[string]bool
	}{
		{"SELECT LOWER(TABLE_NAME) FROM information_schema.VIEWS", []map[string]bool{cat.ReadAll}},
		{"SELECT LOWER(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_TYPE = 'SEQUENCE' OR ENGINE IN ('FEDERATED', 'CONNECT', 'SPIDER')", []map[string]bool{cat.NoCache}},
		{"SELECT LOWER(TABLE_NAME) FROM information_schema.TABLES WHERE ENGINE IN ('MRG_MyISAM', 'MRG_MYISAM', 'MERGE')", []map[string]bool{cat.ReadAll, cat.WriteAll}},
		{"SELECT LOWER(EVENT_OBJECT_TABLE) FROM information_schema.TRIGGERS", []map[string]bool{cat.WriteAll}},
		{"SELECT LOWER(REFERENCED_TABLE_NAME) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') OR UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT')", []map[string]bool{cat.WriteAll}},
	} {
		r, err := b.Query(ctx, tether.Statement{SQL: q.sql})
		if err != nil {
			return nil, fmt.Errorf("mysql catalog: %w", err)
		}
		for _, row := range r.Rows {
			for _, set := range q.sets {
				set[fmt.Sprint(row[0])] = true
			}
		}
	}
	return cat, nil
}

// triggersVisible checks that the DSN's user sees every trigger of the
// tables it may write (see CacheCatalog).
func (b *Backend) triggersVisible(ctx context.Context) error {
	r, err := b.Query(ctx, tether.Statement{SQL: "SELECT CURRENT_USER(), (SELECT COUNT(*) FROM information_schema.APPLICABLE_ROLES)"})
	if err != nil {
		return fmt.Errorf("mysql catalog: %w", err)
	}
	if len(r.Rows) != 1 {
		return fmt.Errorf("mysql catalog: no CURRENT_USER()")
	}
	if n := fmt.Sprint(r.Rows[0][1]); n != "0" {
		return fmt.Errorf("mysql catalog: the user has roles (%s), whose grants are not read: which triggers it sees is not known", n)
	}
	cu := fmt.Sprint(r.Rows[0][0])
	i := strings.LastIndex(cu, "@")
	if i < 0 {
		return fmt.Errorf("mysql catalog: CURRENT_USER() %q", cu)
	}
	grantee := "'" + cu[:i] + "'@'" + cu[i+1:] + "'" // information_schema's GRANTEE form
	writes := map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true}
	privs := func(sql string) (map[string]map[string]bool, error) {
		r, err := b.Query(ctx, tether.Statement{SQL: sql, Params: []any{grantee}})
		if err != nil {
			return nil, fmt.Errorf("mysql catalog: %w", err)
		}
		out := map[string]map[string]bool{}
		for _, row := range r.Rows {
			scope := fmt.Sprint(row[0])
			if out[scope] == nil {
				out[scope] = map[string]bool{}
			}
			out[scope][strings.ToUpper(fmt.Sprint(row[1]))] = true
		}
		return out, nil
	}
	global, err := privs("SELECT '', PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ?")
	if err != nil {
		return err
	}
	if global[""]["TRIGGER"] {
		return nil
	}
	for p := range writes {
		if global[""][p] {
			return fmt.Errorf("mysql catalog: the user may %s in every schema but lacks TRIGGER there: it cannot see every trigger", p)
		}
	}
	schemas, err := privs("SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ?")
	if err != nil {
		return err
	}
	for schema, ps := range schemas {
		for p := range writes {
			if ps[p] && !ps["TRIGGER"] {
				return fmt.Errorf("mysql catalog: the user may %s in schema %s but lacks TRIGGER there: it cannot see its triggers", p, schema)
			}
		}
	}
	tables, err := privs("SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME), PRIVILEGE_TYPE FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ?")
	if err != nil {
		return err
	}
	for table, ps := range tables {
		for p := range writes {
			if ps[p] && !ps["TRIGGER"] {
				return fmt.Errorf("mysql catalog: the user may %s table %s but lacks TRIGGER on it: it cannot see its triggers", p, table)
			}
		}
	}
	return nil
}

var _ tether.CacheCatalog = (*Backend)(nil)
