package httpup

import tether "github.com/tether-php/tether"

// Type is the http backend type, registered with tether at init: the config's
// type = "http" builds one with New; its own settings are the
// [backends.NAME.http] sub-table (Config), which validate checks.
var Type = tether.BackendType{
	Name:     "http",
	New:      tether.Constructor(New),
	Options:  &tether.BackendOptions{Section: "http", Decode: decodeOptions},
	Validate: validate,
	LazyOpen: true,
}

func init() { tether.RegisterBackendType(Type) }
