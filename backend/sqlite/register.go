package sqlite

import tether "github.com/tether-php/tether"

// Type is the sqlite backend type, registered with tether at init: the config's
// type = "sqlite" builds one with New.
var Type = tether.BackendType{Name: "sqlite", New: tether.Constructor(New)}

func init() { tether.RegisterBackendType(Type) }
