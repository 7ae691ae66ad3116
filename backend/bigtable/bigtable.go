// Package bigtable is the Google Cloud Bigtable backend, on the official
// client cloud.google.com/go/bigtable.
//
// One client, and so one pool of warm gRPC channels and one OAuth token
// refreshed for everyone, serves every PHP worker: the cost that E2 measured
// PHP-FPM paying per worker (a cold channel and a token fetch) is paid once,
// at Open. It offers the key API (tether.KeyValue, rows come back "wide": one
// column per family:qualifier) and Bigtable's own row operations
// (tether.WideColumn, rows come back "long": one row per cell). There is no
// query language and there are no transactions. docs/bigtable.md is the
// user's guide.
package bigtable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tether "github.com/tether-php/tether"
)

// Limits enforced before a request is sent. Bigtable's own are 4 KiB per row
// key, 16 KiB per column qualifier, 100 MiB per cell and 256 MiB per row; a
// mutation is held in memory and sent in one gRPC message, so tetherd bounds
// it far lower.
const (
	MaxKeyBytes       = 4 << 10  // a row key
	MaxQualifierBytes = 16 << 10 // a column qualifier
	MaxMutationBytes  = 16 << 20 // one atomic mutation: row key, qualifiers and values together
	DefaultScanLimit  = 1000     // rows per page of a scan or range read that names no limit
	MaxScanLimit      = 100000   // the largest page a request may ask for
)

// reconnectMaxDelay caps gRPC's reconnect backoff (120 s by default), so that
// service resumes within seconds of Bigtable or the emulator coming back.
const reconnectMaxDelay = 2 * time.Second

// Errors of the package.
var (
	ErrNotOpen = errors.New("bigtable backend not open")
)

// Backend is a Bigtable instance behind one long-lived client.
type Backend struct {
	cfg tether.BackendConfig
	dsn DSN
	// Log receives the in-process emulator's warning; nil is slog.Default().
	Log *slog.Logger

	client   *bigtable.Client
	conn     *grpc.ClientConn // the emulator connection, dialled by Open
	emulator *bttest.Server   // the in-process emulator, started by Open
	channels int
	budget   time.Duration // how long an operation retries an unreachable Bigtable

	tables sync.Map // table name -> *bigtable.Table
	nTable atomic.Int32

	mu       sync.RWMutex // guards closed against begin
	closed   bool
	calls    sync.WaitGroup
	inFlight atomic.Int64
}

// maxCachedTables bounds the handles kept by table name; more distinct names
// still work, each opening a handle per request.
const maxCachedTables = 1024

// New returns a backend for cfg.DSN (see DSN and docs/bigtable.md). It
// checks the DSN and has no side effects: Open creates the client.
func New(cfg tether.BackendConfig) (*Backend, error) {
	d, err := ParseDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	budget := time.Duration(cfg.ConnectTimeout)
	if budget <= 0 {
		budget = 2 * time.Second
	}
	return &Backend{cfg: cfg, dsn: d, channels: max(cfg.MaxConns, 1), budget: budget}, nil
}

// Open creates the client and verifies, within connect_timeout, that the
// instance answers (PingAndWarm, which also warms the channels and fetches
// the first token). With emulator=inprocess it first starts the in-memory
// emulator. On an emulator it creates the DSN's table= tables. It returns an
// unavailable error wrapping tether.ErrUnavailable when Bigtable cannot be
// reached or refuses the credentials.
func (b *Backend) Open(ctx context.Context) error {
	if err := b.open(ctx); err != nil {
		b.shutdown()
		return err
	}
	return nil
}

func (b *Backend) open(ctx context.Context) error {
	log := b.Log
	if log == nil {
		log = slog.Default()
	}
	d := b.dsn
	cc := bigtable.ClientConfig{AppProfile: d.AppProfile}
	if !d.Metrics {
		cc.MetricsProvider = bigtable.NoopMetricsProvider{}
	}
	dialOpts := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(b.unaryInterceptor),
		grpc.WithChainStreamInterceptor(b.streamInterceptor),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			MinConnectTimeout: b.budget,
		}),
	}
	var opts []option.ClientOption
	addr := d.Emulator
	if addr == EmulatorInProcess {
		srv, err := bttest.NewServer("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("bigtable: start in-process emulator: %w (%w)", err, tether.ErrUnavailable)
		}
		b.emulator, addr = srv, srv.Addr
		log.Warn("BIGTABLE IN-PROCESS EMULATOR: data is held in memory only and is LOST when tetherd stops; for development, never production",
			"project", d.Project, "instance", d.Instance, "addr", addr)
	}
	if addr != "" {
		// As the client does for BIGTABLE_EMULATOR_HOST: one plaintext
		// connection, no credentials, but with our interceptors.
		conn, err := grpc.NewClient("passthrough:///"+addr,
			append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			return fmt.Errorf("bigtable: dial emulator %s: %w (%w)", addr, err, tether.ErrUnavailable)
		}
		b.conn, b.channels = conn, 1
		opts = append(opts, option.WithGRPCConn(conn))
	} else {
		opts = append(opts, option.WithGRPCConnectionPool(b.channels))
		for _, o := range dialOpts {
			opts = append(opts, option.WithGRPCDialOption(o))
		}
	}
	client, err := b.newClient(ctx, cc, opts)
	if err != nil {
		return &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable,
			Message: fmt.Sprintf("bigtable: create client for %s/%s: %v", d.Project, d.Instance, err)}
	}
	b.mu.Lock()
	b.client = client
	b.mu.Unlock()

	pctx, cancel := context.WithTimeout(ctx, b.budget)
	defer cancel()
	if len(d.Tables) > 0 {
		if err := createTables(pctx, addr, d); err != nil {
			return b.unreachable(d, err)
		}
	}
	err = client.PingAndWarm(pctx)
	if status.Code(err) == codes.Unimplemented {
		err = nil // an older emulator: it answered, which is all we ask
	}
	if err != nil {
		return b.unreachable(d, err)
	}
	return nil
}

// newClient creates the client, waiting at most connect_timeout: on Cloud
// Bigtable creating it finds the credentials, dials and primes the channels.
// A client that comes too late is closed when it comes.
func (b *Backend) newClient(ctx context.Context, cc bigtable.ClientConfig, opts []option.ClientOption) (*bigtable.Client, error) {
	type made struct {
		c   *bigtable.Client
		err error
	}
	ch := make(chan made, 1)
	go func() {
		// The client keeps this context for its background work (channel
		// refresh and resizing, metrics): it must outlive Open.
		c, err := bigtable.NewClientWithConfig(context.WithoutCancel(ctx), b.dsn.Project, b.dsn.Instance, cc, opts...)
		ch <- made{c, err}
	}()
	t := time.NewTimer(b.budget)
	defer t.Stop()
	select {
	case m := <-ch:
		return m.c, m.err
	case <-t.C:
	case <-ctx.Done():
	}
	go func() {
		if m := <-ch; m.c != nil {
			m.c.Close()
		}
	}()
	return nil, fmt.Errorf("no client after %v", b.budget)
}

func (b *Backend) unreachable(d DSN, err error) error {
	where := "bigtable " + d.Project + "/" + d.Instance
	if d.Emulator != "" {
		where += " (emulator " + d.Emulator + ")"
	}
	e := &tether.Error{Code: tether.CodeUnavailable, Retry: true, Err: tether.ErrUnavailable,
		Message: fmt.Sprintf("connect %s: %v", where, err)}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		e.BackendCode = s.Code().String()
	}
	return e
}

// createTables creates the DSN's tables and families on the emulator at
// addr, leaving those that exist.
func createTables(ctx context.Context, addr string, d DSN) error {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	admin, err := bigtable.NewAdminClient(ctx, d.Project, d.Instance, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		return err
	}
	defer admin.Close()
	for _, t := range d.Tables {
		if err := admin.CreateTable(ctx, t.Name); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
		for _, f := range t.Families {
			if err := admin.CreateColumnFamily(ctx, t.Name, f); err != nil && status.Code(err) != codes.AlreadyExists {
				return fmt.Errorf("create column family %s:%s: %w", t.Name, f, err)
			}
		}
	}
	return nil
}

// Close stops new requests, waits until ctx is done for those in flight,
// then closes the client (and stops the in-process emulator, losing its
// data). It returns ctx's error if requests were still running.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.calls.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("close bigtable: %d requests still running: %w", b.inFlight.Load(), ctx.Err())
	}
	b.shutdown()
	return err
}

func (b *Backend) shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.client != nil {
		b.client.Close()
		b.client = nil
	}
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	if b.emulator != nil {
		b.emulator.Close()
		b.emulator = nil
	}
}

// Stats reports the client's gRPC channels as Open and the requests in
// flight as InUse. gRPC multiplexes requests over each channel, so InUse may
// exceed Open and nothing ever waits for a channel.
func (b *Backend) Stats() tether.PoolStats {
	n := int(b.inFlight.Load())
	return tether.PoolStats{Open: b.channels, InUse: n, Idle: max(b.channels-n, 0)}
}

// begin admits one request: it fails with unavailable once Close has begun,
// and otherwise returns a context carrying the request's retry budget (see
// call), which the caller must end.
func (b *Backend) begin(ctx context.Context, table string) (context.Context, *call, *bigtable.Table, error) {
	if !validTableName(table) {
		return nil, nil, nil, tether.Errorf(tether.CodeBadRequest, "bad Bigtable table name %q: want [_a-zA-Z0-9][-_.a-zA-Z0-9]*, at most 50 characters", table)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed || b.client == nil {
		err := ErrNotOpen
		if b.closed {
			err = tether.ErrClosed
		}
		return nil, nil, nil, &tether.Error{Code: tether.CodeUnavailable, Retry: true, Message: "bigtable backend is " + err.Error(), Err: err}
	}
	b.calls.Add(1)
	b.inFlight.Add(1)
	c := &call{budget: b.budget}
	return withCall(ctx, c), c, b.table(table), nil
}

// end finishes a request admitted by begin.
func (b *Backend) end() {
	b.inFlight.Add(-1)
	b.calls.Done()
}

// table returns the handle of a table, cached by name. b.mu is read-held.
func (b *Backend) table(name string) *bigtable.Table {
	if t, ok := b.tables.Load(name); ok {
		return t.(*bigtable.Table)
	}
	t := b.client.Open(name)
	if b.nTable.Load() < maxCachedTables {
		if _, loaded := b.tables.LoadOrStore(name, t); !loaded {
			b.nTable.Add(1)
		}
	}
	return t
}

var (
	_ tether.Backend    = (*Backend)(nil)
	_ tether.KeyValue   = (*Backend)(nil)
	_ tether.WideColumn = (*Backend)(nil)
)
