package httpup

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	tether "github.com/tether-php/tether"
)

// Config is the part of an http upstream's config that other backends do not
// have: the sub-table [backends.NAME.http], decoded by ParseConfig through
// Type.Options into tether.BackendConfig.Options (as a *Config). The shared
// settings keep their meaning: dsn is the base URL, max_conns the most
// connections to it, idle_timeout how long an idle keep-alive connection is
// kept.
type Config struct {
	Headers          map[string]string `toml:"headers"`            // sent with every request unless the request sets the same name
	MaxResponseBytes int               `toml:"max_response_bytes"` // a larger body is too_large; 0: 8 MiB
	Timeout          tether.Duration   `toml:"timeout"`            // the longest a call may take, whatever its timeout_ms; 0: only the request's deadline
	DisableKeepAlive bool              `toml:"disable_keep_alive"` // a new connection per request (for upstreams that mishandle keep-alive)
	TLSCAFile        string            `toml:"tls_ca_file"`        // PEM roots to trust instead of the system's
	TLSCertFile      string            `toml:"tls_cert_file"`      // client certificate (PEM), with tls_key_file
	TLSKeyFile       string            `toml:"tls_key_file"`
	TLSServerName    string            `toml:"tls_server_name"` // overrides the name checked in the server's certificate
	TLSSkipVerify    bool              `toml:"tls_insecure_skip_verify"`
}

// ConfigOf returns the http settings of cfg: cfg.Options as a *Config (a
// Config value is taken too), or the zero Config when cfg.Options is nil
// (a config built in code that sets none). It returns an error for options
// of another type.
func ConfigOf(cfg tether.BackendConfig) (*Config, error) {
	switch o := cfg.Options.(type) {
	case nil:
		return &Config{}, nil
	case *Config:
		if o == nil {
			return &Config{}, nil
		}
		return o, nil
	case Config:
		return &o, nil
	default:
		return nil, fmt.Errorf("options: %T, want *httpup.Config", cfg.Options)
	}
}

// decodeOptions is Type.Options.Decode: the [backends.NAME.http] sub-table
// into a *Config; set when it sets anything.
func decodeOptions(decode func(any) error) (any, bool, error) {
	c := new(Config)
	if err := decode(c); err != nil {
		return nil, false, err
	}
	return c, !c.isZero(), nil
}

// isZero reports whether no http setting is given.
func (h *Config) isZero() bool {
	return len(h.Headers) == 0 && h.MaxResponseBytes == 0 && h.Timeout == 0 && !h.DisableKeepAlive && h.TLSCAFile == "" &&
		h.TLSCertFile == "" && h.TLSKeyFile == "" && h.TLSServerName == "" && !h.TLSSkipVerify
}

// validate is Type.Validate: it checks an http upstream's settings (f is
// "backends.NAME.") without reading any file, each problem a
// *tether.ConfigError. Its dsn is the base URL: http or https, with a host,
// and no user info, query or fragment.
func validate(f string, b tether.BackendConfig) error {
	var errs []error
	bad := func(field string, value any, format string, args ...any) {
		errs = append(errs, &tether.ConfigError{Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
	}
	h, err := ConfigOf(b)
	if err != nil {
		bad(f+"http", "{...}", "%v", err)
		return errors.Join(errs...)
	}
	if b.DSN != "" {
		u, err := url.Parse(b.DSN)
		switch {
		case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "":
			bad(f+"dsn", strconv.Quote(b.DSN), "must be an http:// or https:// base URL with a host")
		case u.User != nil:
			bad(f+"dsn", strconv.Quote(u.Redacted()), "must not hold user info (set an Authorization header in [%shttp] headers)", f)
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			bad(f+"dsn", strconv.Quote(b.DSN), "must not have a query or a fragment")
		case u.Scheme == "http" && hasTLS(h):
			bad(f+"dsn", strconv.Quote(b.DSN), "the http.tls_* settings need an https:// URL")
		}
	}
	if h.MaxResponseBytes < 0 {
		bad(f+"http.max_response_bytes", h.MaxResponseBytes, "must be 0 (8 MiB) or more")
	}
	if h.Timeout < 0 {
		bad(f+"http.timeout", h.Timeout, "must be 0 (the request's deadline only) or positive")
	}
	if h.TLSCertFile != "" && h.TLSKeyFile == "" {
		bad(f+"http.tls_key_file", `""`, "required with http.tls_cert_file")
	}
	if h.TLSKeyFile != "" && h.TLSCertFile == "" {
		bad(f+"http.tls_cert_file", `""`, "required with http.tls_key_file")
	}
	names := make([]string, 0, len(h.Headers))
	for name := range h.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		field := f + "http.headers." + name
		switch {
		case !validToken(name):
			bad(field, strconv.Quote(name), "a header name is a token: letters, digits and !#$%%&'*+-.^_`|~")
		case ctlIndex(h.Headers[name]) >= 0:
			bad(field, strconv.Quote(h.Headers[name]), "a header value must not hold control characters")
		case configHopByHop(name):
			bad(field, strconv.Quote(h.Headers[name]), "tetherd sets this header itself, or it is hop-by-hop")
		}
	}
	return errors.Join(errs...)
}

// configHopByHop reports whether a configured default header may not be set:
// Content-Length and the hop-by-hop headers belong to tetherd's connection.
// (Host may: it names a virtual host behind the dsn's address.)
func configHopByHop(name string) bool {
	switch strings.ToLower(name) {
	case "content-length", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade":
		return true
	}
	return strings.HasPrefix(strings.ToLower(name), "proxy-")
}
