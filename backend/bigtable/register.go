package bigtable

import tether "github.com/tether-php/tether"

// Type is the bigtable backend type, registered with tether at init: the config's
// type = "bigtable" builds one with New.
var Type = tether.BackendType{Name: "bigtable", New: tether.Constructor(New)}

func init() { tether.RegisterBackendType(Type) }
