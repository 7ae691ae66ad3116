package main

import (
	"fmt"
	"net/http"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// cassandra serves seed E1's reads from one driver session, with the driver's defaults but for the pool size and
// write coalescing, which is off as in tetherd (a 200 us coalescing wait costs each lone read about 1 ms here), so
// that the two differ only in how PHP reaches them.
type cassandra struct {
	s *gocql.Session
}

// cell is one column of a Thrift-era row: its name and its value (base64 in JSON).
type cell struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// openCassandra creates the session, which connects to the node before it returns.
func openCassandra(host, user, password, keyspace string, pool int) (*cassandra, error) {
	cluster := gocql.NewCluster(host)
	cluster.Keyspace = keyspace
	cluster.Consistency = gocql.One
	cluster.NumConns = pool
	cluster.WriteCoalesceWaitTime = 0
	if user != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: password}
	}
	s, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect cassandra %s: %w", host, err)
	}
	return &cassandra{s: s}, nil
}

func (c *cassandra) register(mux *http.ServeMux) {
	// get('a') on c1: the whole row.
	mux.HandleFunc("GET /cass/row", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			badRequest(w, "key is required")
			return
		}
		serveRead(w, func() (any, error) {
			cells, err := c.cells(r, "SELECT column1, value FROM c1 WHERE key = ?", key)
			return map[string]any{"key": key, "columns": cells}, err
		})
	})
	// get_super_column('a', 'b1') on s1: one super column's slice of the row.
	mux.HandleFunc("GET /cass/super", func(w http.ResponseWriter, r *http.Request) {
		key, super := r.URL.Query().Get("key"), r.URL.Query().Get("super")
		if key == "" || super == "" {
			badRequest(w, "key and super are required")
			return
		}
		serveRead(w, func() (any, error) {
			cells, err := c.cells(r, "SELECT column, value FROM s1 WHERE key = ? AND super_column = ?", key, super)
			return map[string]any{"key": key, "super_column": super, "columns": cells}, err
		})
	})
}

// cells runs a query of (name, value) rows and returns them; errNotFound when there are none.
func (c *cassandra) cells(r *http.Request, stmt string, args ...any) ([]cell, error) {
	iter := c.s.Query(stmt, args...).WithContext(r.Context()).Iter()
	var cells []cell
	var name string
	var value []byte
	for iter.Scan(&name, &value) {
		cells = append(cells, cell{Name: name, Value: value})
		value = nil // Scan reuses the slice otherwise
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	if len(cells) == 0 {
		return nil, errNotFound
	}
	return cells, nil
}

// Close closes the session.
func (c *cassandra) Close() error {
	c.s.Close()
	return nil
}
