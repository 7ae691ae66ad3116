package main

// Every backend type registers itself with tether's registry
// (tether.RegisterBackendType); this import links them all in.
import _ "github.com/tether-php/tether/backend/all"
