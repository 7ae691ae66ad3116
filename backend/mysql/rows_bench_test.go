package mysql_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/mysql"
)

// BenchmarkQuery500 reads 500 rows of 6 columns: the cost of tetherd's row
// path (driver, database/sql, value conversion) per result.
func BenchmarkQuery500(b *testing.B) {
	dsn := os.Getenv("TETHER_TEST_MYSQL_DSN")
	if dsn == "" {
		b.Skip("TETHER_TEST_MYSQL_DSN not set")
	}
	ctx := context.Background()
	db, err := mysql.New(tether.DefaultBackendConfig("mysql", dsn))
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	db.Exec(ctx, tether.Statement{SQL: "DROP TABLE IF EXISTS bench_users"})
	if _, err := db.Exec(ctx, tether.Statement{SQL: "CREATE TABLE bench_users (id INT PRIMARY KEY, name VARCHAR(64), email VARCHAR(128), group_code VARCHAR(16), score DOUBLE, created DATETIME)"}); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= 1000; i++ {
		db.Exec(ctx, tether.Statement{SQL: "INSERT INTO bench_users VALUES (?, ?, ?, ?, ?, NOW())",
			Params: []any{int64(i), fmt.Sprint("user", i), fmt.Sprint("user", i, "@example.com"), fmt.Sprint("g", i%20), float64(i) / 3}})
	}
	st := tether.Statement{SQL: "SELECT * FROM bench_users WHERE id BETWEEN ? AND ? ORDER BY id", Params: []any{int64(1), int64(500)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := db.Query(ctx, st)
		if err != nil || len(res.Rows) != 500 {
			b.Fatal(err)
		}
	}
}
