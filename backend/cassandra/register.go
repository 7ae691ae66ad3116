package cassandra

import tether "github.com/tether-php/tether"

// Type is the cassandra backend type, registered with tether at init: the config's
// type = "cassandra" builds one with New.
var Type = tether.BackendType{Name: "cassandra", New: newBackend}

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
