package cassandra

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/semaphore"

	tether "github.com/tether-php/tether"
)

func TestParseDSN(t *testing.T) {
	cfg := tether.DefaultBackendConfig("cassandra",
		"cassandra://u:p%40ss@10.0.0.1,10.0.0.2:9043,[::1]/ks?consistency=local_quorum&serial_consistency=LOCAL_SERIAL"+
			"&local_dc=dc1&timeout=3s&reconnect_interval=5s&discovery=false&proto=4&page_size=100&max_value_bytes=2048&max_requests=7&write_coalesce=100us")
	c, err := parseDSN(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.hosts, " ") != "10.0.0.1:9042 10.0.0.2:9043 [::1]:9042" || c.keyspace != "ks" ||
		c.username != "u" || c.password != "p@ss" || c.consistency != gocql.LocalQuorum || c.serial != gocql.LocalSerial ||
		c.localDC != "dc1" || c.timeout != 3*time.Second || c.reconnect != 5*time.Second || c.discovery ||
		c.proto != 4 || c.pageSize != 100 || c.maxValueBytes != 2048 || c.maxRequests != 7 || c.writeCoalesce != 100*time.Microsecond {
		t.Fatalf("parsed: %+v", c)
	}
	if c.numConns != cfg.MaxConns || c.connectTimeout != time.Duration(cfg.ConnectTimeout) || c.acquireTimeout != time.Duration(cfg.AcquireTimeout) {
		t.Fatalf("pool settings: %+v", c)
	}

	t.Run("Defaults", func(t *testing.T) {
		c, err := parseDSN(tether.DefaultBackendConfig("cassandra", "cassandra://db"))
		if err != nil {
			t.Fatal(err)
		}
		if c.hosts[0] != "db:9042" || c.keyspace != "" || c.consistency != gocql.One || c.serial != gocql.Serial ||
			c.timeout != DefaultTimeout || !c.discovery || c.pageSize != DefaultPageSize ||
			c.maxValueBytes != DefaultMaxValueBytes || c.maxRequests != 8*DefaultRequestsPerConn || c.writeCoalesce != 0 {
			t.Fatalf("defaults: %+v", c)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		for dsn, want := range map[string]string{
			"postgres://h/ks":                         "scheme",
			"cassandra:///ks":                         "no host",
			"cassandra://h,,h2/ks":                    "empty host",
			"cassandra://h:0/ks":                      "bad port",
			"cassandra://h/k-s":                       "keyspace",
			"cassandra://h/ks?consistency=SOME":       "consistency=SOME",
			"cassandra://h/ks?serial_consistency=ONE": "SERIAL or LOCAL_SERIAL",
			"cassandra://h/ks?timeout=soon":           "timeout=soon",
			"cassandra://h/ks?proto=2":                "proto=2",
			"cassandra://h/ks?max_requests=0":         "max_requests=0",
			"cassandra://h/ks?write_coalesce=-1ms":    "write_coalesce=-1ms",
			"cassandra://u:hunter2@h/ks?x=1":          "x=1: unknown parameter",
		} {
			_, err := parseDSN(tether.DefaultBackendConfig("cassandra", dsn))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error with %q", dsn, err, want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: the error shows the password: %v", dsn, err)
			}
		}
	})
}

func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		d    gocql.Duration
		want string
	}{
		{gocql.Duration{}, "PT0S"},
		{gocql.Duration{Months: 14, Days: 3, Nanoseconds: int64(4*time.Hour + 5*time.Minute + 6*time.Second + 7*time.Millisecond)}, "P1Y2M3DT4H5M6.007S"},
		{gocql.Duration{Days: 1}, "P1D"},
		{gocql.Duration{Nanoseconds: 1}, "PT0.000000001S"},
		{gocql.Duration{Months: -1, Days: -2}, "-P1M2D"},
		{gocql.Duration{Nanoseconds: int64(90 * time.Minute)}, "PT1H30M"},
	} {
		if got := formatDuration(c.d); got != c.want {
			t.Errorf("formatDuration(%+v) = %s, want %s", c.d, got, c.want)
		}
		back, err := parseDuration(c.want)
		if err != nil || back != c.d {
			t.Errorf("parseDuration(%s) = %+v, %v; want %+v", c.want, back, err, c.d)
		}
	}
	if d, err := parseDuration("P2W"); err != nil || d.Days != 14 {
		t.Errorf("P2W: %+v %v", d, err)
	}
	for _, bad := range []string{"", "P", "1D", "PT1D", "P1H", "PT1.5M", "P-1D", "PT1.0000000001S"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) succeeded", bad)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"12.50": "12.50", "-0.001": "-0.001", "+7": "7", "1e3": "1000", "1.5E-2": "0.015", "0": "0",
		"123456789012345678901234567890.123456789": "123456789012345678901234567890.123456789",
	} {
		d, err := parseDecimal(in)
		if err != nil || d.String() != want {
			t.Errorf("parseDecimal(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"", "-", "1.2.3", "1e", "abc", "1,5", "0x10", "1e99999999999"} {
		if _, err := parseDecimal(bad); err == nil {
			t.Errorf("parseDecimal(%q) succeeded", bad)
		}
	}
	if d, err := toDecimal(0.1); err != nil || d.String() != "0.1" {
		t.Errorf("toDecimal(0.1) = %v, %v", d, err)
	}
}

func TestParseTimestamp(t *testing.T) {
	want := time.Date(2024, 5, 1, 10, 20, 30, 123e6, time.UTC)
	for _, s := range []string{"2024-05-01T10:20:30.123Z", "2024-05-01 10:20:30.123Z", "2024-05-01T12:20:30.123+02:00",
		"2024-05-01 10:20:30.123", "2024-05-01T10:20:30.123+0000"} {
		if got, err := parseTimestamp(s); err != nil || !got.Equal(want) {
			t.Errorf("parseTimestamp(%q) = %v, %v", s, got, err)
		}
	}
	if got, err := parseTimestamp("2024-05-01"); err != nil || !got.Equal(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("a date alone: %v %v", got, err)
	}
	if _, err := parseTimestamp("May 1st"); err == nil {
		t.Error("parseTimestamp(May 1st) succeeded")
	}
	if got := formatTime(int64(23*time.Hour + 59*time.Minute + 59*time.Second + 999999999)); got != "23:59:59.999999999" {
		t.Errorf("formatTime: %s", got)
	}
	if d, err := parseTime("01:02:03.5"); err != nil || d != time.Hour+2*time.Minute+3*time.Second+500*time.Millisecond {
		t.Errorf("parseTime: %v %v", d, err)
	}
}

func TestCursor(t *testing.T) {
	c := sealCursor("SELECT a FROM t", []byte("state"))
	if st, err := openCursor("SELECT a FROM t", c); err != nil || string(st) != "state" {
		t.Fatalf("openCursor: %q %v", st, err)
	}
	for _, bad := range [][]byte{c[:5], []byte("garbage!"), sealCursor("SELECT b FROM t", []byte("state"))} {
		if _, err := openCursor("SELECT a FROM t", bad); tether.AsError(err).Code != tether.CodeBadRequest || !errors.Is(err, ErrCursor) {
			t.Errorf("openCursor(%q): %v", bad, err)
		}
	}
	if checkCursor(nil) != nil || checkCursor(c) != nil || checkCursor([]byte("x")) == nil {
		t.Error("checkCursor")
	}
}

func TestPreparable(t *testing.T) {
	for stmt, want := range map[string]bool{
		"SELECT * FROM t":              true,
		"  select\n*  FROM t":          true,
		"INSERT INTO t (a) VALUES (?)": true,
		"update t SET a = ?":           true,
		"DELETE FROM t":                true,
		"BEGIN BATCH INSERT INTO t (a) VALUES (?) APPLY BATCH;":         true,
		"BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (?) APPLY BATCH": true,
		"TRUNCATE t":                         false,
		"CREATE TABLE t (a int PRIMARY KEY)": false,
		"SELECT":                             false,
	} {
		if got := preparable(stmt); got != want {
			t.Errorf("preparable(%q) = %v", stmt, got)
		}
	}
	if !isRead(" SELECT*FROM t") || isRead("INSERT INTO t") {
		t.Error("isRead")
	}
}

// TestBackend_Acquire checks the bounded wait for one of max_requests slots.
func TestBackend_Acquire(t *testing.T) {
	b := &Backend{cfg: &config{maxRequests: 1, acquireTimeout: 50 * time.Millisecond}}
	ctx := context.Background()
	if err := b.acquire(ctx); tether.AsError(err).Code != tether.CodeUnavailable {
		t.Fatalf("acquire before open: %v", err)
	}
	b.slots = semaphore.NewWeighted(1)
	if err := b.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := b.acquire(ctx)
	if e := tether.AsError(err); e.Code != tether.CodeBusy || !e.Retry || !errors.Is(err, tether.ErrBusy) {
		t.Fatalf("acquire with no free slot: %#v", e)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > time.Second {
		t.Fatalf("waited %s for a slot, want acquire_timeout (50ms)", d)
	}
	if s := b.Stats(); s.InUse != 1 || s.Waiting != 1 {
		t.Fatalf("stats: %+v", s)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire past the request's deadline: %v", err)
	}
	b.release()
	if err := b.acquire(ctx); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

// TestHealReplacesTheSession drives the healer against a real node: a request
// that found no connection makes it replace the session, more than once, and
// the new session serves. (Each new session needs its own token-aware
// policy: the driver panics on a shared one.)
func TestHealReplacesTheSession(t *testing.T) {
	h := os.Getenv("TETHER_TEST_CASSANDRA_HOST")
	if h == "" {
		if os.Getenv("TETHER_REQUIRE_BACKENDS") != "" {
			t.Fatal("TETHER_TEST_CASSANDRA_HOST is not set")
		}
		t.Skip("TETHER_TEST_CASSANDRA_HOST is not set")
	}
	user, pass := os.Getenv("TETHER_TEST_CASSANDRA_USER"), os.Getenv("TETHER_TEST_CASSANDRA_PASSWORD")
	if user == "" {
		user, pass = "cassandra", "cassandra"
	}
	cfg := tether.DefaultBackendConfig("cassandra", "cassandra://"+user+":"+pass+"@"+h+"/")
	cfg.ConnectTimeout = tether.Duration(5 * time.Second)
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	for round := 1; round <= 2; round++ {
		old := b.session()
		b.noHostsAt.Store(time.Now().UnixNano())
		deadline := time.Now().Add(10 * time.Second)
		for b.session() == old && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if b.session() == old {
			t.Fatalf("round %d: the session was not replaced", round)
		}
		res, err := b.Query(ctx, tether.Statement{SQL: "SELECT release_version FROM system.local"})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("round %d: the new session: %v %v", round, res, err)
		}
	}
}
