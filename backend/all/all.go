// Package all links every backend type into a program: importing it (for
// its side effect) registers sqlite, mysql, postgres, cassandra, bigtable and
// http with tether's registry of backend types (tether.RegisterBackendType).
// tetherd and the tether CLI import it; a new backend package adds one line
// here.
package all

import (
	_ "github.com/tether-php/tether/backend/bigtable"
	_ "github.com/tether-php/tether/backend/cassandra"
	_ "github.com/tether-php/tether/backend/http"
	_ "github.com/tether-php/tether/backend/mysql"
	_ "github.com/tether-php/tether/backend/postgres"
	_ "github.com/tether-php/tether/backend/sqlite"
)
