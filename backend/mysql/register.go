package mysql

import (
	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/internal/sqltables"
)

// Type is the mysql backend type, registered with tether at init: the config's
// type = "mysql" builds one with New.
var Type = tether.BackendType{Name: "mysql", New: newBackend, ChangeStream: true, Tables: sqltables.MySQL}

func init() { tether.RegisterBackendType(Type) }

// newBackend is New as a BackendType's constructor (a nil *Backend must not
// become a non-nil tether.Backend).
func newBackend(cfg tether.BackendConfig) (tether.Backend, error) {
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return b, nil
}
