package main

import (
	"fmt"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/bigtable"
	"github.com/tether-php/tether/backend/cassandra"
	httpup "github.com/tether-php/tether/backend/http"
	"github.com/tether-php/tether/backend/mysql"
	"github.com/tether-php/tether/backend/postgres"
	"github.com/tether-php/tether/backend/sqlite"
)

// backendTypes maps a config's backend type to its constructor. A new backend
// package adds one line here and its name to tether.BackendTypes.
var backendTypes = map[string]func(tether.BackendConfig) (tether.Backend, error){
	"sqlite":    func(c tether.BackendConfig) (tether.Backend, error) { return sqlite.New(c) },
	"mysql":     func(c tether.BackendConfig) (tether.Backend, error) { return mysql.New(c) },
	"postgres":  func(c tether.BackendConfig) (tether.Backend, error) { return postgres.New(c) },
	"bigtable":  func(c tether.BackendConfig) (tether.Backend, error) { return bigtable.New(c) },
	"cassandra": func(c tether.BackendConfig) (tether.Backend, error) { return cassandra.New(c) },
	"http":      func(c tether.BackendConfig) (tether.Backend, error) { return httpup.New(c) },
}

// newBackends constructs (without connecting) every configured backend.
func newBackends(cfg tether.Config) (map[string]tether.Backend, error) {
	out := make(map[string]tether.Backend, len(cfg.Backends))
	for name, bc := range cfg.Backends {
		b, err := newBackend(name, bc)
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// newBackend constructs (without connecting) one backend; it is a
// tether.NewBackendFunc, for reloads.
func newBackend(name string, bc tether.BackendConfig) (tether.Backend, error) {
	construct, ok := backendTypes[bc.Type]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", bc.Type)
	}
	return construct(bc)
}
