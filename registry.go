package tether

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tether-php/tether/internal/sqltables"
)

// BackendType is one kind of backend tetherd can run: the name a config's
// [backends.NAME] type gives, what of the config it takes, and its
// constructor. Each backend package registers its own from init
// (RegisterBackendType); a program links the types it runs by importing
// their packages (backend/all links every one). The registry is the one list
// of types: Config.Validate checks a backend's type and settings against it,
// and tetherd, its -check and its reloads build backends through it.
type BackendType struct {
	Name string
	// New builds a backend from its config: it checks the DSN and every
	// option, reads the files they name (TLS certificates and keys), and
	// connects nothing (Backend's lifecycle, step 1). Its errors should
	// name the setting at fault ("dsn: ...", "http.tls_ca_file: ...").
	New func(BackendConfig) (Backend, error)
	// Options, when the type has settings no other type has, reads them
	// from their own sub-table of its config ([backends.NAME.http] for
	// http); nil when it has none.
	Options *BackendOptions
	// Validate, when set, checks what Config.Validate cannot know of a
	// backend of this type: its Options, and what the shared settings mean
	// for it (an http dsn is a base URL). prefix is "backends.NAME.". It
	// returns every problem, each a *ConfigError naming the field
	// (prefix+"http.timeout") and the value given, joined with errors.Join;
	// nil when there is none. Like Config.Validate it has no side effects
	// (it reads no file: New does). cfg.Options is what Options.Decode
	// returned, or nil for a config built in code.
	Validate func(prefix string, cfg BackendConfig) error
	// ChangeStream: it can follow its database's change stream
	// (change_stream = true).
	ChangeStream bool
	// Replicas: it can route over a primary and replicas (replicas = [...]).
	Replicas bool
	// Tables is the SQL dialect in which the result cache reads which
	// tables a statement reads or writes, so that a write drops only the
	// cached results that read its tables (cache by table); 0 for a type
	// whose statements it cannot read that way.
	Tables sqltables.Dialect
	// LazyOpen: its Open connects nothing (an http upstream may start after
	// tetherd; calls dial it), so a check that opens it proves nothing more.
	LazyOpen bool
}

// BackendOptions is how a backend type reads the settings only it has: the
// sub-table [backends.NAME.<Section>] of a backend's config. ParseConfig
// calls Decode once for every backend of the type (with or without the
// sub-table in the file) and keeps what it returns in BackendConfig.Options,
// for the type's Validate and New. It also calls the Decode of every other
// type whose sub-table a backend carries, and Validate then refuses that
// backend ("only a backend of type http takes these settings") if the
// sub-table sets anything.
type BackendOptions struct {
	// Section is the sub-table's key: a key no other type owns and none of
	// BackendConfig's own keys (type, dsn, max_conns, ...).
	Section string
	// Decode returns the type's options read from the sub-table: it calls
	// decode with a pointer to its options value, which decode fills from
	// the sub-table (leaving it as it is when the file has none). A key the
	// value has no field for is an unknown key, reported by ParseConfig like
	// any other; decode's errors name the key and the line, and Decode
	// returns them as they are. set reports whether the options set
	// anything (an empty sub-table sets nothing).
	Decode func(decode func(v any) error) (opts any, set bool, err error)
}

var registry struct {
	sync.RWMutex
	types map[string]BackendType
}

// Constructor adapts a backend package's New, which returns its own type,
// to BackendType.New: a failed New gives a nil Backend, never a non-nil
// interface holding a nil pointer.
func Constructor[B Backend](newB func(BackendConfig) (B, error)) func(BackendConfig) (Backend, error) {
	return func(cfg BackendConfig) (Backend, error) {
		b, err := newB(cfg)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// RegisterBackendType adds t to the backend types tetherd knows. It panics
// on an empty name, a nil constructor, a name registered twice, or Options
// without a Section and a Decode or whose Section is a key BackendConfig or
// another type already has: all are programming errors, found at init.
func RegisterBackendType(t BackendType) {
	if t.Name == "" || t.New == nil {
		panic("tether: RegisterBackendType: a backend type needs a name and a constructor")
	}
	if o := t.Options; o != nil && (o.Section == "" || o.Decode == nil) {
		panic("tether: RegisterBackendType: backend type " + t.Name + ": Options needs a Section and a Decode")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.types[t.Name]; dup {
		panic("tether: RegisterBackendType: backend type " + t.Name + " registered twice")
	}
	if o := t.Options; o != nil {
		if backendConfigKeys()[o.Section] {
			panic("tether: RegisterBackendType: backend type " + t.Name + ": section " + o.Section + " is a key every backend has")
		}
		for _, other := range registry.types {
			if other.Options != nil && other.Options.Section == o.Section {
				panic("tether: RegisterBackendType: backend type " + t.Name + ": section " + o.Section + " is backend type " + other.Name + "'s")
			}
		}
	}
	if registry.types == nil {
		registry.types = map[string]BackendType{}
	}
	registry.types[t.Name] = t
}

// LookupBackendType returns the registered backend type of that name.
func LookupBackendType(name string) (BackendType, bool) {
	registry.RLock()
	defer registry.RUnlock()
	t, ok := registry.types[name]
	return t, ok
}

// optionTypes returns the registered types that have Options, sorted by
// name.
func optionTypes() []BackendType {
	var out []BackendType
	for _, name := range BackendTypeNames() {
		if t, _ := LookupBackendType(name); t.Options != nil {
			out = append(out, t)
		}
	}
	return out
}

// BackendTypeNames returns the names of the registered backend types, sorted.
func BackendTypeNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.types))
	for name := range registry.types {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// NewBackend builds (without connecting) the backend a config names, through
// its registered type; it is a NewBackendFunc, for reloads. Its error is the
// type's constructor's (naming the setting at fault), or an unknown type's;
// the caller names the backend.
func NewBackend(name string, cfg BackendConfig) (Backend, error) {
	t, ok := LookupBackendType(cfg.Type)
	if !ok {
		return nil, fmt.Errorf("type %q: no backend type of that name is linked in (known: %s)", cfg.Type, strings.Join(BackendTypeNames(), ", "))
	}
	return t.New(cfg)
}

// newNamedBackend is NewBackend with the backend and its type named in its
// error: "backends.NAME (TYPE): ...".
func newNamedBackend(name string, cfg BackendConfig) (Backend, error) {
	b, err := NewBackend(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("backends.%s (%s): %w", name, cfg.Type, err)
	}
	return b, nil
}

// NewBackends builds (without connecting) every backend of c. It returns
// every backend's error, joined, each naming its backend; on an error it
// returns no backend.
func (c *Config) NewBackends() (map[string]Backend, error) {
	out := make(map[string]Backend, len(c.Backends))
	var errs []error
	for _, name := range c.backendNames() {
		b, err := newNamedBackend(name, c.Backends[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = b
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// backendNames returns the names of c's backends, sorted.
func (c *Config) backendNames() []string {
	names := make([]string, 0, len(c.Backends))
	for name := range c.Backends {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// BackendCheck is what CheckBackends found of one backend.
type BackendCheck struct {
	Backend string
	Type    string
	// Err: why it could not be built (its config), or with connect, why it
	// could not be opened (the server's own answer: a wrong password, an
	// unknown database, nobody listening); nil when it passed.
	Err error
	// Connected: it was opened, and closed again.
	Connected bool
	Lazy      bool          // its type's Open connects nothing (BackendType.LazyOpen)
	Took      time.Duration // the build, or with connect the open
}

// CheckBackends builds every backend of c, as tetherd's start would (every
// DSN and option parsed, every file read), and with connect also opens each
// one (one connection: logs in, then closes it) within its connect_timeout
// and ctx. It returns one BackendCheck per backend, sorted by name; the
// config is valid for a start only if none has an Err. Without connect it
// has no side effects. A type whose Open connects nothing (LazyOpen: an
// http upstream) is only built.
func CheckBackends(ctx context.Context, c *Config, connect bool) []BackendCheck {
	names := c.backendNames()
	out := make([]BackendCheck, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		bc := c.Backends[name]
		out[i] = BackendCheck{Backend: name, Type: bc.Type}
		start := time.Now()
		if connect {
			bc.MinConns = min(bc.MinConns, 1) // one connection proves the login
		}
		b, err := newNamedBackend(name, bc)
		out[i].Err, out[i].Took = err, time.Since(start)
		if t, ok := LookupBackendType(bc.Type); ok {
			out[i].Lazy = t.LazyOpen
		}
		if err != nil || !connect || out[i].Lazy {
			continue
		}
		wg.Add(1)
		go func(r *BackendCheck, bc BackendConfig) {
			defer wg.Done()
			start := time.Now()
			octx, cancel := context.WithTimeout(ctx, time.Duration(bc.ConnectTimeout)+time.Second)
			defer cancel()
			if err := b.Open(octx); err != nil {
				r.Err = fmt.Errorf("backends.%s (%s): open: %w", r.Backend, r.Type, err)
				r.Took = time.Since(start)
				return
			}
			r.Connected, r.Took = true, time.Since(start)
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b.Close(cctx)
		}(&out[i], bc)
	}
	wg.Wait()
	return out
}

// WriteBackendChecks prints one line per check to w (what -check and tether
// check show), a failure with its reason, and returns an error naming the
// backends that failed, or nil.
func WriteBackendChecks(w io.Writer, checks []BackendCheck, connect bool) error {
	var failed []string
	for _, c := range checks {
		switch {
		case c.Err != nil:
			fmt.Fprintf(w, "FAIL %s\n", c.Err)
			failed = append(failed, c.Backend)
		case connect && c.Lazy:
			fmt.Fprintf(w, "ok   backends.%s (%s): built (it connects on its first call, not before)\n", c.Backend, c.Type)
		case c.Connected:
			fmt.Fprintf(w, "ok   backends.%s (%s): connected (%s)\n", c.Backend, c.Type, c.Took.Round(time.Millisecond))
		default:
			fmt.Fprintf(w, "ok   backends.%s (%s): built (not connected)\n", c.Backend, c.Type)
		}
	}
	if len(failed) > 0 {
		what := "could not be built"
		if connect {
			what = "failed"
		}
		return fmt.Errorf("%d of %d backends %s (see above): %s", len(failed), len(checks), what, strings.Join(failed, ", "))
	}
	return nil
}
