package main

import (
	"context"
	"fmt"
	"net/http"

	"cloud.google.com/go/bigtable"
)

// bigtableRows serves seed E2's random single-row reads from one client (on an emulator: one gRPC connection).
type bigtableRows struct {
	c   *bigtable.Client
	tbl *bigtable.Table
}

// openBigtable creates the client and reads one row, so that the channel is up before the service listens.
func openBigtable(ctx context.Context, project, instance, table string) (*bigtableRows, error) {
	c, err := bigtable.NewClient(ctx, project, instance)
	if err != nil {
		return nil, fmt.Errorf("bigtable client %s/%s: %w", project, instance, err)
	}
	b := &bigtableRows{c: c, tbl: c.Open(table)}
	if _, err := b.tbl.ReadRow(ctx, "1"); err != nil {
		c.Close()
		return nil, fmt.Errorf("bigtable read %s: %w", table, err)
	}
	return b, nil
}

func (b *bigtableRows) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /bt/row", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			badRequest(w, "key is required")
			return
		}
		serveRead(w, func() (any, error) {
			row, err := b.tbl.ReadRow(r.Context(), key, bigtable.RowFilter(bigtable.LatestNFilter(1)))
			if err != nil {
				return nil, err
			}
			if len(row) == 0 {
				return nil, errNotFound
			}
			cols := map[string][]byte{}
			for _, items := range row {
				for _, it := range items {
					cols[it.Column] = it.Value
				}
			}
			return map[string]any{"key": key, "columns": cols}, nil
		})
	})
}

// Close closes the client.
func (b *bigtableRows) Close() error {
	return b.c.Close()
}
