package cassandra

import tether "github.com/tether-php/tether"

// Type is the cassandra backend type, registered with tether at init: the config's
// type = "cassandra" builds one with New.
var Type = tether.BackendType{Name: "cassandra", New: tether.Constructor(New)}

func init() { tether.RegisterBackendType(Type) }
