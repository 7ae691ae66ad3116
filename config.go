package tether

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is tetherd's whole configuration, read from one TOML file.
// Start from DefaultConfig, overlay a file with ParseConfig, then Validate.
type Config struct {
	Server   ServerConfig             `toml:"server"`
	Log      LogConfig                `toml:"log"`
	Cache    CacheConfig              `toml:"cache"`
	Admin    AdminConfig              `toml:"admin"`
	Backends map[string]BackendConfig `toml:"backends"`
}

// AdminConfig is the admin listener (docs/operations.md, "Watching
// tetherd"): /metrics, /healthz, /readyz and /status.json over HTTP, on a
// Unix socket of its own (never the PHP socket) and optionally on loopback
// TCP, for Prometheus, systemd and Kubernetes probes and the tether CLI.
type AdminConfig struct {
	Socket     string `toml:"socket"`      // Unix socket path; "auto": beside server.socket (SocketPath); empty disables it
	SocketMode string `toml:"socket_mode"` // octal file mode, e.g. "0660"
	TCPListen  string `toml:"tcp_listen"`  // optional, loopback only, e.g. "127.0.0.1:9187"; empty disables TCP
}

// SocketPath returns the admin socket's path: Socket, or for "auto" the
// server's socket path with "-admin" before its extension
// (var/tether.sock: var/tether-admin.sock), so that two tetherds with two
// sockets have two admin sockets; "" when there is none.
func (a AdminConfig) SocketPath(s ServerConfig) string {
	if a.Socket != "auto" {
		return a.Socket
	}
	if s.Socket == "" {
		return ""
	}
	base := strings.TrimSuffix(s.Socket, ".sock")
	return base + "-admin.sock"
}

// CacheConfig sizes the shared result cache (docs/operations.md, "Result
// cache"): the results of queries that ask for it (cache_ttl_ms), kept until
// their TTL runs out or a write through tetherd makes them stale.
type CacheConfig struct {
	MaxBytes      int64 `toml:"max_bytes"`       // memory for cached results, keys and bookkeeping; 0 turns caching off
	MaxEntryBytes int   `toml:"max_entry_bytes"` // a larger result is not cached
	Merge         bool  `toml:"merge"`           // identical cacheable reads in flight at once run once
	// MergeUncached extends Merge to reads that do not ask for the cache (no
	// cache_ttl_ms): a stampede of identical reads reaches the database once
	// even with caching off. Off by default: every read outside a transaction
	// then pays a cache lookup, and its result a copy.
	MergeUncached bool `toml:"merge_uncached"`
	// Local publishes per-table versions in shared memory (a System V
	// segment keyed by a file beside server.socket) so that the PHP client's
	// local cache (the Client option local_cache) can answer repeated
	// cacheable reads from APCu without a call to tetherd. Off by default.
	Local bool `toml:"local"`
}

// ServerConfig is the client-facing side of tetherd.
type ServerConfig struct {
	Socket      string `toml:"socket"`       // Unix socket path
	SocketMode  string `toml:"socket_mode"`  // octal file mode, e.g. "0660"
	SocketGroup string `toml:"socket_group"` // group name; empty keeps the process group
	TCPListen   string `toml:"tcp_listen"`   // optional; loopback only unless TLS is on; empty disables TCP
	TCPToken    string `toml:"tcp_token"`    // shared secret every TCP client sends in its first frame
	// TLS on the TCP listener (PEM files): with a certificate and key, the
	// listener speaks TLS and may listen beyond loopback (PHP on another
	// host of the pod or VM); with a client CA too, clients must present a
	// certificate it signed. The token is still required.
	TLSCert        string   `toml:"tls_cert"`
	TLSKey         string   `toml:"tls_key"`
	TLSClientCA    string   `toml:"tls_client_ca"`
	MaxFrameBytes  int      `toml:"max_frame_bytes"` // largest request frame accepted
	MaxResultBytes int      `toml:"max_result_bytes"`
	DefaultTimeout Duration `toml:"default_timeout"` // deadline of a request that names none
	TxIdleTimeout  Duration `toml:"tx_idle_timeout"` // an idle transaction is rolled back after this
	ShutdownGrace  Duration `toml:"shutdown_grace"`  // how long in-flight requests may finish on SIGTERM
	DefaultBackend string   `toml:"default_backend"` // backend of requests that name none
	// PIDFile, when set, holds the pid of the tetherd serving: written once
	// it serves (by the new process after a binary upgrade), removed on a
	// clean exit (docs/operations.md, "Finding tetherd's pid").
	PIDFile string `toml:"pid_file"`
	// Bounds on what clients can make tetherd hold (docs/operations.md,
	// "Limits"). Each is reported, when it is hit, in an error or a log
	// line that names it and its value.
	MaxClientConns       int      `toml:"max_client_conns"`        // client connections at once; more are refused
	MaxClientRequests    int      `toml:"max_client_requests"`     // requests in flight per client connection; reads pause past it
	MaxClientTxs         int      `toml:"max_client_txs"`          // transactions open per client connection
	MaxClientOutputBytes int      `toml:"max_client_output_bytes"` // replies queued for a client that does not read; past it, closed
	ClientFrameTimeout   Duration `toml:"client_frame_timeout"`    // a frame begun and not finished within it closes the connection
	ClientIdleTimeout    Duration `toml:"client_idle_timeout"`     // a client with nothing in flight and no transaction, idle this long, is closed; 0: never
	MaxMemoryBytes       int64    `toml:"max_memory_bytes"`        // the memory budget: past it, the clients holding the most are closed
	// MaxProcs is how many threads may run Go code at once (GOMAXPROCS); 0
	// means one per CPU. The default, 1, measured both the least CPU per
	// request and the lowest latency (docs/benchmarks.md): the event loop and
	// the goroutines doing backend work share one thread, with no wake-ups
	// across CPUs. A GOMAXPROCS environment variable overrides it.
	MaxProcs int `toml:"max_procs"`
}

// LogConfig selects the structured logger's level and format.
type LogConfig struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // text or json
	File   string `toml:"file"`   // append to this file, reopened on SIGHUP; empty: standard error
	// SlowStatement logs (at warn) every statement or operation that took
	// at least this long from its arrival to its answer; 0 turns it off.
	SlowStatement Duration `toml:"slow_statement"`
}

// BackendConfig configures one backend and its pool.
type BackendConfig struct {
	Type           string   `toml:"type"` // a registered BackendType's name (registry.go)
	DSN            string   `toml:"dsn"`  // the driver's data source name
	MaxConns       int      `toml:"max_conns"`
	MinConns       int      `toml:"min_conns"`
	IdleTimeout    Duration `toml:"idle_timeout"`
	AcquireTimeout Duration `toml:"acquire_timeout"` // bounded wait for a free connection, then busy
	ConnectTimeout Duration `toml:"connect_timeout"`
	StmtCacheSize  int      `toml:"stmt_cache_size"` // prepared statements kept per connection (SQLite: per backend), by SQL text
	// ChangeStream follows the database's change stream (MySQL/MariaDB: the
	// binary log; PostgreSQL: logical replication) so that the result cache drops what writes from elsewhere
	// made stale; off, only the TTL bounds that (docs/operations.md).
	ChangeStream bool `toml:"change_stream"`
	// Replicas are the DSNs of more servers of the same database (a
	// primary's replicas, or the other members of a group whose roles
	// tetherd learns), in DSN's format; each has its own pool of max_conns.
	// A monitor asks every host, DSN's included, what it is; writes go to
	// the one that says it takes them, reads that may run on a replica to
	// the replicas (backend/sqlroute, docs/operations.md "Replicas").
	Replicas []string `toml:"replicas"`
	// MaxReplicaLag takes a replica out of reads while it is further behind
	// than this (as the server reports it) or cannot say; 0: no bound.
	MaxReplicaLag Duration `toml:"max_replica_lag"`
	// MonitorInterval is how often each host is asked its role and lag.
	MonitorInterval Duration `toml:"monitor_interval"`
	// ReadsWithoutReplica is where a read that may run on a replica goes
	// while no replica qualifies: "primary" (the default) or "refuse"
	// (answered unavailable, retry: the primary is kept for writes). A
	// client's reads held for read-your-writes go to the primary either way.
	ReadsWithoutReplica string `toml:"reads_without_replica"`
	// PrimaryWait is how long a statement that needs the primary waits
	// while no host takes writes (a failover) before it is answered
	// unavailable; 0: at once.
	PrimaryWait Duration `toml:"primary_wait"`
	// Options holds the settings only its type has, read from their
	// sub-table ([backends.NAME.http] for http) by the type's
	// BackendOptions.Decode (registry.go); nil for a type without any, and
	// in a config built in code that sets none. The type's Validate and New
	// read it.
	Options any `toml:"-"`

	// foreign names the types, other than Type, whose options sub-table the
	// file gave this backend set to something; Validate refuses each.
	foreign []string
}

// Default paths of the embedded default: SQLite beside a socket in ./var.
const (
	DefaultSocketPath = "var/tether.sock"
	DefaultSQLitePath = "var/tether.db"
)

// DefaultConfig returns the embedded default: one SQLite backend named "main"
// at ./var/tether.db, served on ./var/tether.sock.
func DefaultConfig() Config {
	return Config{
		Server: ServerConfig{
			Socket:         DefaultSocketPath,
			SocketMode:     "0660",
			MaxFrameBytes:  8 << 20,
			MaxResultBytes: 64 << 20,
			DefaultTimeout: Duration(30 * time.Second),
			TxIdleTimeout:  Duration(60 * time.Second),
			ShutdownGrace:  Duration(10 * time.Second),
			DefaultBackend: "main",
			MaxProcs:       1,

			MaxClientConns:       2048,
			MaxClientRequests:    64,
			MaxClientTxs:         4,
			MaxClientOutputBytes: 80 << 20,
			ClientFrameTimeout:   Duration(10 * time.Second),
			MaxMemoryBytes:       1 << 30,
		},
		Log:   LogConfig{Level: "info", Format: "text"},
		Cache: CacheConfig{MaxBytes: 64 << 20, MaxEntryBytes: 1 << 20, Merge: true},
		Admin: AdminConfig{Socket: "auto", SocketMode: "0660"},
		Backends: map[string]BackendConfig{
			"main": DefaultBackendConfig("sqlite", DefaultSQLitePath),
		},
	}
}

// DefaultBackendConfig returns a backend config of the given type with the
// default pool settings.
func DefaultBackendConfig(typ, dsn string) BackendConfig {
	return BackendConfig{
		Type:           typ,
		DSN:            dsn,
		MaxConns:       8,
		MinConns:       1,
		IdleTimeout:    Duration(5 * time.Minute),
		AcquireTimeout: Duration(time.Second),
		ConnectTimeout: Duration(2 * time.Second),
		StmtCacheSize:  256,

		MaxReplicaLag:   Duration(5 * time.Second),
		MonitorInterval: Duration(time.Second),
		PrimaryWait:     Duration(5 * time.Second),

		ReadsWithoutReplica: "primary",
	}
}

// ParseConfig reads a TOML config from r over DefaultConfig's server and log
// settings. A file that has a [backends] table replaces the default backend;
// each backend starts from DefaultBackendConfig, and the sub-table of the
// settings only its type has goes to its type's BackendOptions.Decode (into
// BackendConfig.Options). Unknown keys are an error.
// ParseConfig does not validate: call Validate.
func ParseConfig(r io.Reader) (Config, error) {
	cfg := DefaultConfig()
	cfg.Backends = nil
	var raw struct {
		Server   ServerConfig              `toml:"server"`
		Log      LogConfig                 `toml:"log"`
		Cache    CacheConfig               `toml:"cache"`
		Admin    AdminConfig               `toml:"admin"`
		Backends map[string]toml.Primitive `toml:"backends"`
	}
	raw.Server, raw.Log, raw.Cache, raw.Admin = cfg.Server, cfg.Log, cfg.Cache, cfg.Admin
	md, err := toml.NewDecoder(r).Decode(&raw)
	if err != nil {
		return Config{}, fmt.Errorf("parse config: %w", err)
	}
	cfg.Server, cfg.Log, cfg.Cache, cfg.Admin = raw.Server, raw.Log, raw.Cache, raw.Admin
	if len(raw.Backends) > 0 {
		cfg.Backends = make(map[string]BackendConfig, len(raw.Backends))
	}
	opts := newOptionsDecoder()
	for name, prim := range raw.Backends {
		bc := DefaultBackendConfig("", "")
		if err := md.PrimitiveDecode(prim, &bc); err != nil {
			return Config{}, fmt.Errorf("parse config: backends.%s: %w", name, err)
		}
		if err := opts.decode(&md, prim, &bc); err != nil {
			return Config{}, fmt.Errorf("parse config: backends.%s: %w", name, err)
		}
		cfg.Backends[name] = bc
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return Config{}, fmt.Errorf("parse config: unknown keys: %s", strings.Join(keys, ", "))
	}
	if cfg.Backends == nil {
		cfg.Backends = DefaultConfig().Backends
	}
	return cfg, nil
}

// optionsDecoder reads the options sub-tables of the registered backend
// types (BackendType.Options) from a backend's table.
type optionsDecoder struct {
	types    []BackendType // those with Options, by name
	sections reflect.Type  // a struct of one toml.Primitive per type, tagged with its Section
}

func newOptionsDecoder() optionsDecoder {
	d := optionsDecoder{types: optionTypes()}
	fields := make([]reflect.StructField, len(d.types))
	for i, t := range d.types {
		fields[i] = reflect.StructField{
			Name: "S" + strconv.Itoa(i),
			Type: reflect.TypeFor[toml.Primitive](),
			Tag:  reflect.StructTag(`toml:"` + t.Options.Section + `"`),
		}
	}
	d.sections = reflect.StructOf(fields)
	return d
}

// decode sets bc.Options from its type's sub-table (through the type's
// Decode, with or without the sub-table in the file), and bc.foreign to the
// other types whose sub-table prim holds set to something. Decoding marks
// the keys of each sub-table decoded, so that md.Undecoded reports only the
// keys no type knows.
func (d optionsDecoder) decode(md *toml.MetaData, prim toml.Primitive, bc *BackendConfig) error {
	if len(d.types) == 0 {
		return nil
	}
	sv := reflect.New(d.sections)
	if err := md.PrimitiveDecode(prim, sv.Interface()); err != nil {
		return err
	}
	for i, t := range d.types {
		sub := sv.Elem().Field(i)
		given := !sub.IsZero()
		if !given && t.Name != bc.Type {
			continue
		}
		p := sub.Interface().(toml.Primitive)
		opts, set, err := t.Options.Decode(func(v any) error {
			if !given {
				return nil
			}
			return md.PrimitiveDecode(p, v)
		})
		switch {
		case err != nil:
			return err
		case t.Name == bc.Type:
			bc.Options = opts
		case set:
			bc.foreign = append(bc.foreign, t.Name)
		}
	}
	return nil
}

// backendConfigKeys returns the keys of a backend's table that
// BackendConfig itself decodes.
func backendConfigKeys() map[string]bool {
	t := reflect.TypeFor[BackendConfig]()
	keys := make(map[string]bool, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// ReadConfigFile opens path and parses it with ParseConfig.
func ReadConfigFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	cfg, err := ParseConfig(f)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ConfigError is a validation error that names the field and the value given.
type ConfigError struct {
	Field string
	Value any
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("config: %s = %v: %s", e.Field, e.Value, e.Msg)
}

// Validate checks the config without side effects and returns every problem
// found, joined, each a *ConfigError naming the field and value.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, value any, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
	}
	s := c.Server
	if s.Socket == "" && s.TCPListen == "" {
		bad("server.socket", `""`, "a Unix socket or a TCP listener is required")
	}
	if s.SocketMode != "" {
		if m, err := strconv.ParseUint(s.SocketMode, 8, 32); err != nil || m > 0o777 {
			bad("server.socket_mode", s.SocketMode, "must be an octal file mode such as 0660")
		}
	}
	if s.TCPListen != "" {
		if s.TCPToken == "" {
			bad("server.tcp_token", `""`, "required when server.tcp_listen is set")
		}
		if !IsLoopbackAddr(s.TCPListen) && s.TLSCert == "" {
			bad("server.tcp_listen", s.TCPListen, "plaintext TCP is only allowed on a loopback address (set server.tls_cert and tls_key for TLS)")
		}
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		bad("server.tls_key", s.TLSKey, "server.tls_cert and server.tls_key go together")
	}
	if s.TLSCert != "" && s.TCPListen == "" {
		bad("server.tls_cert", s.TLSCert, "TLS is for the TCP listener: set server.tcp_listen")
	}
	if s.TLSClientCA != "" && s.TLSCert == "" {
		bad("server.tls_client_ca", s.TLSClientCA, "needs server.tls_cert and tls_key")
	}
	if s.TLSCert != "" {
		if _, err := LoadServerTLS(s); err != nil {
			bad("server.tls_cert", s.TLSCert, "%v", err)
		}
	}
	if p := c.Admin.SocketPath(s); p != "" && p == s.Socket {
		bad("admin.socket", p, "must not be server.socket: PHP's socket never serves the admin API")
	}
	if c.Admin.SocketMode != "" {
		if m, err := strconv.ParseUint(c.Admin.SocketMode, 8, 32); err != nil || m > 0o777 {
			bad("admin.socket_mode", c.Admin.SocketMode, "must be an octal file mode such as 0660")
		}
	}
	if c.Admin.TCPListen != "" && !IsLoopbackAddr(c.Admin.TCPListen) {
		bad("admin.tcp_listen", c.Admin.TCPListen, "the admin API listens on loopback only")
	}
	if c.Log.SlowStatement < 0 {
		bad("log.slow_statement", c.Log.SlowStatement, "must not be negative (0 turns it off)")
	}
	if c.Cache.MergeUncached && !c.Cache.Merge {
		bad("cache.merge_uncached", true, "needs cache.merge")
	}
	if c.Cache.Local && (s.Socket == "" || c.Cache.MaxBytes == 0) {
		bad("cache.local", true, "needs server.socket (its key file lives beside it) and cache.max_bytes > 0")
	}
	if cc := c.Cache; cc.MaxBytes < 0 {
		bad("cache.max_bytes", cc.MaxBytes, "must not be negative (0 turns caching off)")
	} else if cc.MaxBytes > 0 && (cc.MaxEntryBytes < 1 || int64(cc.MaxEntryBytes) > cc.MaxBytes) {
		bad("cache.max_entry_bytes", cc.MaxEntryBytes, "must be between 1 and cache.max_bytes (%d)", cc.MaxBytes)
	}
	if s.MaxFrameBytes < 1024 || s.MaxFrameBytes > 1<<30 {
		bad("server.max_frame_bytes", s.MaxFrameBytes, "must be between 1024 and 1073741824")
	}
	if s.MaxProcs < 0 {
		bad("server.max_procs", s.MaxProcs, "must be 0 (one per CPU) or more")
	}
	if s.MaxResultBytes < 1024 {
		bad("server.max_result_bytes", s.MaxResultBytes, "must be at least 1024")
	}
	for field, v := range map[string]int{
		"server.max_client_conns":    s.MaxClientConns,
		"server.max_client_requests": s.MaxClientRequests,
		"server.max_client_txs":      s.MaxClientTxs,
	} {
		if v < 1 {
			bad(field, v, "must be at least 1")
		}
	}
	if s.MaxClientOutputBytes < s.MaxResultBytes {
		bad("server.max_client_output_bytes", s.MaxClientOutputBytes, "must be at least max_result_bytes (%d): one whole reply must fit", s.MaxResultBytes)
	}
	if s.ClientFrameTimeout <= 0 {
		bad("server.client_frame_timeout", s.ClientFrameTimeout, "must be positive")
	}
	if s.ClientIdleTimeout < 0 {
		bad("server.client_idle_timeout", s.ClientIdleTimeout, "must be 0 (never) or positive")
	}
	if s.MaxMemoryBytes < 64<<20 {
		bad("server.max_memory_bytes", s.MaxMemoryBytes, "must be at least 67108864 (64 MiB)")
	}
	for field, d := range map[string]Duration{
		"server.default_timeout": s.DefaultTimeout,
		"server.tx_idle_timeout": s.TxIdleTimeout,
		"server.shutdown_grace":  s.ShutdownGrace,
	} {
		if d <= 0 {
			bad(field, d, "must be positive")
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", c.Log.Level, "must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", c.Log.Format, "must be text or json")
	}
	if len(c.Backends) == 0 {
		bad("backends", "{}", "at least one backend is required")
	}
	if _, ok := c.Backends[s.DefaultBackend]; s.DefaultBackend != "" && !ok {
		bad("server.default_backend", s.DefaultBackend, "no backend of that name")
	}
	names := make([]string, 0, len(c.Backends))
	for name := range c.Backends {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b := c.Backends[name]
		f := "backends." + name + "."
		if !validBackendName(name) {
			bad("backends."+name, name, "a backend name is 1-64 letters, digits, '_' or '-'")
		}
		typ, known := LookupBackendType(b.Type)
		if !known {
			bad(f+"type", strconv.Quote(b.Type), "must be one of %s", strings.Join(BackendTypeNames(), ", "))
		}
		if b.DSN == "" {
			bad(f+"dsn", `""`, "required")
		}
		if b.MaxConns < 1 {
			bad(f+"max_conns", b.MaxConns, "must be at least 1")
		}
		if b.MinConns < 0 || b.MinConns > b.MaxConns {
			bad(f+"min_conns", b.MinConns, "must be between 0 and max_conns (%d)", b.MaxConns)
		}
		if b.AcquireTimeout <= 0 {
			bad(f+"acquire_timeout", b.AcquireTimeout, "must be positive")
		}
		if b.ConnectTimeout <= 0 {
			bad(f+"connect_timeout", b.ConnectTimeout, "must be positive")
		}
		if b.IdleTimeout < 0 {
			bad(f+"idle_timeout", b.IdleTimeout, "must not be negative")
		}
		if b.StmtCacheSize < 1 {
			bad(f+"stmt_cache_size", b.StmtCacheSize, "must be at least 1")
		}
		if b.ChangeStream && known && !typ.ChangeStream {
			bad(f+"change_stream", true, "only a backend of type %s can follow its change stream (mysql: the binary log, postgres: logical replication)", strings.Join(changeStreamTypes(), " or "))
		} else if b.ChangeStream && c.Cache.MaxBytes == 0 {
			bad(f+"change_stream", true, "needs the result cache (cache.max_bytes > 0): it only drops cached results")
		}
		if len(b.Replicas) > 0 && known && !typ.Replicas {
			bad(f+"replicas", len(b.Replicas), "only a backend of type %s can have replicas", strings.Join(replicaTypes(), " or "))
		}
		for i, r := range b.Replicas {
			if r == "" || r == b.DSN || slices.Index(b.Replicas, r) != i {
				bad(fmt.Sprintf("%sreplicas[%d]", f, i), `"..."`, "must be a DSN, not empty, not dsn's and not repeated")
			}
		}
		if b.MaxReplicaLag < 0 {
			bad(f+"max_replica_lag", b.MaxReplicaLag, "must not be negative")
		}
		if b.ReadsWithoutReplica != "primary" && b.ReadsWithoutReplica != "refuse" {
			bad(f+"reads_without_replica", strconv.Quote(b.ReadsWithoutReplica), `must be "primary" or "refuse"`)
		}
		if b.PrimaryWait < 0 {
			bad(f+"primary_wait", b.PrimaryWait, "must not be negative")
		}
		if b.MonitorInterval <= 0 && len(b.Replicas) > 0 {
			bad(f+"monitor_interval", b.MonitorInterval, "must be positive")
		}
		if known && typ.Validate != nil {
			if err := typ.Validate(f, b); err != nil {
				errs = append(errs, err)
			}
		}
		for _, owner := range b.foreign {
			if t, ok := LookupBackendType(owner); ok && t.Options != nil {
				bad(f+t.Options.Section, "{...}", "only a backend of type %s takes these settings", owner)
			}
		}
	}
	return errors.Join(errs...)
}

// changeStreamTypes names the registered backend types that can follow their
// database's change stream.
func replicaTypes() []string {
	var out []string
	for _, name := range BackendTypeNames() {
		if t, _ := LookupBackendType(name); t.Replicas {
			out = append(out, name)
		}
	}
	return out
}

func changeStreamTypes() []string {
	var out []string
	for _, name := range BackendTypeNames() {
		if t, _ := LookupBackendType(name); t.ChangeStream {
			out = append(out, name)
		}
	}
	return out
}

// SocketFileMode returns the configured socket mode as an os.FileMode.
func (s ServerConfig) SocketFileMode() os.FileMode {
	m, err := strconv.ParseUint(s.SocketMode, 8, 32)
	if err != nil || s.SocketMode == "" {
		return 0o660
	}
	return os.FileMode(m)
}

// AbsSocket returns the socket path made absolute against the working directory.
func (s ServerConfig) AbsSocket() string {
	if s.Socket == "" {
		return ""
	}
	p, err := filepath.Abs(s.Socket)
	if err != nil {
		return s.Socket
	}
	return p
}

// Duration is a time.Duration written as a string ("30s", "5m") in config.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// String implements fmt.Stringer.
func (d Duration) String() string { return time.Duration(d).String() }

func validBackendName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
