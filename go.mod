module github.com/tether-php/tether

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/go-sql-driver/mysql v1.10.1
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mattn/go-sqlite3 v1.14.52
	github.com/tinylib/msgp v1.6.5
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
