package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/backendtest"
	"github.com/tether-php/tether/wire"
)

// localStreamBound is how long after a write made around tetherd (straight to
// the database) the checker requires every read that begins to see it: the
// change stream's delay, plus commitVisibleDelay's second drop, with room for
// a loaded machine.
const localStreamBound = 2 * time.Second

// TestCacheLocal_NoStaleReads is TestCache_NoStaleReads's history checker
// extended to the PHP client's local cache: reads are served by many PHP
// workers (php -S with PHP_CLI_SERVER_WORKERS, one APCu shared by all, as
// php-fpm's pool shares it) through Clients with local_cache, most of them
// from APCu without a call, while clients write the same keys through tetherd
// and straight to the database (seen through the change stream). Each HTTP
// request reads a few keys, as a page does; the floors of its keys are taken
// before it is sent. A read must not return a value older than a write
// acknowledged through tetherd before it began, nor than a write made around
// tetherd localStreamBound before it began. Values only grow, so "older" is
// "less".
//
// Size: TETHER_LOCAL_CHECK_OPS operations per database: by default 10,000
// (a few seconds, what make test runs; 5,000 with -short); the full run is
// TETHER_LOCAL_CHECK_OPS=100000 (about 30 s a database on the 2-core dev
// machine).
func TestCacheLocal_NoStaleReads(t *testing.T) {
	ops := 10000
	if testing.Short() {
		ops = 5000
	}
	if v, err := strconv.Atoi(os.Getenv("TETHER_LOCAL_CHECK_OPS")); err == nil && v > 0 {
		ops = v
	}
	php, err := exec.LookPath("php")
	if err != nil {
		if os.Getenv("TETHER_REQUIRE_BACKENDS") != "" {
			t.Fatal("php is not installed: the local cache's checker needs it")
		}
		t.Skip("php is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	reader := filepath.Join(filepath.Dir(file), "..", "clients", "php", "tests", "Support", "local-cache-reader.php")
	env := map[string][2]string{
		"mysql":    {"TETHER_TEST_MYSQL_BINLOG", "TETHER_TEST_MYSQL_DSN"},
		"postgres": {"TETHER_TEST_POSTGRES_LOGICAL", "TETHER_TEST_POSTGRES_DSN"},
	}
	for _, d := range loopDBs(t) {
		t.Run(d.typ, func(t *testing.T) {
			backendtest.RequireEnv(t, env[d.typ][0])
			dsn := backendtest.RequireEnv(t, env[d.typ][1])
			ts := d.startWith(t, func(b *tether.BackendConfig) { b.ChangeStream, b.DSN = true, dsn },
				func(c *tether.Config) { c.Cache.Local = true })
			mem := attachVersions(t, ts)
			ctx := context.Background()
			const keys = 8
			setup := dial(t, ts)
			setup.ok(wire.Request{ID: 1, Op: wire.OpExec, Backend: "db", SQL: "DROP TABLE IF EXISTS cache_lkv"})
			setup.ok(wire.Request{ID: 2, Op: wire.OpExec, Backend: "db", SQL: "CREATE TABLE cache_lkv (k INT PRIMARY KEY, v BIGINT NOT NULL)"})
			t.Cleanup(func() { d.watch.ExecContext(ctx, "DROP TABLE IF EXISTS cache_lkv") })
			for k := 0; k < keys; k++ {
				setup.ok(wire.Request{ID: 3, Op: wire.OpExec, Backend: "db", SQL: fmt.Sprintf("INSERT INTO cache_lkv VALUES (%d, 0)", k)})
			}
			read := "SELECT v FROM cache_lkv WHERE k = " + d.p(1)
			// The change stream follows once a write around tetherd bumps the
			// table's slot (or the backend's, while the catalog is not known).
			seg := ts.VersionsSegment()
			setup.ok(wire.Request{ID: 4, Op: wire.OpQuery, Backend: "db", SQL: read, Params: []any{int64(0)}, CacheTTLMS: 60000, Versions: true})
			slot, anySlot := uint64(seg.TableSlot("db", "cache_lkv")), uint64(seg.AnySlot("db"))
			before, beforeAny := slotValue(mem, slot), slotValue(mem, anySlot)
			for deadline := time.Now().Add(20 * time.Second); slotValue(mem, slot) == before && slotValue(mem, anySlot) == beforeAny; {
				if _, err := d.watch.ExecContext(ctx, "UPDATE cache_lkv SET v = 0 WHERE k = 0"); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("the change stream reported no write within 20 s")
				}
				time.Sleep(20 * time.Millisecond)
			}

			base := startPHPServer(t, php, reader, ts.socket, 8)
			hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			get := func(q url.Values) ([]byte, error) {
				resp, err := hc.Get(base + "/?" + q.Encode())
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					return nil, err
				}
				if resp.StatusCode != 200 {
					return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
				}
				return b, nil
			}
			stats := func() map[string]any {
				t.Helper()
				b, err := get(url.Values{"stats": {"1"}})
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("stats %s: %v", b, err)
				}
				return m
			}
			if s := stats(); s["available"] != true {
				t.Fatalf("APCu is not available to the PHP workers: %v", s)
			}
			hits0 := stats()["hits"].(float64)

			var (
				mu      sync.Mutex
				through [keys]int64 // the greatest version acknowledged through tetherd, per key
				around  [keys][]struct {
					at time.Time
					v  int64
				} // writes around tetherd, per key, in order
				version                         atomic.Int64
				done                            atomic.Int64
				reads, stale, wThrough, wAround atomic.Int64
				first                           atomic.Value
			)
			floor := func(k int, now time.Time) int64 { // under mu
				f := through[k]
				for _, w := range around[k] {
					if w.at.Add(localStreamBound).After(now) {
						break
					}
					f = max(f, w.v)
				}
				return f
			}
			write := fmt.Sprintf("UPDATE cache_lkv SET v = GREATEST(v, %s) WHERE k = %s", d.p(1), d.p(2))
			var wg sync.WaitGroup
			for wi := 0; wi < 4; wi++ {
				wg.Add(1)
				go func(wi int) {
					defer wg.Done()
					c := dial(t, ts)
					rng := uint64(wi)*0x9E3779B97F4A7C15 + 7
					for i := 0; done.Load() < int64(ops); i++ {
						rng ^= rng << 13
						rng ^= rng >> 7
						rng ^= rng << 17
						k := int(rng % keys)
						v := version.Add(1)
						if wi%2 == 0 { // through tetherd
							c.ok(wire.Request{ID: uint32(i%1000 + 1), Op: wire.OpExec, Backend: "db", SQL: write, Params: []any{v, int64(k)}})
							mu.Lock()
							through[k] = max(through[k], v)
							mu.Unlock()
							wThrough.Add(1)
						} else { // around it
							if _, err := d.watch.ExecContext(ctx, write, v, k); err != nil {
								t.Errorf("write around tetherd: %v", err)
								return
							}
							at := time.Now()
							mu.Lock()
							around[k] = append(around[k], struct {
								at time.Time
								v  int64
							}{at, v})
							mu.Unlock()
							wAround.Add(1)
						}
						done.Add(1)
					}
				}(wi)
			}
			const perRequest = 10
			for ri := 0; ri < 12; ri++ {
				wg.Add(1)
				go func(ri int) {
					defer wg.Done()
					rng := uint64(ri)*0x9E3779B97F4A7C15 + 1
					ks := make([]string, perRequest)
					kn := make([]int, perRequest)
					floors := make([]int64, perRequest)
					for done.Load() < int64(ops) {
						mu.Lock()
						now := time.Now()
						for j := range ks {
							rng ^= rng << 13
							rng ^= rng >> 7
							rng ^= rng << 17
							kn[j] = int(rng % keys)
							ks[j] = strconv.Itoa(kn[j])
							floors[j] = floor(kn[j], now)
						}
						mu.Unlock()
						b, err := get(url.Values{"sql": {read}, "k": {strings.Join(ks, ",")}})
						if err != nil {
							t.Errorf("read: %v", err)
							return
						}
						var got struct{ V []int64 }
						if err := json.Unmarshal(b, &got); err != nil || len(got.V) != perRequest {
							t.Errorf("read: %s (%v)", b, err)
							return
						}
						for j, v := range got.V {
							if v < floors[j] {
								stale.Add(1)
								first.CompareAndSwap(nil, fmt.Sprintf("key %d read %d after %d was acknowledged", kn[j], v, floors[j]))
							}
						}
						reads.Add(perRequest)
						done.Add(perRequest)
					}
				}(ri)
			}
			wg.Wait()
			st := stats()
			hits := st["hits"].(float64) - hits0
			t.Logf("%d reads by 8 PHP workers (%.0f from APCu without a call), %d writes through tetherd, %d around it, on %d keys: %d stale (local cache: %v)",
				reads.Load(), hits, wThrough.Load(), wAround.Load(), keys, stale.Load(), st)
			if n := stale.Load(); n > 0 {
				t.Errorf("%d stale reads; the first: %v", n, first.Load())
			}
			if hits == 0 {
				t.Error("no read was served from the local cache: the checker checked nothing of it")
			}
			// A worker's next PHP request on its persistent socket knows the
			// session's settings from the last (StreamConnection::resumeProfiles):
			// the first read of a request need not ask tetherd for them.
			if requests := float64(reads.Load() / perRequest); st["unknown"].(float64) > requests/2 {
				t.Errorf("%v of %.0f PHP requests learned the session's settings anew", st["unknown"], requests)
			}
		})
	}
}

// startPHPServer runs php -S with workers sharing one APCu on script, for
// tetherd's socket, and returns its base URL once it answers. Its process
// group is killed when the test ends.
func startPHPServer(t *testing.T, php, script, socket string, workers int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(php, "-d", "apc.enable_cli=1", "-d", "apc.shm_size=32M", "-S", addr, script)
	cmd.Env = append(os.Environ(), "PHP_CLI_SERVER_WORKERS="+strconv.Itoa(workers), "TETHER_SOCKET="+socket, "TETHER_BACKEND=db")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("php -S output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(base + "/?stats=1")
		if err == nil {
			resp.Body.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("php -S did not answer within 10 s: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
