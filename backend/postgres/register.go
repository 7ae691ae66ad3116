package postgres

import (
	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/sqltables"
)

// Type is the postgres backend type, registered with tether at init: the config's
// type = "postgres" builds one with New.
var Type = tether.BackendType{Name: "postgres", New: newBackend, ChangeStream: true, Replicas: true, Tables: sqltables.PostgreSQL}

func init() { tether.RegisterBackendType(Type) }
