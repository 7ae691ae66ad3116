package tether_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	tether "github.com/tether-php/tether"
)

func TestConfig_Default(t *testing.T) {
	cfg := tether.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Backends["main"].Type != "sqlite" || cfg.Server.Socket != tether.DefaultSocketPath {
		t.Fatalf("embedded default: %+v", cfg)
	}
}

func TestConfig_Parse(t *testing.T) {
	cfg, err := tether.ParseConfig(strings.NewReader(`
[server]
socket = "/run/tether.sock"
default_timeout = "5s"
default_backend = "db"

[backends.db]
type = "mysql"
dsn = "u:p@unix(/run/mysqld/mysqld.sock)/app"
max_conns = 16
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	db := cfg.Backends["db"]
	if db.MaxConns != 16 || db.MinConns != 1 || time.Duration(db.AcquireTimeout) != time.Second {
		t.Fatalf("backend defaults not applied under the file's values: %+v", db)
	}
	if time.Duration(cfg.Server.DefaultTimeout) != 5*time.Second || cfg.Server.MaxFrameBytes != 8<<20 {
		t.Fatalf("server: %+v", cfg.Server)
	}
	if _, ok := cfg.Backends["main"]; ok {
		t.Fatal("a file with backends keeps the default backend")
	}

	t.Run("UnknownKey", func(t *testing.T) {
		_, err := tether.ParseConfig(strings.NewReader("[server]\nsockett = \"x\"\n"))
		if err == nil || !strings.Contains(err.Error(), "server.sockett") {
			t.Fatalf("got %v", err)
		}
		_, err = tether.ParseConfig(strings.NewReader("[backends.a]\ntype = \"sqlite\"\ndsn = \"x\"\npool = 3\n"))
		if err == nil || !strings.Contains(err.Error(), "backends.a.pool") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("BadDuration", func(t *testing.T) {
		_, err := tether.ParseConfig(strings.NewReader("[server]\ndefault_timeout = \"soon\"\n"))
		if err == nil || !strings.Contains(err.Error(), "soon") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	cases := []struct {
		name  string
		tweak func(*tether.Config)
		field string
		value string
	}{
		{"UnknownType", func(c *tether.Config) { b := c.Backends["main"]; b.Type = "oracle"; c.Backends["main"] = b }, "backends.main.type", "oracle"},
		{"NoDSN", func(c *tether.Config) { b := c.Backends["main"]; b.DSN = ""; c.Backends["main"] = b }, "backends.main.dsn", ""},
		{"MinOverMax", func(c *tether.Config) { b := c.Backends["main"]; b.MinConns = 9; c.Backends["main"] = b }, "backends.main.min_conns", "9"},
		{"PublicTCP", func(c *tether.Config) { c.Server.TCPListen = "0.0.0.0:7070"; c.Server.TCPToken = "x" }, "server.tcp_listen", "0.0.0.0:7070"},
		{"TCPWithoutToken", func(c *tether.Config) { c.Server.TCPListen = "127.0.0.1:7070" }, "server.tcp_token", ""},
		{"BadMode", func(c *tether.Config) { c.Server.SocketMode = "rw-rw----" }, "server.socket_mode", "rw-rw----"},
		{"DefaultBackendMissing", func(c *tether.Config) { c.Server.DefaultBackend = "nope" }, "server.default_backend", "nope"},
		{"TinyFrames", func(c *tether.Config) { c.Server.MaxFrameBytes = 10 }, "server.max_frame_bytes", "10"},
		{"BadLogLevel", func(c *tether.Config) { c.Log.Level = "loud" }, "log.level", "loud"},
		{"NegativeCache", func(c *tether.Config) { c.Cache.MaxBytes = -1 }, "cache.max_bytes", "-1"},
		{"ChangeStreamOnSQLite", func(c *tether.Config) { b := c.Backends["main"]; b.ChangeStream = true; c.Backends["main"] = b }, "backends.main.change_stream", "only a backend of type mysql or postgres"},
		{"ChangeStreamWithoutCache", func(c *tether.Config) {
			b := c.Backends["main"]
			b.Type, b.DSN, b.ChangeStream = "mysql", "u:p@unix(/tmp/s)/db", true
			c.Backends["main"] = b
			c.Cache.MaxBytes = 0
		}, "backends.main.change_stream", "cache.max_bytes"},
		{"ReplicasOnSQLite", func(c *tether.Config) { b := c.Backends["main"]; b.Replicas = []string{"x.db"}; c.Backends["main"] = b }, "backends.main.replicas", "only a backend of type mysql or postgres"},
		{"ReplicaIsTheDSN", func(c *tether.Config) {
			b := c.Backends["main"]
			b.Type, b.DSN = "mysql", "u:p@unix(/tmp/s)/db"
			b.Replicas = []string{"u:p@unix(/tmp/r)/db", b.DSN}
			c.Backends["main"] = b
		}, "backends.main.replicas[1]", "not dsn's"},
		{"ReadsWithoutReplica", func(c *tether.Config) {
			b := c.Backends["main"]
			b.ReadsWithoutReplica = "replica"
			c.Backends["main"] = b
		}, "backends.main.reads_without_replica", `"replica"`},
		{"NegativeReplicaLag", func(c *tether.Config) {
			b := c.Backends["main"]
			b.MaxReplicaLag = -1
			c.Backends["main"] = b
		}, "backends.main.max_replica_lag", "must not be negative"},
		{"MergeUncachedWithoutMerge", func(c *tether.Config) { c.Cache.Merge, c.Cache.MergeUncached = false, true }, "cache.merge_uncached", "needs cache.merge"},
		{"AdminOnPHPSocket", func(c *tether.Config) { c.Admin.Socket = c.Server.Socket }, "admin.socket", "never serves the admin API"},
		{"AutoAdminOnPHPSocket", func(c *tether.Config) { c.Server.Socket = "var/x-admin.sock"; c.Admin.Socket = "var/x-admin.sock" }, "admin.socket", "never serves"},
		{"AdminPublicTCP", func(c *tether.Config) { c.Admin.TCPListen = "0.0.0.0:9187" }, "admin.tcp_listen", "0.0.0.0:9187"},
		{"CacheEntryOverCache", func(c *tether.Config) { c.Cache.MaxBytes, c.Cache.MaxEntryBytes = 1024, 2048 }, "cache.max_entry_bytes", "2048"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tether.DefaultConfig()
			tc.tweak(&cfg)
			err := cfg.Validate()
			var ce *tether.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConfigError, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("error %q does not name %s = %s", err, tc.field, tc.value)
			}
		})
	}
}

// TestConfig_Sample keeps etc/tetherd.toml honest: it documents every key with
// its default, so it must parse to exactly DefaultConfig.
func TestConfig_Sample(t *testing.T) {
	cfg, err := tether.ReadConfigFile("etc/tetherd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := tether.DefaultConfig(); !reflect.DeepEqual(cfg, want) {
		t.Fatalf("etc/tetherd.toml parses to\n%+v\nwant DefaultConfig\n%+v", cfg, want)
	}
}

func TestConfig_ValidateHTTP(t *testing.T) {
	parse := func(t *testing.T, backend string) (tether.Config, error) {
		t.Helper()
		cfg, err := tether.ParseConfig(strings.NewReader("[server]\ndefault_backend = \"api\"\n" + backend))
		if err != nil {
			t.Fatal(err)
		}
		return cfg, cfg.Validate()
	}
	t.Run("Valid", func(t *testing.T) {
		cfg, err := parse(t, `
[backends.api]
type = "http"
dsn = "https://api.internal.example/v1"
max_conns = 16
idle_timeout = "90s"

[backends.api.http]
headers = { Authorization = "Bearer x", Host = "api.example", Accept = "application/json" }
max_response_bytes = 1048576
tls_ca_file = "/etc/ssl/internal-ca.pem"
tls_cert_file = "/etc/tether/client.pem"
tls_key_file = "/etc/tether/client.key"
tls_server_name = "api.example"
`)
		if err != nil {
			t.Fatal(err)
		}
		// What the http sub-table decodes to: backend/http's TestConfig_Parse.
		if api := cfg.Backends["api"]; api.MaxConns != 16 || api.MinConns != 1 || api.Options == nil {
			t.Fatalf("parsed %+v", api)
		}
	})

	cases := []struct {
		name, backend string
		field, value  string
	}{
		{"NotAURL", "type = \"http\"\ndsn = \"127.0.0.1:8080\"", "backends.api.dsn", "127.0.0.1:8080"},
		{"FTP", "type = \"http\"\ndsn = \"ftp://files.example/\"", "backends.api.dsn", "ftp://files.example/"},
		{"NoHost", "type = \"http\"\ndsn = \"http:///v1\"", "backends.api.dsn", "http:///v1"},
		{"UserInfo", "type = \"http\"\ndsn = \"http://u:secret@api/\"", "backends.api.dsn", "u:xxxxx@api"},
		{"Query", "type = \"http\"\ndsn = \"http://api/v1?key=1\"", "backends.api.dsn", "key=1"},
		{"TLSOnHTTP", "type = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\ntls_ca_file = \"ca.pem\"", "backends.api.dsn", "http://api/"},
		{"NegativeLimit", "type = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\nmax_response_bytes = -1", "backends.api.http.max_response_bytes", "-1"},
		{"CertWithoutKey", "type = \"http\"\ndsn = \"https://api/\"\n[backends.api.http]\ntls_cert_file = \"c.pem\"", "backends.api.http.tls_key_file", ""},
		{"KeyWithoutCert", "type = \"http\"\ndsn = \"https://api/\"\n[backends.api.http]\ntls_key_file = \"c.key\"", "backends.api.http.tls_cert_file", ""},
		{"HopByHopHeader", "type = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\nheaders = { connection = \"close\" }", "backends.api.http.headers.connection", "close"},
		{"BadHeaderName", "type = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\nheaders = { \"X Key\" = \"1\" }", "backends.api.http.headers.X Key", "X Key"},
		{"HeaderCRLF", "type = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\nheaders = { X-Key = \"1\\r\\nHost: evil\" }", "backends.api.http.headers.X-Key", "Host: evil"},
		{"HTTPOnSQLite", "type = \"sqlite\"\ndsn = \"var/x.db\"\n[backends.api.http]\nmax_response_bytes = 10", "backends.api.http", "{...}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "[backends.api]\n"+tc.backend+"\n")
			var ce *tether.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConfigError, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.field+" = ") || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("error %q does not name %s = %s", err, tc.field, tc.value)
			}
		})
	}
	t.Run("OtherBackendsUnaffected", func(t *testing.T) {
		// A SQL DSN is not a URL, and nothing http-specific is asked of it.
		if _, err := parse(t, "[backends.api]\ntype = \"mysql\"\ndsn = \"u:p@tcp(127.0.0.1:3306)/app?parseTime=true\"\n"); err != nil {
			t.Fatal(err)
		}
	})
}
