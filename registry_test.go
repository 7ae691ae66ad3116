package tether_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
	_ "github.com/tether-php/tether/backend/all"
	"github.com/tether-php/tether/internal/sqltables"
)

func TestRegistry(t *testing.T) {
	want := []string{"bigtable", "cassandra", "http", "mysql", "postgres", "sqlite"}
	got := tether.BackendTypeNames()
	if len(got) != len(want) {
		t.Fatalf("registered types %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("registered types %v, want %v", got, want)
		}
	}
	for name, cs := range map[string]bool{"mysql": true, "postgres": true, "sqlite": false, "http": false} {
		if typ, _ := tether.LookupBackendType(name); typ.ChangeStream != cs {
			t.Errorf("%s: ChangeStream = %v, want %v", name, typ.ChangeStream, cs)
		}
	}
	for name, d := range map[string]sqltables.Dialect{"mysql": sqltables.MySQL, "postgres": sqltables.PostgreSQL, "sqlite": 0, "http": 0, "cassandra": 0, "bigtable": 0} {
		if typ, _ := tether.LookupBackendType(name); typ.Tables != d {
			t.Errorf("%s: Tables = %v, want %v", name, typ.Tables, d)
		}
	}
	for _, name := range want {
		typ, _ := tether.LookupBackendType(name)
		if got := typ.Options != nil && typ.Options.Section == "http"; got != (name == "http") {
			t.Errorf("%s: takes the [backends.NAME.http] settings: %v", name, got)
		}
		if got := typ.Validate != nil; got != (name == "http") {
			t.Errorf("%s: has a Validate hook: %v", name, got)
		}
	}
}

// TestRegistry_Options checks the registry's options hook through
// ParseConfig and Validate: a type's sub-table is decoded by that type (its
// unknown keys are unknown keys of the file), and a backend of another type
// that carries it is refused, with the messages of before the hook.
func TestRegistry_Options(t *testing.T) {
	parse := func(t *testing.T, backend string) (tether.Config, error) {
		t.Helper()
		return tether.ParseConfig(strings.NewReader("[server]\ndefault_backend = \"db\"\n[backends.db]\n" + backend))
	}
	t.Run("UnknownKeyInSection", func(t *testing.T) {
		for _, typ := range []string{"http", "mysql", "oracle"} {
			_, err := parse(t, "type = \""+typ+"\"\ndsn = \"x\"\n[backends.db.http]\ntimeout = \"1s\"\nretries = 3\n")
			if err == nil || err.Error() != "parse config: unknown keys: backends.db.http.retries" {
				t.Errorf("%s: got %v", typ, err)
			}
		}
	})
	t.Run("UnknownSection", func(t *testing.T) {
		_, err := parse(t, "type = \"mysql\"\ndsn = \"x\"\n[backends.db.grpc]\ntimeout = \"1s\"\n")
		if err == nil || err.Error() != "parse config: unknown keys: backends.db.grpc, backends.db.grpc.timeout" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("SectionOfAnotherType", func(t *testing.T) {
		cfg, err := parse(t, "type = \"mysql\"\ndsn = \"u:p@tcp(db:3306)/app\"\n[backends.db.http]\ntimeout = \"1s\"\n")
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		var ce *tether.ConfigError
		if !errors.As(err, &ce) || err.Error() != "config: backends.db.http = {...}: only a backend of type http takes these settings" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("EmptySectionOfAnotherType", func(t *testing.T) {
		// An empty sub-table sets nothing: accepted, as before the hook.
		for _, body := range []string{"", "headers = {}\n", "disable_keep_alive = false\n"} {
			cfg, err := parse(t, "type = \"mysql\"\ndsn = \"u:p@tcp(db:3306)/app\"\n[backends.db.http]\n"+body)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%q: %v", body, err)
			}
		}
	})
	t.Run("ValidateHook", func(t *testing.T) {
		// The type's own checks join the shared ones, in backend order.
		cfg, err := parse(t, "type = \"http\"\ndsn = \"ftp://x\"\nmax_conns = 0\n[backends.db.http]\ntimeout = \"-1s\"\n")
		if err != nil {
			t.Fatal(err)
		}
		want := "config: backends.db.max_conns = 0: must be at least 1\n" +
			"config: backends.db.min_conns = 1: must be between 0 and max_conns (0)\n" +
			"config: backends.db.dsn = \"ftp://x\": must be an http:// or https:// base URL with a host\n" +
			"config: backends.db.http.timeout = -1s: must be 0 (the request's deadline only) or positive"
		if err := cfg.Validate(); err == nil || err.Error() != want {
			t.Fatalf("got\n%v\nwant\n%s", err, want)
		}
	})
}

// TestRegistry_RegisterRefuses checks that a backend type whose options
// could not be told apart from another's, or from the shared keys, is
// refused at registration.
func TestRegistry_RegisterRefuses(t *testing.T) {
	newB := func(tether.BackendConfig) (tether.Backend, error) { return nil, nil }
	decode := func(func(any) error) (any, bool, error) { return nil, false, nil }
	for name, typ := range map[string]tether.BackendType{
		"SectionTaken":   {Name: "test-taken", New: newB, Options: &tether.BackendOptions{Section: "http", Decode: decode}},
		"SectionShared":  {Name: "test-shared", New: newB, Options: &tether.BackendOptions{Section: "max_conns", Decode: decode}},
		"NoDecode":       {Name: "test-nodecode", New: newB, Options: &tether.BackendOptions{Section: "test"}},
		"NoSection":      {Name: "test-nosection", New: newB, Options: &tether.BackendOptions{Decode: decode}},
		"NameRegistered": {Name: "mysql", New: newB},
		"NoConstructor":  {Name: "test-nonew"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("registered")
				}
				if _, ok := tether.LookupBackendType(typ.Name); ok && typ.Name != "mysql" {
					t.Fatal("a refused type is registered")
				}
			}()
			tether.RegisterBackendType(typ)
		})
	}
}

// nilBackend is a backend type whose New fails with a nil pointer, as a
// backend package's New does.
type nilBackend struct{}

func (*nilBackend) Open(context.Context) error  { return nil }
func (*nilBackend) Stats() tether.PoolStats     { return tether.PoolStats{} }
func (*nilBackend) Close(context.Context) error { return nil }

// TestRegistry_Constructor: a failed New gives a nil Backend, not an
// interface holding a nil pointer (which a caller's b != nil would take
// for a backend); a successful one gives the backend.
func TestRegistry_Constructor(t *testing.T) {
	failed := tether.Constructor(func(tether.BackendConfig) (*nilBackend, error) { return nil, errors.New("dsn: bad") })
	if b, err := failed(tether.BackendConfig{}); b != nil || err == nil {
		t.Errorf("failed New: %#v, %v; want a nil Backend and the error", b, err)
	}
	ok := tether.Constructor(func(tether.BackendConfig) (*nilBackend, error) { return &nilBackend{}, nil })
	if b, err := ok(tether.BackendConfig{}); err != nil || b == nil {
		t.Errorf("New: %#v, %v; want the backend", b, err)
	}
}
