package sqlpool

import (
	"sort"
	"strings"
)

// Setting is one session variable and its value, as the server reports it.
type Setting struct {
	Name  string // lower case
	Value string
}

// Profile is a set of session settings a client made (SET NAMES, time_zone,
// sql_mode, search_path...) with the values the server reported for them. A
// nil *Profile is the pool's baseline: nothing set. Profiles are immutable
// and interned per pool, so that comparing a client's with a connection's is
// one pointer comparison on the path every statement takes.
type Profile struct {
	key  string    // canonical form, the intern key
	vars []Setting // sorted by name
}

// Settings returns the profile's settings, sorted by name. Do not modify.
func (p *Profile) Settings() []Setting {
	if p == nil {
		return nil
	}
	return p.vars
}

// Get returns the value of name, and whether the profile sets it.
func (p *Profile) Get(name string) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, s := range p.vars {
		if s.Name == name {
			return s.Value, true
		}
	}
	return "", false
}

// NewProfile returns a profile of vars, which must be sorted by name and
// hold lower-case names, with key their canonical form (for pools, which
// intern them: see profiles).
func NewProfile(key string, vars []Setting) *Profile { return &Profile{key: key, vars: vars} }

// Key returns the canonical form, the intern key.
func (p *Profile) Key() string {
	if p == nil {
		return ""
	}
	return p.key
}

// String is the canonical form, for logs and tests.
func (p *Profile) String() string {
	if p == nil {
		return "(baseline)"
	}
	return p.key
}

// Diff is what turns one session's settings into another's: variables to set
// to a value, and variables to return to their default.
type Diff struct {
	Set   []Setting
	Reset []string
}

// Empty reports whether nothing differs.
func (d Diff) Empty() bool { return len(d.Set) == 0 && len(d.Reset) == 0 }

// DiffProfiles returns what takes a session from settings from to settings to.
func DiffProfiles(from, to *Profile) Diff {
	var d Diff
	for _, s := range to.Settings() {
		if v, ok := from.Get(s.Name); !ok || v != s.Value {
			d.Set = append(d.Set, s)
		}
	}
	for _, s := range from.Settings() {
		if _, ok := to.Get(s.Name); !ok {
			d.Reset = append(d.Reset, s.Name)
		}
	}
	return d
}

// Equal reports whether two profiles hold the same settings (interned ones
// are equal exactly when they are the same pointer; this also covers the
// ones a pool could not intern).
func Equal(a, b *Profile) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.key == b.key
}

// maxProfiles bounds the interned profiles of a pool: a client that sets a
// new time zone per request cannot grow the table without bound; past it, new
// profiles still work, only without sharing.
const maxProfiles = 4096

// profiles interns the profiles of one pool. Loop goroutine only.
type profiles struct {
	m map[string]*Profile
}

// with returns p with changes applied (each change replaces the variable's
// value), interned.
func (ps *profiles) with(p *Profile, changes []Setting) *Profile {
	if len(changes) == 0 {
		return p
	}
	vars := make([]Setting, 0, len(p.Settings())+len(changes))
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
	q := NewProfile(key, vars)
	if ps.m == nil {
		ps.m = map[string]*Profile{}
	}
	if len(ps.m) < maxProfiles {
		ps.m[key] = q
	}
	return q
}
