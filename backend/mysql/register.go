package mysql

import (
	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/sqltables"
)

// Type is the mysql backend type, registered with tether at init: the config's
// type = "mysql" builds one with New.
var Type = tether.BackendType{Name: "mysql", New: newBackend, ChangeStream: true, Replicas: true, Tables: sqltables.MySQL}

func init() { tether.RegisterBackendType(Type) }
