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
