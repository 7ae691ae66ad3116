package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	_ "github.com/go-sql-driver/mysql"
)

// sqlPoint is the same statement the PHP pages of bench/web run.
const sqlPoint = "SELECT id, name, score, created FROM bench_kv WHERE id = ?"

// mariaDB serves /point from a database/sql pool with one prepared statement.
type mariaDB struct {
	db    *sql.DB
	point *sql.Stmt
}

// openMariaDB opens a pool of exactly pool connections, all connected before it returns, and prepares sqlPoint.
func openMariaDB(ctx context.Context, dsn string, pool int) (*mariaDB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	db.SetConnMaxIdleTime(0)
	// Open the whole pool now, so that connection counts and the first requests are steady from the start.
	conns := make([]*sql.Conn, 0, pool)
	for range pool {
		c, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("connect mysql: %w", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	stmt, err := db.PrepareContext(ctx, sqlPoint)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return &mariaDB{db: db, point: stmt}, nil
}

func (m *mariaDB) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /point", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.URL.Query().Get("id"))
		if err != nil {
			badRequest(w, "id: want an integer")
			return
		}
		serveRead(w, func() (any, error) {
			var row struct {
				ID      int    `json:"id"`
				Name    string `json:"name"`
				Score   int    `json:"score"`
				Created string `json:"created"`
			}
			err := m.point.QueryRowContext(r.Context(), id).Scan(&row.ID, &row.Name, &row.Score, &row.Created)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, errNotFound
			}
			return row, err
		})
	})
}

// Close closes the statement and the pool.
func (m *mariaDB) Close() error {
	m.point.Close()
	return m.db.Close()
}
