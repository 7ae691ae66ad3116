// Command goservice is the remedy of seed experiments E1 and E2, kept as a reference for the web benchmark
// (bench/web): a minimal HTTP+JSON service in idiomatic Go that holds warm connections to MariaDB, Cassandra and
// Bigtable, which a PHP page calls instead of talking to the database itself.
//
// It is written the way such a sidecar usually is, and is not tuned: net/http, encoding/json, and each database's
// usual Go client with its defaults (database/sql with go-sql-driver/mysql and one prepared statement; the Apache
// Cassandra Go driver; cloud.google.com/go/bigtable).
//
//	goservice -listen 127.0.0.1:18089 -pool 4 \
//	    -dsn 'user:pass@unix(/path/mysqld.sock)/db' \
//	    -cassandra 127.0.0.1:19042 -cassandra-user u -cassandra-password p -cassandra-keyspace test \
//	    -bigtable project/instance/table           # with BIGTABLE_EMULATOR_HOST=host:port for an emulator
//
// Each backend is optional; its endpoints exist only when it is configured. Endpoints (GET):
//
//	/ping                    {"ok":true}
//	/point?id=N              MariaDB: the row of bench_kv with primary key N:
//	                         {"id":N,"name":"...","score":N,"created":"YYYY-MM-DD hh:mm:ss"}
//	/cass/row?key=K          Cassandra: every column of row K of c1 (seed E1's get('a')), in column order:
//	                         {"key":"K","columns":[{"name":"col01","value":"<base64>"},...]}
//	/cass/super?key=K&super=S  Cassandra: the columns of super column S of row K of s1 (get_super_column('a','b1')),
//	                         in the same shape, with "super_column":"S"
//	/bt/row?key=K            Bigtable: the latest cell of each column of row K:
//	                         {"key":"K","columns":{"family:qualifier":"<base64>",...}}
//
// Values that are bytes in the database (Cassandra blobs, Bigtable cells) are base64 in JSON, as encoding/json
// writes []byte. A row that does not exist is 404 {"error":"not found"} (a Cassandra row or super column with no
// columns too); a missing parameter is 400. Every answer from a database carries a Server-Timing header with the
// time of the database call ("db;dur=0.123", in ms), so that a caller can tell it from the rest of the round trip.
//
// It connects to every configured backend before it listens, and prints "ready" on stdout once it does; SIGTERM
// or SIGINT stops it (in-flight requests get 5 s).
package main

import (
	"context"
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
	"strings"
	"syscall"
	"time"
)

// errNotFound is what a handler's read returns for a row that does not exist (404).
var errNotFound = errors.New("not found")

func main() {
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:18089", "TCP address to serve HTTP on")
	flag.IntVar(&c.pool, "pool", 4, "connections held open per backend (database/sql: max open = max idle; Cassandra: per node)")
	flag.StringVar(&c.mysqlDSN, "dsn", "", "go-sql-driver/mysql DSN of the MariaDB holding bench_kv")
	flag.StringVar(&c.cassHost, "cassandra", "", "host:port of a Cassandra node")
	flag.StringVar(&c.cassUser, "cassandra-user", "", "Cassandra user (PasswordAuthenticator)")
	flag.StringVar(&c.cassPassword, "cassandra-password", "", "Cassandra password")
	flag.StringVar(&c.cassKeyspace, "cassandra-keyspace", "test", "keyspace holding c1 and s1")
	flag.StringVar(&c.bigtable, "bigtable", "", "PROJECT/INSTANCE/TABLE of Bigtable (BIGTABLE_EMULATOR_HOST selects an emulator)")
	flag.Parse()
	if c.mysqlDSN == "" && c.cassHost == "" && c.bigtable == "" {
		log.Fatal("goservice: configure at least one backend: -dsn, -cassandra or -bigtable")
	}
	if err := run(c); err != nil {
		log.Fatalf("goservice: %v", err)
	}
}

type config struct {
	listen, mysqlDSN                               string
	pool                                           int
	cassHost, cassUser, cassPassword, cassKeyspace string
	bigtable                                       string
}

// run opens the configured backends, serves until SIGTERM or SIGINT and drains.
func run(c config) error {
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	if c.mysqlDSN != "" {
		m, err := openMariaDB(ctx, c.mysqlDSN, c.pool)
		if err != nil {
			return err
		}
		defer m.Close()
		m.register(mux)
	}
	if c.cassHost != "" {
		cs, err := openCassandra(c.cassHost, c.cassUser, c.cassPassword, c.cassKeyspace, c.pool)
		if err != nil {
			return err
		}
		defer cs.Close()
		cs.register(mux)
	}
	if c.bigtable != "" {
		parts := strings.Split(c.bigtable, "/")
		if len(parts) != 3 {
			return fmt.Errorf("-bigtable %q: want PROJECT/INSTANCE/TABLE", c.bigtable)
		}
		bt, err := openBigtable(ctx, parts[0], parts[1], parts[2])
		if err != nil {
			return err
		}
		defer bt.Close()
		bt.register(mux)
	}

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.listen, err)
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

// serveRead times read, the database call of a request, and answers its result as JSON with a Server-Timing
// header: 404 for errNotFound, 500 for any other error.
func serveRead(w http.ResponseWriter, read func() (any, error)) {
	t := time.Now()
	v, err := read()
	w.Header().Set("Server-Timing", "db;dur="+strconv.FormatFloat(float64(time.Since(t).Microseconds())/1000, 'f', 3, 64))
	switch {
	case errors.Is(err, errNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// badRequest answers 400 with a message.
func badRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": msg})
}

// writeJSON writes v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("goservice: write response: %v", err)
	}
}
