// Command goservice is the remedy of seed experiment E2, kept as a reference for the web benchmark
// (bench/web): a minimal HTTP+JSON service in idiomatic Go that holds a pool of MariaDB connections, which a PHP
// page calls instead of connecting to the database itself.
//
// It is written the way such a sidecar usually is, and is not tuned: net/http, database/sql with
// go-sql-driver/mysql, one prepared statement, encoding/json.
//
//	goservice -listen 127.0.0.1:18089 -dsn 'user:pass@unix(/path/mysqld.sock)/db' -pool 4
//
// Endpoints (GET):
//
//	/ping          {"ok":true}
//	/point?id=N    the row of bench_kv with primary key N: {"id":N,"name":"...","score":N,"created":"YYYY-MM-DD hh:mm:ss"};
//	               404 {"error":"not found"} when there is none, 400 when id is not an integer
//
// It connects its whole pool before it listens, and prints "ready" on stdout once it does; SIGTERM or SIGINT
// stops it (in-flight requests get 5 s).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// sqlPoint is the same statement the PHP pages of bench/web run.
const sqlPoint = "SELECT id, name, score, created FROM bench_kv WHERE id = ?"

func main() {
	listen := flag.String("listen", "127.0.0.1:18089", "TCP address to serve HTTP on")
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN of the database holding bench_kv (required)")
	pool := flag.Int("pool", 4, "database connections held open (max open = max idle)")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("goservice: -dsn is required")
	}
	if err := run(*listen, *dsn, *pool); err != nil {
		log.Fatalf("goservice: %v", err)
	}
}

// run opens the pool, serves until SIGTERM or SIGINT and drains.
func run(listen, dsn string, pool int) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	db.SetConnMaxIdleTime(0)
	ctx := context.Background()
	// Open the whole pool now, so that connection counts and the first requests are steady from the start.
	conns := make([]*sql.Conn, 0, pool)
	for range pool {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("connect mysql: %w", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	stmt, err := db.PrepareContext(ctx, sqlPoint)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer stmt.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("GET /point", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.URL.Query().Get("id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "id: want an integer"})
			return
		}
		var row struct {
			ID      int    `json:"id"`
			Name    string `json:"name"`
			Score   int    `json:"score"`
			Created string `json:"created"`
		}
		err = stmt.QueryRowContext(r.Context(), id).Scan(&row.ID, &row.Name, &row.Score, &row.Created)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, row)
		}
	})

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Println("ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-sig:
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// writeJSON writes v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("goservice: write response: %v", err)
	}
}
