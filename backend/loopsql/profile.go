package loopsql

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
// intern them; see sqlpool).
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
