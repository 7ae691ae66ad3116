package backendtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

// LeakCase is a statement that may leave state behind in the session it ran
// on, and how the suite finds out whether that state reached other clients.
// These are the statements a fault campaign found to slip past tetherd's
// former guess from the SQL text (docs/reliability.md); the guard now is the
// server's own report.
//
// In Statement, Probe and DirectProbe, {table} names a real table the suite
// creates for the case (id auto-increment, v text), so that a statement can
// try to shadow it.
type LeakCase struct {
	Name      string
	Statement string // run as one client would, with exec; it may fail, it must not leak
	// Probe is a query another client runs afterwards on the same pool; its
	// first value, formatted with %v, must be Clean (with CleanFromDirect:
	// what the same query returns on an independent connection), or, with
	// ProbeErr, it must fail (EXECUTE of a statement the case prepared).
	Probe, Clean    string
	CleanFromDirect bool
	ProbeErr        bool
	// WriteLoss: after Statement, other clients insert 20 rows into {table};
	// every insert acknowledged must be visible to an independent connection,
	// after the pool is closed.
	WriteLoss bool
	// DirectProbe runs on an independent connection while the pool is still
	// open (a lock the session may still hold); its first value must be
	// DirectClean.
	DirectProbe, DirectClean string
}

// LeakSuite runs LeakCases against a backend.
type LeakSuite struct {
	// New returns an unopened backend with the given pool settings.
	New    func(t *testing.T, cfg tether.BackendConfig) SQLBackend
	Config func(t *testing.T) tether.BackendConfig
	// Direct opens an independent connection to the same database, through
	// the driver's own library, not tetherd.
	Direct func(t *testing.T) *sql.DB
	// AutoID is the column definition of an auto-increment primary key.
	AutoID string
	Cases  []LeakCase
}

// RunLeaks runs every case on a pool of one connection, so that each
// statement of the other clients would share the session the case's
// statement ran on, were it returned to the pool dirty. It reports, per case,
// what the statement returned and what leaked (nothing, for a pass).
func RunLeaks(t *testing.T, s *LeakSuite) {
	direct := s.Direct(t)
	t.Cleanup(func() { direct.Close() })
	lost, acked := 0, 0
	for i, lc := range s.Cases {
		t.Run(lc.Name, func(t *testing.T) {
			tbl := fmt.Sprintf("leak_%d_%d", i, time.Now().UnixNano()%1e6)
			if _, err := direct.Exec(fmt.Sprintf("CREATE TABLE %s (id %s, v VARCHAR(64))", tbl, s.AutoID)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { direct.Exec("DROP TABLE " + tbl) })
			sub := func(q string) string { return strings.ReplaceAll(q, "{table}", tbl) }

			cfg := s.Config(t)
			cfg.MaxConns, cfg.MinConns = 1, 1
			b := s.New(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := b.Open(ctx); err != nil {
				t.Fatal(err)
			}
			closed := false
			closeB := func() {
				if !closed {
					closed = true
					b.Close(context.Background())
				}
			}
			defer closeB()

			_, stErr := b.Exec(ctx, tether.Statement{SQL: sub(lc.Statement)})
			t.Logf("statement: err=%v", stErr)

			if lc.Probe != "" {
				r, err := b.Query(ctx, tether.Statement{SQL: sub(lc.Probe)})
				switch {
				case lc.ProbeErr && err == nil:
					t.Errorf("leaked: another client's %q worked: %v", lc.Probe, r.Rows)
				case lc.ProbeErr:
				case err != nil:
					t.Fatalf("probe %q: %v", lc.Probe, err)
				default:
					want := lc.Clean
					if lc.CleanFromDirect {
						var v any
						if err := direct.QueryRowContext(ctx, sub(lc.Probe)).Scan(&v); err != nil {
							t.Fatalf("direct %q: %v", lc.Probe, err)
						}
						want = str(v)
					}
					if got := str(r.Rows[0][0]); got != want {
						t.Errorf("leaked: another client's %q returned %q, want %q", lc.Probe, got, want)
					}
				}
			}
			if lc.DirectProbe != "" {
				// The reset runs once the statement is answered, before the
				// connection serves anyone else: a statement through the
				// pool (of one connection) waits for it.
				if _, err := b.Query(ctx, tether.Statement{SQL: "SELECT 1"}); err != nil {
					t.Fatal(err)
				}
				var got any
				if err := direct.QueryRowContext(ctx, sub(lc.DirectProbe)).Scan(&got); err != nil {
					t.Fatalf("direct probe %q: %v", lc.DirectProbe, err)
				}
				if s := str(got); s != lc.DirectClean {
					t.Errorf("leaked: an independent connection's %q returned %q, want %q", lc.DirectProbe, s, lc.DirectClean)
				}
			}
			if lc.WriteLoss {
				n := 0
				for k := 0; k < 20; k++ {
					if _, err := b.Exec(ctx, tether.Statement{SQL: "INSERT INTO " + tbl + " (v) VALUES ('other client')"}); err == nil {
						n++
					} else {
						t.Logf("insert %d: %v", k, err)
					}
				}
				closeB()
				var got int
				if err := direct.QueryRow("SELECT COUNT(*) FROM " + tbl).Scan(&got); err != nil {
					t.Fatal(err)
				}
				acked += n
				lost += max(n-got, 0)
				if n == 0 || got != n {
					t.Errorf("write loss: %d of 20 inserts by other clients acknowledged, %d committed", n, got)
				}
			}
		})
	}
	t.Logf("write-loss cases: %d acknowledged inserts by other clients, %d lost", acked, lost)
}

// str formats a value for comparison: bytes as the text they hold.
func str(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}
