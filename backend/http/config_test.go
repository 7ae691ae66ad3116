package httpup_test

import (
	"errors"
	"strings"
	"testing"

	tether "github.com/tether-php/tether"
	httpup "github.com/tether-php/tether/backend/http"
)

// parseAPI parses a config whose default backend is "api" (given by
// backend), and validates it.
func parseAPI(t *testing.T, backend string) (tether.Config, error) {
	t.Helper()
	cfg, err := tether.ParseConfig(strings.NewReader("[server]\ndefault_backend = \"api\"\n" + backend))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cfg.Validate()
}

// TestConfig_Parse checks that ParseConfig hands the [backends.NAME.http]
// sub-table to the http type, which decodes it into a *Config in
// BackendConfig.Options next to the shared settings and their defaults.
func TestConfig_Parse(t *testing.T) {
	cfg, err := parseAPI(t, `
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
	api := cfg.Backends["api"]
	h, err := httpup.ConfigOf(api)
	if err != nil {
		t.Fatal(err)
	}
	if api.MaxConns != 16 || h.MaxResponseBytes != 1<<20 || h.Headers["Host"] != "api.example" ||
		h.TLSServerName != "api.example" || api.MinConns != 1 {
		t.Fatalf("parsed %+v, http %+v", api, h)
	}

	t.Run("NoSection", func(t *testing.T) {
		// Decode runs without the sub-table too: Options is never nil for a
		// parsed http backend, so two files that differ only by an empty
		// [backends.api.http] parse to equal configs.
		cfg, err := parseAPI(t, "[backends.api]\ntype = \"http\"\ndsn = \"http://api/\"\n")
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := cfg.Backends["api"].Options.(*httpup.Config); !ok || h == nil {
			t.Fatalf("Options = %#v, want a *httpup.Config", cfg.Backends["api"].Options)
		}
	})
	t.Run("UnknownKey", func(t *testing.T) {
		_, err := tether.ParseConfig(strings.NewReader("[backends.api]\ntype = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\ntimeout = \"1s\"\nretries = 3\n"))
		if err == nil || err.Error() != "parse config: unknown keys: backends.api.http.retries" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("BadValue", func(t *testing.T) {
		_, err := tether.ParseConfig(strings.NewReader("[backends.api]\ntype = \"http\"\ndsn = \"http://api/\"\n[backends.api.http]\ntimeout = \"soon\"\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "parse config: backends.api: ") || !strings.Contains(err.Error(), `backends.api.http.timeout`) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestConfig_OptionsOfAnotherType checks that New and Validate refuse
// options that are not the http type's, naming them.
func TestConfig_OptionsOfAnotherType(t *testing.T) {
	cfg := tether.DefaultBackendConfig("http", "http://api/")
	cfg.Options = struct{ X int }{1}
	if _, err := httpup.New(cfg); err == nil || !strings.Contains(err.Error(), "want *httpup.Config") {
		t.Fatalf("New: got %v", err)
	}
	c := tether.DefaultConfig()
	c.Backends["main"] = cfg
	err := c.Validate()
	var ce *tether.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "backends.main.http = {...}") {
		t.Fatalf("Validate: got %v", err)
	}
}
