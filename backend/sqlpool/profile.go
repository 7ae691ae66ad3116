package sqlpool

import (
	"sort"
	"strings"

	"github.com/tether-php/tether/backend/loopsql"
)

// maxProfiles bounds the interned profiles of a pool: a client that sets a
// new time zone per request cannot grow the table without bound; past it, new
// profiles still work, only without sharing.
const maxProfiles = 4096

// profiles interns the profiles of one pool. Loop goroutine only.
type profiles struct {
	m map[string]*loopsql.Profile
}

// with returns p with changes applied (each change replaces the variable's
// value), interned.
func (ps *profiles) with(p *loopsql.Profile, changes []loopsql.Setting) *loopsql.Profile {
	if len(changes) == 0 {
		return p
	}
	vars := make([]loopsql.Setting, 0, len(p.Settings())+len(changes))
	vars = append(vars, p.Settings()...)
	for _, c := range changes {
		c.Name = strings.ToLower(c.Name)
		replaced := false
		for i := range vars {
			if vars[i].Name == c.Name {
				vars[i].Value = c.Value
				replaced = true
				break
			}
		}
		if !replaced {
			vars = append(vars, c)
		}
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].Name < vars[j].Name })
	var b strings.Builder
	for _, v := range vars {
		b.WriteString(v.Name)
		b.WriteByte('=')
		b.WriteString(v.Value)
		b.WriteByte(0)
	}
	key := b.String()
	if q, ok := ps.m[key]; ok {
		return q
	}
	q := loopsql.NewProfile(key, vars)
	if ps.m == nil {
		ps.m = map[string]*loopsql.Profile{}
	}
	if len(ps.m) < maxProfiles {
		ps.m[key] = q
	}
	return q
}
