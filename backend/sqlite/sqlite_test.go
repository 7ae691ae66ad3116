package sqlite_test

import (
	"path/filepath"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/backend/sqlite"
)

func TestBackend(t *testing.T) {
	dir := t.TempDir()
	backendtest.Run(t, &backendtest.Suite{
		Dialect: backendtest.Dialect{
			Placeholder: func(int) string { return "?" },
			BigInt:      "INTEGER", Float: "REAL", Text: "TEXT", Blob: "BLOB", Decimal: "DECIMAL(10,2)",
			Date: "DATE", DateTime: "DATETIME", Bool: "BOOLEAN",
			DecimalExact: false, // NUMERIC affinity stores 12345.67 as a REAL
			HasInsertID:  true,
			AutoID:       "INTEGER PRIMARY KEY AUTOINCREMENT",
			Sleep: func(int) string {
				return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
			},
			SetSession: "PRAGMA cache_size = 1234", ReadSession: "PRAGMA cache_size", SessionLeaked: "1234",
			CreateTemp: "CREATE TEMP TABLE tmp_leak (id INTEGER)",
		},
		Config: func(t *testing.T) tether.BackendConfig {
			return tether.DefaultBackendConfig("sqlite", filepath.Join(dir, "test.db"))
		},
		New: func(t *testing.T, cfg tether.BackendConfig) backendtest.SQLBackend {
			b, err := sqlite.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
