<?php

declare(strict_types=1);

namespace Tether;

use Tether\Batch\Operation;
use Tether\Batch\PendingBatch;
use Tether\Bigtable\Mutation;
use Tether\Cache\LocalCache;
use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\InvalidArgumentException;
use Tether\Exception\LogicException;
use Tether\Exception\TetherException;
use Tether\Protocol\MalformedReply;
use Tether\Protocol\Reply;
use Tether\Protocol\Request;
use Tether\Server\ServerException;
use Tether\Sql\SqlText;

/**
 * Client runs SQL on the backends of a tetherd daemon over one local socket, reads and writes rows by primary
 * key on any backend (the key API: get, multiGet, scan, put, delete), including Cassandra and Bigtable, calls
 * configured HTTP upstreams (http), and joins rows across tables and backends on tetherd (join).
 *
 * The socket is persistent by default: a php-fpm or mod_php worker keeps it across PHP requests, so a page pays
 * one local round trip per call and no connect. Clients of one process that name the same persistent address
 * share its socket. The constructor connects nothing; the first call does.
 *
 * Every call is synchronous, except sendBatch(), which returns at once and is collected later; calls made while
 * batches are pending work as usual. A call throws a TetherException subclass on failure:
 * - ServerException: tetherd answered with an error; isRetryable() says whether sending it again is safe.
 * - CommunicationException: the request was not sent (tetherd unreachable); safe to retry.
 * - UnknownOutcomeException (a CommunicationException): the request was sent but no reply came; it may or may
 *   not have run. The client never re-sends a request on its own.
 */
final class Client
{
    private const OPTIONS = ['socket', 'tcp', 'token', 'tls', 'persistent', 'timeout', 'backend', 'max_frame_bytes', 'time_format', 'local_cache', 'local_cache_max_entry_bytes', 'causal_token'];

    /** MAX_CAUSAL_TOKEN_BYTES bounds the causal_token option (a token of a few backends is well under 1 KiB). */
    private const MAX_CAUSAL_TOKEN_BYTES = 65536;

    private StreamConnection $connection;
    private ?string $backend;
    private float $timeout;
    private int $maxFrameBytes;
    private ?string $timeFormat;
    private bool $persistent;
    /** the local cache of cacheable reads (option local_cache), null when off or unavailable */
    private ?LocalCache $local = null;
    /** @var list<\WeakReference<Transaction>> the transactions this client began, for close() */
    private array $transactions = [];
    /**
     * @var array<string, string> backend ('' for tetherd's default) => position: what the causal_token option asked
     *                            for, carried into causalToken() for the backends this client did not write to
     */
    private array $causal = [];
    /**
     * the socket epoch in which causal_after was sent for $causal; -1 before. Sent again when the socket is
     * reopened (tetherd forgets it with the connection).
     */
    private int $causalEpoch = -1;
    /** @var array<string, true> backends ('' for tetherd's default) this client wrote to, for causalToken() */
    private array $wrote = [];

    /**
     * @param array{socket?: string, tcp?: string, token?: string, persistent?: bool, timeout?: float|int,
     *              backend?: string|null, max_frame_bytes?: int} $options
     *   - socket: path of tetherd's Unix socket; default env TETHER_SOCKET, else ./var/tether.sock (relative to the
     *     working directory; use an absolute path under a web server)
     *   - tcp: "host:port" to use TCP instead of the Unix socket; requires token
     *   - token: the shared secret sent in `hello` on each new TCP connection
     *   - tls: with tcp, speak TLS to a tetherd whose TCP listener has server.tls_cert; the array holds PHP's ssl
     *     context options, e.g. ['cafile' => '/etc/tether/ca.pem', 'local_cert' => '/etc/tether/php.pem',
     *     'local_pk' => '/etc/tether/php-key.pem'] (client certificates when tetherd asks for them). Peers are
     *     verified as PHP does by default.
     *   - persistent: keep the socket across PHP requests of this worker (default true)
     *   - timeout: socket connect and I/O timeout in seconds (default 30); a call with a longer timeoutMs waits
     *     timeoutMs + 1 s instead
     *   - backend: backend used when a call names none (default null: tetherd's default_backend)
     *   - max_frame_bytes: largest reply frame accepted (default 64 MiB); a larger one is a protocol error
     *   - time_format: how query results give MySQL/MariaDB and PostgreSQL DATETIME and TIMESTAMP values: 'iso'
     *     (the default: "2024-02-29T23:59:58") or 'sql', the databases' own text form that mysqli, PDO and pgsql
     *     return ("2024-02-29 23:59:58", "0000-00-00 00:00:00"; a PostgreSQL TIMESTAMPTZ in UTC as
     *     "2024-02-29 22:59:58+00"); what framework integrations use
     *   - local_cache: keep the results of cacheable reads (query(), queryOne(), queryNumeric(), queryColumns() with
     *     cacheTtlMs, outside a transaction) in APCu, shared by the host's PHP workers, and answer them again without
     *     a call to tetherd while tetherd's published table versions say they are fresh (default false; needs
     *     tetherd's cache.local, the apcu and shmop extensions, apc.enable_cli under the CLI, and a Unix socket;
     *     without any of them, reads go to tetherd as usual). docs/operations.md, "Result cache"
     *   - local_cache_max_entry_bytes: the largest result the local cache keeps (default 65536)
     *   - causal_token: a token causalToken() gave in an earlier PHP request (kept in the user's session or a
     *     cookie): before its first call that reaches a backend, this client sends `causal_after` for each backend
     *     in it (pipelined: one round trip in all), so that its reads see those writes, on a replica that has them
     *     or on the primary. Null or '' for none (the default). docs/operations.md, "Replicas"
     * @throws LogicException an unknown option or an invalid value
     * @throws InvalidArgumentException a causal_token that is not one causalToken() gave
     */
    public function __construct(array $options = [])
    {
        $unknown = \array_diff_key($options, \array_flip(self::OPTIONS));
        if ($unknown !== []) {
            throw new LogicException(\sprintf('unknown option %s; known options: %s', \implode(', ', \array_keys($unknown)), \implode(', ', self::OPTIONS)));
        }
        $token = $options['token'] ?? null;
        if ($token !== null && (!\is_string($token) || $token === '')) {
            throw new LogicException('option token: want a non-empty string');
        }
        $tcp = $options['tcp'] ?? null;
        if ($tcp !== null) {
            if (!\is_string($tcp) || \preg_match('/^(\[[0-9A-Fa-f:.]+\]|[^\s\/:\[\]]+):\d{1,5}$/', $tcp) !== 1) {
                throw new LogicException(\sprintf('option tcp: want "host:port", got %s', \var_export($tcp, true)));
            }
            if ($token === null) {
                throw new LogicException(\sprintf('option token is required with tcp (%s)', $tcp));
            }
            $address = 'tcp://' . $tcp;
            $setting = 'the Client option tcp';
            $tls = $options['tls'] ?? null;
            if ($tls !== null) {
                if (!\is_array($tls)) {
                    throw new LogicException(\sprintf('option tls: want an array of ssl context options, got %s', \var_export($tls, true)));
                }
                $address = 'tls://' . $tcp;
            }
        } elseif (isset($options['tls'])) {
            throw new LogicException('option tls needs option tcp: TLS is for tetherd\'s TCP listener');
        } else {
            $socket = $options['socket'] ?? (\getenv('TETHER_SOCKET') ?: './var/tether.sock');
            $setting = match (true) {
                isset($options['socket']) => 'the Client option socket (an integration sets it from its own setting: DBAL tether_socket, Laravel socket, WordPress TETHER_SOCKET)',
                \getenv('TETHER_SOCKET') !== false && \getenv('TETHER_SOCKET') !== '' => 'env TETHER_SOCKET',
                default => 'the default ./var/tether.sock, relative to the working directory ' . (\getcwd() ?: '?') . ' (neither the Client option socket nor env TETHER_SOCKET is set)',
            };
            if (!\is_string($socket) || $socket === '') {
                throw new LogicException(\sprintf('option socket: want a path, got %s', \var_export($socket, true)));
            }
            $address = 'unix://' . $socket;
            $token = null; // tetherd ignores hello on a Unix socket
        }
        $persistent = $options['persistent'] ?? true;
        if (!\is_bool($persistent)) {
            throw new LogicException(\sprintf('option persistent: want a bool, got %s', \var_export($persistent, true)));
        }
        $timeout = $options['timeout'] ?? 30.0;
        if ((!\is_float($timeout) && !\is_int($timeout)) || $timeout <= 0) {
            throw new LogicException(\sprintf('option timeout: want seconds > 0, got %s', \var_export($timeout, true)));
        }
        $backend = $options['backend'] ?? null;
        if ($backend !== null && (!\is_string($backend) || $backend === '')) {
            throw new LogicException(\sprintf('option backend: want a backend name, got %s', \var_export($backend, true)));
        }
        $maxFrameBytes = $options['max_frame_bytes'] ?? StreamConnection::DEFAULT_MAX_FRAME_BYTES;
        if (!\is_int($maxFrameBytes) || $maxFrameBytes < 1) {
            throw new LogicException(\sprintf('option max_frame_bytes: want an int > 0, got %s', \var_export($maxFrameBytes, true)));
        }

        $timeFormat = $options['time_format'] ?? null;
        if ($timeFormat !== null && $timeFormat !== 'iso' && $timeFormat !== 'sql') {
            throw new LogicException(\sprintf("option time_format: want 'iso' or 'sql', got %s", \var_export($timeFormat, true)));
        }

        $local = $options['local_cache'] ?? false;
        if (!\is_bool($local)) {
            throw new LogicException(\sprintf('option local_cache: want a bool, got %s', \var_export($local, true)));
        }
        $localMax = $options['local_cache_max_entry_bytes'] ?? 65536;
        if (!\is_int($localMax) || $localMax < 1) {
            throw new LogicException(\sprintf('option local_cache_max_entry_bytes: want an int > 0, got %s', \var_export($localMax, true)));
        }
        if ($local && isset($socket) && LocalCache::available()) {
            $this->local = new LocalCache($socket, $localMax);
        }

        $this->causal = self::decodeCausalToken($options['causal_token'] ?? null);

        $tls = $options['tls'] ?? null;
        $this->connection = $persistent ? StreamConnection::shared($address, $token, $tls, $setting) : new StreamConnection($address, false, $token, $tls, $setting);
        $this->backend = $backend;
        $this->timeout = (float) $timeout;
        $this->maxFrameBytes = $maxFrameBytes;
        $this->timeFormat = $timeFormat;
        $this->persistent = $persistent;
    }

    /**
     * lastServerMicros returns tetherd's time for this process's last call, in microseconds: from when tetherd read
     * the request to its reply, the backend's work included. The rest of the call's time is the way to tetherd and
     * back. Null when the reply carried none (ping, or an error found in the request itself).
     */
    public function lastServerMicros(): ?int
    {
        return $this->connection->lastServerMicros();
    }

    /**
     * serverMicrosTotal returns the sum of tetherd's times for this PHP request's calls so far, in microseconds (all
     * Clients of the process on the same socket count together): an application profiler can show it as the page's
     * data time in tetherd and the backends.
     */
    public function serverMicrosTotal(): int
    {
        return $this->connection->serverMicrosTotal();
    }

    /**
     * cached marks a read request map cacheable for $ttlMs (see query()); null or 0 leaves it as it is.
     *
     * @param array<string, mixed> $request
     * @return array<string, mixed>
     */
    private static function cached(array $request, ?int $ttlMs): array
    {
        if ($ttlMs !== null && $ttlMs > 0) {
            $request['cache_ttl_ms'] = $ttlMs;
        }

        return $request;
    }

    /**
     * ping checks that tetherd answers; it does not touch any backend.
     *
     * @throws TetherException
     */
    public function ping(): void
    {
        $this->connection->call(Request::ping(), 'ok', $this->timeout, $this->maxFrameBytes);
    }

    /**
     * causalToken returns an opaque token for read-your-writes across PHP requests on backends with replicas: keep
     * it (in the user's session, or a cookie) and pass it as the causal_token option of the Client of the user's
     * next request, on any worker or web host, and that client's reads see this client's writes.
     *
     * It covers every backend this client wrote to: execute(), put(), delete(), a committed transaction, a query
     * with primary: true, and the same in batches (Bigtable's and Cassandra's writes are not counted: they have no
     * replicas behind tetherd). tetherd gives the position of each (`causal_token`, one pipelined round trip for
     * all of them); this client's causal_token option's positions are carried into it for the backends it did not
     * write to, so a token passed along a chain of requests that only read keeps its meaning. '' when there is
     * nothing to wait for: no write, or only backends of one server (whose reads always see every write), and no
     * causal_token option. No round trip when this client wrote nothing.
     *
     * The positions are those of the writes tetherd saw on this client's socket: a write whose socket was dropped
     * before causalToken() is not covered (the call that lost the socket threw).
     *
     * @throws ServerException tetherd could not tell a position (e.g. the primary did not answer)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function causalToken(): string
    {
        $positions = $this->causal;
        if ($this->wrote !== []) {
            $connection = $this->connection;
            $ids = [];
            foreach ($this->wrote as $backend => $_) {
                $backend = (string) $backend;
                $ids[$backend] = $connection->submit(Request::causalToken($backend === '' ? null : $backend), $this->timeout, $this->maxFrameBytes);
            }
            $epoch = $connection->epoch();
            $failure = null;
            foreach ($ids as $backend => $id) {
                try {
                    $reply = $connection->await($id, $epoch);
                } catch (\Throwable $e) {
                    // Every reply is read before throwing, so that none is left owed on the socket.
                    $failure ??= $e;
                    continue;
                }
                $position = $reply['position'] ?? null;
                if (!\is_string($position)) {
                    $failure ??= $connection->malformedReply('causal_token');
                    continue;
                }
                if ($position !== '') {
                    $positions[$backend] = $position;
                }
            }
            if ($failure !== null) {
                throw $failure;
            }
        }
        if ($positions === []) {
            return '';
        }
        \ksort($positions, \SORT_STRING);

        return \rtrim(\strtr(\base64_encode(\json_encode($positions, \JSON_FORCE_OBJECT | \JSON_UNESCAPED_SLASHES | \JSON_THROW_ON_ERROR)), '+/', '-_'), '=');
    }

    /**
     * sendCausalAfter sends `causal_after` for every backend of the causal_token option, pipelined, and reads the
     * replies: one round trip before this client's first call in each socket epoch (tetherd forgets it with the
     * connection).
     *
     * @throws ServerException e.g. unknown_backend: the token names a backend tetherd does not have
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    private function sendCausalAfter(): void
    {
        $connection = $this->connection;
        $ids = [];
        foreach ($this->causal as $backend => $position) {
            $backend = (string) $backend;
            $ids[] = $connection->submit(Request::causalAfter($backend === '' ? null : $backend, $position), $this->timeout, $this->maxFrameBytes);
        }
        $epoch = $connection->epoch();
        $failure = null;
        foreach ($ids as $id) {
            try {
                $connection->await($id, $epoch);
            } catch (\Throwable $e) {
                $failure ??= $e;
            }
        }
        if ($failure !== null) {
            throw $failure;
        }
        $this->causalEpoch = $epoch;
    }

    /**
     * decodeCausalToken returns the positions of a causal_token option (a causalToken() result): base64url of a
     * JSON object, backend ('' for tetherd's default) => non-empty position of at most 4096 bytes.
     *
     * @return array<string, string>
     * @throws InvalidArgumentException anything else
     */
    private static function decodeCausalToken(mixed $token): array
    {
        if ($token === null || $token === '') {
            return [];
        }
        $bad = static fn (string $why): InvalidArgumentException => new InvalidArgumentException(\sprintf(
            'option causal_token: %s; want a token from Client::causalToken() (or null or \'\' for none)',
            $why,
        ));
        if (!\is_string($token)) {
            throw $bad('got a ' . \get_debug_type($token));
        }
        if (\strlen($token) > self::MAX_CAUSAL_TOKEN_BYTES) {
            throw $bad(\sprintf('%d bytes, more than %d', \strlen($token), self::MAX_CAUSAL_TOKEN_BYTES));
        }
        if (\preg_match('/^[A-Za-z0-9_-]+$/', $token) !== 1 || \strlen($token) % 4 === 1) {
            throw $bad('not base64url');
        }
        $json = \base64_decode(\strtr($token, '-_', '+/'), true);
        $positions = $json === false ? null : \json_decode($json, true, 2);
        if (!\is_array($positions) || $positions === [] || ($json[0] ?? '') !== '{') {
            throw $bad('not a token (it does not decode to backends and positions)');
        }
        $out = [];
        foreach ($positions as $backend => $position) {
            if (!\is_string($position) || $position === '' || \strlen($position) > 4096) {
                throw $bad(\sprintf('backend %s has no valid position', \var_export((string) $backend, true)));
            }
            $out[(string) $backend] = $position;
        }

        return $out;
    }

    /**
     * query runs a statement that returns rows.
     *
     * Values arrive as PHP null, int, float, bool (PostgreSQL and SQLite BOOLEAN) or string: text, binary,
     * DECIMAL (exact digits), dates and times are strings (see docs/protocol.md). With a repeated column name
     * (SELECT a.id, b.id) the last one's value wins, as in PDO's FETCH_ASSOC: alias them, or use queryNumeric()
     * or queryColumns(), which keep every column.
     *
     * @param array<mixed> $params positional parameters (`?` on MySQL/SQLite, `$1` on PostgreSQL): null, bool,
     *                             int, float or string; always bound, never interpolated
     * @param string|null $backend the backend; null for the client's default
     * @param int|null $timeoutMs deadline of this statement on tetherd; null for the server's default_timeout
     * @param int|null $cacheTtlMs let tetherd answer from its shared result cache, and keep this result there for at
     *                             most this many ms (MySQL/MariaDB and PostgreSQL; dropped at once by any write through
     *                             tetherd to the backend; docs/operations.md, "Result cache"); null: not cached
     * @param bool $primary on a backend with replicas, run on its primary even when the statement could run on a
     *                      replica (a framework's write connection, a read that must see the latest write of any
     *                      client); never answered from the local cache. Ignored on a backend of one server. The
     *                      backend then counts as written to for causalToken()
     * @return list<array<string, mixed>> the rows, each column name => value
     * @throws ServerException the statement failed (backend_error with getBackendCode(), timeout, busy, ...)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function query(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null, bool $primary = false): array
    {
        if ($primary) {
            $this->wrote[$backend ?? $this->backend ?? ''] = true;
        } elseif ($this->local !== null && $cacheTtlMs > 0) {
            return $this->localCall('rows', $sql, $params, $backend ?? $this->backend, $timeoutMs, false, $cacheTtlMs);
        }

        return $this->call(Request::statement('query', $sql, $params, $backend ?? $this->backend, null, $timeoutMs, false, $this->timeFormat, $cacheTtlMs, $primary), 'rows');
    }

    /**
     * queryOne runs a statement and returns its first row, or null when it returned none. Errors as query().
     *
     * @param array<mixed> $params
     * @return array<string, mixed>|null
     */
    public function queryOne(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null, bool $primary = false): ?array
    {
        if ($primary) {
            $this->wrote[$backend ?? $this->backend ?? ''] = true;
        } elseif ($this->local !== null && $cacheTtlMs > 0) {
            return $this->localCall('first', $sql, $params, $backend ?? $this->backend, $timeoutMs, false, $cacheTtlMs);
        }
        if ($this->causal !== [] && $this->causalEpoch !== $this->connection->epoch()) {
            $this->sendCausalAfter();
        }
        // The point read calls the one path, StreamConnection::call(), itself rather than through call(): one PHP
        // call less on the hottest path, with the same request, decoding and exceptions.
        return $this->connection->call(
            Request::statement('query', $sql, $params, $backend ?? $this->backend, null, $timeoutMs, false, $this->timeFormat, $cacheTtlMs, $primary),
            'first',
            $this->timeout,
            $this->maxFrameBytes,
        );
    }

    /**
     * queryNumeric runs a statement that returns rows, like query(), and returns each row as the list of its values
     * in column order (PDO's FETCH_NUM) with the column names beside them: every column is kept whatever its name
     * (SELECT a.id, b.id gives both ids). The rows are the decoded reply's arrays, so this is the cheapest way to
     * read rows. Errors as query().
     *
     * @param array<mixed> $params
     */
    public function queryNumeric(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null, bool $primary = false): NumericResult
    {
        if ($primary) {
            $this->wrote[$backend ?? $this->backend ?? ''] = true;
        } elseif ($this->local !== null && $cacheTtlMs > 0) {
            return $this->localCall('numeric', $sql, $params, $backend ?? $this->backend, $timeoutMs, false, $cacheTtlMs);
        }

        return $this->call(Request::statement('query', $sql, $params, $backend ?? $this->backend, null, $timeoutMs, false, $this->timeFormat, $cacheTtlMs, $primary), 'numeric');
    }

    /**
     * queryColumns runs a statement that returns rows, like query(), and returns them in column-oriented form: a
     * ColumnarResult, which decodes with far fewer allocations (one array per column instead of one per row) and
     * hands out each column as it is. Use it for many rows read by column; rows() builds the usual rows. Every
     * column is kept, by position (columnAt(), numericRows()), whatever its name. Errors as query().
     *
     * @param array<mixed> $params
     */
    public function queryColumns(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null, bool $primary = false): ColumnarResult
    {
        if ($primary) {
            $this->wrote[$backend ?? $this->backend ?? ''] = true;
        } elseif ($this->local !== null && $cacheTtlMs > 0) {
            return $this->localCall('columns', $sql, $params, $backend ?? $this->backend, $timeoutMs, true, $cacheTtlMs);
        }

        return $this->call(Request::statement('query', $sql, $params, $backend ?? $this->backend, null, $timeoutMs, true, $this->timeFormat, $cacheTtlMs, $primary), 'columns');
    }

    /**
     * execute runs a statement for its effect (INSERT, UPDATE, DDL, ...). Errors as query().
     *
     * @param array<mixed> $params
     * @param bool $primary as for query(); an exec runs on the primary anyway (the SQL lexer sends anything it is
     *                      unsure of there), so this only says it explicitly
     * @return ExecResult affected rows and the backend's last insert id (0 on PostgreSQL)
     */
    public function execute(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, bool $primary = false): ExecResult
    {
        $this->wrote[$backend ?? $this->backend ?? ''] = true;

        return $this->call(Request::statement('exec', $sql, $params, $backend ?? $this->backend, null, $timeoutMs, false, null, null, $primary), 'exec');
    }

    /**
     * queryPage runs a statement on a backend that pages (Cassandra: CQL with bound parameters) and returns one page
     * of at most $pageSize rows. Pass the page's cursor back, with the same statement and parameters, for the next
     * one; a page without a cursor is the last. SQL backends answer `unsupported`: page with LIMIT, or scan().
     *
     * @param array<mixed> $params positional parameters
     * @param int $pageSize most rows of this page, at least 1
     * @param string|null $cursor the cursor of the previous page; null for the first
     * @throws LogicException $pageSize < 1
     * @throws ServerException e.g. unsupported, backend_error
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function queryPage(string $sql, array $params, int $pageSize, ?string $cursor = null, ?string $backend = null, ?int $timeoutMs = null): ScanResult
    {
        if ($pageSize < 1) {
            throw new LogicException(\sprintf('queryPage: want a page size >= 1, got %d', $pageSize));
        }

        return $this->call(Request::queryPage($sql, $params, $pageSize, $cursor, $backend ?? $this->backend, $timeoutMs), 'page');
    }

    /**
     * get reads the row of $table with primary key $key, on any backend, without SQL: tetherd builds the statement
     * from the table's primary key (Cassandra: partition key then clustering columns; Bigtable: the row key, and
     * the row comes back wide: `key` and one `family:qualifier` column per column, each its latest value).
     *
     * @param mixed $key the key's value (int, string, ...), or for a composite key the list of its values in key
     *                   order (array keys are ignored)
     * @param array<string> $columns the columns to return; empty for all
     * @param int|null $cacheTtlMs as for query(): the row from tetherd's result cache, for at most this many ms; a
     *                             write through tetherd to the table (or any key-API write on the backend) drops it
     * @return array<string, mixed>|null the row (column name => value), or null when there is none
     * @throws ServerException e.g. unknown_table, bad_request (wrong number of key values, unknown column)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function get(string $table, mixed $key, array $columns = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null): ?array
    {
        // As queryOne(): the point read by key calls StreamConnection::call() itself.
        if ($this->causal !== [] && $this->causalEpoch !== $this->connection->epoch()) {
            $this->sendCausalAfter();
        }

        return $this->connection->call(
            self::cached(Request::get($table, $key, $columns, $backend ?? $this->backend, $timeoutMs), $cacheTtlMs),
            'first',
            $this->timeout,
            $this->maxFrameBytes,
        );
    }

    /**
     * multiGet reads the rows of several keys of $table in one round trip. An empty $keys returns [] without a
     * round trip. Errors as get().
     *
     * @param array<mixed> $keys each a key value, or a list of a composite key's values
     * @param array<string> $columns the columns to return; empty for all
     * @param int|null $cacheTtlMs as for get()
     * @return list<array<string, mixed>|null> one element per key, in the order of $keys: the row, or null where
     *                                         the key has no row
     */
    public function multiGet(string $table, array $keys, array $columns = [], ?string $backend = null, ?int $timeoutMs = null, ?int $cacheTtlMs = null): array
    {
        if ($keys === []) {
            return [];
        }

        $request = self::cached(Request::multiGet($table, $keys, $columns, $backend ?? $this->backend, $timeoutMs), $cacheTtlMs);
        if ($this->causal !== [] && $this->causalEpoch !== $this->connection->epoch()) {
            $this->sendCausalAfter();
        }

        return $this->connection->call($request, 'sparseRows', $this->timeout, $this->maxFrameBytes, null, \count($keys));
    }

    /**
     * scan reads rows of $table in primary key order: those whose key starts with the values $prefix, or those
     * from $start (inclusive) to $end (exclusive), one page of at most $limit. When the result hasMore(), call
     * again with the same arguments and its cursor for the next page, or use scanAll(). On Cassandra a prefix must
     * cover the partition key: scan('c1', prefix: ['a']) is phpcassa's get('a').
     *
     * @param array<mixed> $prefix leading key values; empty for the whole table (or the range)
     * @param array<mixed>|null $start first key, or the leading values of one; null for no lower bound
     * @param array<mixed>|null $end key to stop before, or the leading values of one; null for no upper bound
     * @param int $limit most rows of this page; 0 for the server's default (1000)
     * @param string|null $cursor the cursor of the previous page; null for the first
     * @param array<string> $columns the columns to return; empty for all
     * @throws ServerException e.g. unknown_table, bad_request (a prefix and a range, too many key values)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function scan(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $limit = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): ScanResult
    {
        return $this->call(Request::scan($table, $prefix, $start, $end, $limit, $cursor, $columns, $backend ?? $this->backend, $timeoutMs), 'page');
    }

    /**
     * scanColumns is scan() answered in column-oriented form (see queryColumns()); its cursor() is the next page's.
     * Errors as scan().
     *
     * @param array<mixed> $prefix
     * @param array<mixed>|null $start
     * @param array<mixed>|null $end
     * @param array<string> $columns
     */
    public function scanColumns(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $limit = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): ColumnarResult
    {
        return $this->call(Request::scan($table, $prefix, $start, $end, $limit, $cursor, $columns, $backend ?? $this->backend, $timeoutMs, true), 'columns');
    }

    /**
     * scanAll is scan() over every page: a generator that yields the rows one by one (keys 0, 1, 2, ...), asking
     * for the next page of $pageSize rows when the previous one is used up. Nothing is sent before the first row
     * is asked for, and a failure is thrown from the iteration. $cursor resumes an earlier scan; $timeoutMs bounds
     * each page.
     *
     * @param array<mixed> $prefix
     * @param array<mixed>|null $start
     * @param array<mixed>|null $end
     * @param int $pageSize rows per round trip; 0 for the server's default (1000)
     * @param array<string> $columns
     * @return \Generator<int, array<string, mixed>, mixed, void>
     * @throws ServerException|CommunicationException as scan(), while iterating
     */
    public function scanAll(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $pageSize = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): \Generator
    {
        do {
            $page = $this->scan($table, $prefix, $start, $end, $pageSize, $cursor, $columns, $backend, $timeoutMs);
            foreach ($page->rows as $row) {
                yield $row;
            }
        } while (($cursor = $page->cursor) !== null);
    }

    /**
     * put writes $row into $table: it inserts the row, or updates the columns it names when a row with its key
     * exists (an upsert; the other columns keep their values). $row must hold every primary key column (on
     * Bigtable: `key`, and `family:qualifier` columns).
     *
     * @param array<string, mixed> $row column name => value (null, bool, int, float or string)
     * @throws LogicException $row is empty
     * @throws ServerException e.g. unknown_table, bad_request (a key column missing, an unknown column)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function put(string $table, array $row, ?string $backend = null, ?int $timeoutMs = null): void
    {
        if ($row === []) {
            throw new LogicException('put needs a row with at least its key columns');
        }
        $this->wrote[$backend ?? $this->backend ?? ''] = true;
        $this->call(Request::put($table, $row, $backend ?? $this->backend, $timeoutMs), 'done');
    }

    /**
     * delete deletes the row of $table with primary key $key. Errors as get().
     *
     * @param mixed $key the key's value, or the list of a composite key's values in key order
     * @return int the number of rows deleted (0 or 1); 1 on backends that cannot count (Cassandra, Bigtable)
     */
    public function delete(string $table, mixed $key, ?string $backend = null, ?int $timeoutMs = null): int
    {
        $this->wrote[$backend ?? $this->backend ?? ''] = true;

        return $this->call(Request::delete($table, $key, $backend ?? $this->backend, $timeoutMs), 'affected');
    }

    /**
     * readRows reads Bigtable rows as *long* rows, one per cell: each ['key' => row key, 'family' => ...,
     * 'qualifier' => ..., 'timestamp' => microseconds, 'value' => bytes], in row key, then column, then
     * newest-first order. Select the rows with one of:
     *   - 'keys' => ['row#1', 'row#2']: those rows (missing ones are left out);
     *   - 'prefix' => 'user#42#': the rows whose key starts with it;
     *   - 'start' => 'a', 'end' => 'b': the rows from start (inclusive) to end (exclusive), either optional;
     * and nothing for the whole table. Other options: 'limit' (most rows, 0 for the server's default; the cursor
     * comes when the limit was reached), 'cursor' (of the previous page), 'families' (only these column
     * families), 'columns' (only these "family:qualifier" columns), 'latest' => true (only the newest cell of each
     * column). Other backends answer `unsupported`.
     *
     * @param array{keys?: array<string>, prefix?: string|null, start?: string|null, end?: string|null,
     *              limit?: int, cursor?: string|null, families?: array<string>, columns?: array<string>,
     *              latest?: bool} $options
     * @throws LogicException an unknown option or a value of the wrong type
     * @throws ServerException e.g. unknown_table, unsupported
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function readRows(string $table, array $options = [], ?string $backend = null, ?int $timeoutMs = null): ScanResult
    {
        return $this->call(Request::readRows($table, $options, $backend ?? $this->backend, $timeoutMs), 'page');
    }

    /**
     * readRowsColumns is readRows() answered in column-oriented form (see queryColumns()): columns key, family,
     * qualifier, timestamp, value. Errors as readRows().
     *
     * @param array{keys?: array<string>, prefix?: string|null, start?: string|null, end?: string|null,
     *              limit?: int, cursor?: string|null, families?: array<string>, columns?: array<string>,
     *              latest?: bool} $options
     */
    public function readRowsColumns(string $table, array $options = [], ?string $backend = null, ?int $timeoutMs = null): ColumnarResult
    {
        return $this->call(Request::readRows($table, $options, $backend ?? $this->backend, $timeoutMs, true), 'columns');
    }

    /**
     * mutateRow applies $mutations to the Bigtable row $key atomically, in order:
     *
     *     $client->mutateRow('events', 'user#42', [
     *         Mutation::set('f', 'name', 'ada'),
     *         Mutation::deleteCells('f', 'old'),
     *     ], 'bt');
     *
     * @param array<Mutation> $mutations at least one
     * @throws LogicException no mutations, or an element that is not a Mutation
     * @throws ServerException e.g. unknown_table, unsupported, backend_error (unknown column family)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function mutateRow(string $table, string $key, array $mutations, ?string $backend = null, ?int $timeoutMs = null): void
    {
        $this->call(Request::mutateRow($table, $key, $mutations, $backend ?? $this->backend, $timeoutMs), 'done');
    }

    /**
     * increment adds $delta (may be negative) to the 64-bit big-endian counter in the Bigtable cell
     * family:qualifier of row $key, atomically (a missing cell counts as 0), and returns the new value.
     *
     * @throws ServerException e.g. backend_error when the cell holds something else than 8 bytes
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown (the counter may or
     *                                may not have been incremented: do not retry blindly)
     */
    public function increment(string $table, string $key, string $family, string $qualifier, int $delta = 1, ?string $backend = null, ?int $timeoutMs = null): int
    {
        return $this->call(Request::increment($table, $key, $family, $qualifier, $delta, $backend ?? $this->backend, $timeoutMs), 'counter');
    }

    /**
     * checkAndMutate applies $ifTrue to the Bigtable row $key when it has a cell in family:qualifier whose latest
     * value is $value, else $ifFalse, atomically. A null $qualifier matches any column of the family; a null
     * $value matches any value (the cell exists).
     *
     * @param array<Mutation> $ifTrue
     * @param array<Mutation> $ifFalse
     * @return bool whether the predicate matched (so $ifTrue was applied)
     * @throws LogicException an element that is not a Mutation
     * @throws ServerException|CommunicationException as mutateRow()
     */
    public function checkAndMutate(string $table, string $key, string $family, ?string $qualifier, ?string $value, array $ifTrue, array $ifFalse = [], ?string $backend = null, ?int $timeoutMs = null): bool
    {
        return $this->call(Request::checkAndMutate($table, $key, $family, $qualifier, $value, $ifTrue, $ifFalse, $backend ?? $this->backend, $timeoutMs), 'matched');
    }

    /**
     * noBackslashEscapes tells whether the session sql_mode of $backend (MySQL/MariaDB) has NO_BACKSLASH_ESCAPES,
     * so that a value is escaped into a string literal the way the server will read it (Sql\SqlText::quote(),
     * escapeMySql()). The answer is kept ONCE per socket and backend, shared by every Client of this process on the
     * same socket; it is read again (a round trip) after any of them sends a statement that may set sql_mode
     * (Sql\SqlText::setsSqlMode()), and after the socket is dropped and reopened (tetherd forgets the session
     * settings of a closed socket, e.g. on a broken connection or an upgrade handover).
     *
     * To read it, the mode the session has now is first made this socket's own (`SET SESSION sql_mode =
     * @@SESSION.sql_mode`: tetherd then applies it to whichever pooled connection runs the next statement, so a
     * pooled connection opened under another global sql_mode cannot read literals otherwise than they were
     * escaped for), then read back. Inside a transaction pass it as $tx: the two statements run in it.
     *
     * @param string|null      $backend the backend ($tx's when $tx is given); null: the client's default
     * @throws ServerException|CommunicationException the mode could not be read (e.g. not a MySQL backend)
     */
    public function noBackslashEscapes(?string $backend = null, ?Transaction $tx = null): bool
    {
        $key = $backend ?? $this->backend ?? '';
        $known = $this->connection->knownNoBackslashEscapes($key);
        if ($known !== null) {
            return $known;
        }
        $pin = 'SET SESSION sql_mode = @@SESSION.sql_mode';
        $read = 'SELECT @@SESSION.sql_mode AS sql_mode';
        if ($tx !== null) {
            $tx->execute($pin);
            $epoch = $this->connection->epoch();
            $row = $tx->queryOne($read);
        } else {
            $this->execute($pin, [], $backend);
            $epoch = $this->connection->epoch();
            $row = $this->queryOne($read, [], $backend);
        }
        $on = SqlText::noBackslashEscapes((string) ($row['sql_mode'] ?? ''));
        // Kept only if the socket that holds the pinned mode is still the one in use.
        $this->connection->noteNoBackslashEscapes($key, $on, $epoch);

        return $on;
    }

    /**
     * sqlModeSet records, for noBackslashEscapes(), the sql_mode this client has just given the session of $backend
     * by a `SET SESSION sql_mode = '...'` that succeeded (tetherd keeps it for the socket), so that no round trip
     * reads it back. Say it only right after that statement's success, with the literal it set.
     */
    public function sqlModeSet(string $sqlMode, ?string $backend = null): void
    {
        $this->connection->noteNoBackslashEscapes($backend ?? $this->backend ?? '', SqlText::noBackslashEscapes($sqlMode), $this->connection->epoch());
    }

    /**
     * begin opens a transaction on a backend connection that tetherd pins to this client's socket. End it with
     * commit() or rollback(); one left open is rolled back when the Transaction is destroyed or the PHP request
     * ends. Prefer transaction(), which cannot leave one open.
     *
     * @throws ServerException e.g. busy (no pooled connection came free), unknown_backend
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function begin(?string $backend = null, ?int $timeoutMs = null): Transaction
    {
        $tx = $this->call(Request::begin($backend ?? $this->backend, $timeoutMs), 'tx');
        $this->connection->track($tx);
        $written = $backend ?? $this->backend ?? '';
        $transaction = new Transaction($this->connection, $tx, $this->connection->epoch(), $this->timeout, $this->maxFrameBytes, $this->timeFormat, function () use ($written): void {
            $this->wrote[$written] = true;
        });
        foreach ($this->transactions as $i => $ref) {
            if ($ref->get()?->isOpen() !== true) {
                unset($this->transactions[$i]);
            }
        }
        $this->transactions[] = \WeakReference::create($transaction);

        return $transaction;
    }

    /**
     * transaction runs $fn($tx) inside a transaction: it begins one, calls $fn, commits and returns $fn's value.
     * If $fn throws, the transaction is rolled back and the exception rethrown unchanged; a failure of that
     * rollback is appended to the end of the exception's getPrevious() chain, never thrown in its place. If $fn
     * ended the transaction itself (commit() or rollback()), it is left as is.
     *
     * @template T
     * @param callable(Transaction): T $fn
     * @return T
     * @throws \Throwable whatever $fn threw, or what begin() or commit() threw
     */
    public function transaction(callable $fn, ?string $backend = null): mixed
    {
        $tx = $this->begin($backend);
        try {
            $result = $fn($tx);
        } catch (\Throwable $e) {
            if (!$tx->isFinished()) {
                try {
                    $tx->rollback();
                } catch (\Throwable $rollbackError) {
                    self::appendPrevious($e, $rollbackError);
                }
            }
            throw $e;
        }
        if (!$tx->isFinished()) {
            $tx->commit();
        }

        return $result;
    }

    /**
     * http sends one request to the HTTP upstream $upstream (a backend of type http in tetherd's config) over
     * tetherd's warm keep-alive pool to it, and returns the whole response. $path (with its query string) is
     * appended to the upstream's base URL: a page can reach configured upstreams only, never name a host.
     *
     * Any status is a response: a 404 or a 503 comes back as an HttpResponse, never as an exception.
     *
     * @param string $upstream the upstream's backend name
     * @param string $method GET, POST, ...
     * @param string $path path and query below the upstream's base URL; must start with `/`
     * @param array<string, string|int> $headers request headers (name => value), over the upstream's defaults;
     *                                           Host and hop-by-hop headers are refused
     * @param string|null $body the request body, bytes as they are; null for none
     * @param int|null $timeoutMs deadline of the whole exchange with the upstream; null for the server's default
     * @throws LogicException a header value that is not a string or an int
     * @throws ServerException unavailable (the upstream refused the connection; nothing was sent, retryable),
     *                         timeout, too_large (body over the upstream's max_response_bytes), backend_error
     *                         (the connection broke mid-response), bad_request (a path that is not relative, a
     *                         refused header), unknown_backend
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function http(string $upstream, string $method, string $path, array $headers = [], ?string $body = null, ?int $timeoutMs = null): HttpResponse
    {
        return $this->call(Request::http($upstream, $method, $path, $headers, $body, $timeoutMs), 'http');
    }

    /**
     * join runs a lookup join on tetherd in one round trip: it runs $left, takes the values of its $on columns
     * from each row, looks the distinct ones up as keys of $rightTable (batched, on $rightBackend, which may be
     * another backend than the left's: users in MariaDB, groups in PostgreSQL or Cassandra) and joins the rows:
     *
     *     $rows = $client->join(
     *         Operation::query('SELECT id, name, group_id FROM users WHERE active = ?', [1], 'maria'),
     *         'groups', on: ['group_id'], rightColumns: ['title'], orderBy: ['title', '-id'],
     *     )->rows();   // [['id' => 7, 'name' => 'ada', 'group_id' => 3, 'title' => 'admins'], ...]
     *
     * The columns are the left's, then $rightColumns (empty: all of the right table's); a right column whose
     * name is taken already is named `table.column`. A `left` join keeps every left row (right columns null where
     * nothing matched, or where an $on value is null); an `inner` join keeps the matched ones. Rows keep the
     * left's order unless $orderBy sorts them (stable, nulls first, strings by their bytes).
     *
     * @param Operation $left a query, scan, get, multiGet or readRows operation (Operation::query(), ...)
     * @param string $rightTable the table whose rows are looked up by primary key
     * @param list<string> $on the left columns whose values, in the right table's key order, form its key
     * @param list<string> $rightColumns the right columns to add; empty for all
     * @param string|null $rightBackend the right table's backend; null for the left's
     * @param string $kind `left` or `inner`
     * @param list<string> $orderBy output columns to sort by, in order; `-name` for descending
     * @param int|null $timeoutMs deadline of the whole join; null for the server's default
     * @param int|null $cacheTtlMs as for query(): the joined rows from tetherd's result cache, for at most this many
     *                             ms; any write through tetherd to the left side's tables or to the right backend
     *                             drops them
     * @throws LogicException another kind of left operation, a kind other than left or inner, an empty $on
     * @throws ServerException e.g. unknown_table (either table), bad_request (an unknown $on or $orderBy column,
     *                         the wrong number of $on columns for the right key), unavailable; the join fails as a
     *                         whole, never with half-joined rows
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function join(Operation $left, string $rightTable, array $on, array $rightColumns = [], ?string $rightBackend = null, string $kind = 'left', array $orderBy = [], ?int $timeoutMs = null, ?int $cacheTtlMs = null): ColumnarResult
    {
        return $this->call(self::cached(Request::join($this->withBackend($left), $rightTable, $on, $rightColumns, $rightBackend, $kind, $orderBy, $timeoutMs), $cacheTtlMs), 'columns');
    }

    /**
     * batch sends several operations in one frame; tetherd runs them concurrently (within each backend's pool
     * limits) and answers once, so one round trip can read a MySQL row, a Cassandra slice and a Bigtable row, and
     * call two HTTP upstreams. The result has the keys of $ops, in their order; each element is what the
     * operation's Client method returns (rows for a query, an ExecResult for an execute, ?array for a get, a list
     * for a multiGet, a ScanResult for a scan or readRows, a ColumnarResult for a join and the *Columns reads, an
     * HttpResponse for an http, the affected count for a delete, the new value for an increment, a bool for a
     * checkAndMutate, and true for the operations whose method returns nothing: ping, put, mutateRow) or, for an
     * operation that failed, the ServerException describing it, returned and not thrown: one failing operation
     * does not make the others unavailable. An empty $ops returns [] without a round trip.
     *
     * batch() is sendBatch() and wait() at once.
     *
     * @param array<array-key, Operation> $ops built with Operation's factories (::query(), ::get(), ...)
     * @param int|null $timeoutMs deadline of the whole batch; an operation may carry a shorter one
     * @return array<array-key, mixed>
     * @throws LogicException an element of $ops is not an Operation
     * @throws ServerException the batch as a whole was rejected (bad_request, timeout, ...)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function batch(array $ops, ?int $timeoutMs = null): array
    {
        return $this->sendBatch($ops, $timeoutMs)->wait();
    }

    /**
     * sendBatch sends a batch like batch() and returns at once, without waiting for the reply: tetherd runs the
     * operations while the page does its own work, and PendingBatch::wait() collects the results (what batch()
     * returns). Meanwhile this client (and every client on the same socket) works as usual: queries,
     * transactions, other batches, each matched with its own reply; pending batches can be waited for in any
     * order.
     *
     *     $pending = $client->sendBatch([
     *         'user'   => Operation::http('accounts', 'GET', '/users/42'),
     *         'offers' => Operation::http('offers', 'GET', '/offers?user=42', timeoutMs: 300),
     *     ]);
     *     $cart = $client->query('SELECT * FROM cart WHERE user_id = ?', [42]);   // while the upstreams work
     *     ['user' => $user, 'offers' => $offers] = $pending->wait();
     *
     * A batch that is never waited for is abandoned; if its reply has not arrived when the PHP request ends, the
     * socket is closed, which makes tetherd cancel what is still running.
     *
     * @param array<array-key, Operation> $ops
     * @param int|null $timeoutMs deadline of the whole batch; an operation may carry a shorter one
     * @throws LogicException an element of $ops is not an Operation
     * @throws CommunicationException not sent (tetherd unreachable); safe to retry
     */
    public function sendBatch(array $ops, ?int $timeoutMs = null): PendingBatch
    {
        if ($ops === []) {
            return new PendingBatch(null, 0, 0, [], []);
        }
        $maps = [];
        $backend = $this->backend;
        foreach ($ops as $key => $op) {
            if (!$op instanceof Operation) {
                throw new LogicException(\sprintf('batch operation %s: want a %s, got %s', $key, Operation::class, \get_debug_type($op)));
            }
            $maps[] = $backend === null ? $op->request : $this->withBackend($op);
            if ($op->op === 'exec' || $op->op === 'put' || $op->op === 'delete' || isset($op->request['primary'])) {
                $this->wrote[$op->request['backend'] ?? $backend ?? ''] = true;
            }
        }
        if ($this->causal !== [] && $this->causalEpoch !== $this->connection->epoch()) {
            $this->sendCausalAfter();
        }
        $id = $this->connection->submit(Request::batch($maps, $timeoutMs), $this->timeout, $this->maxFrameBytes);

        return new PendingBatch($this->connection, $id, $this->connection->epoch(), $ops);
    }

    /**
     * close ends what this client holds on tetherd, at once, as closing a native database connection does:
     *  1. every transaction this client began and left open is rolled back (a `rollback` round trip, so its locks
     *     are free when close() returns). If tetherd answers that rollback with an error (unknown_tx, internal,
     *     timeout, ...), close() carries on: the socket is sound and may hold other Clients' transactions, so it is
     *     never dropped for that. Only if no answer comes (the socket broke) is the socket dropped, and tetherd
     *     rolls back the transactions of a closed socket;
     *  2. a non-persistent socket is closed (tetherd forgets its session settings with it). A persistent socket
     *     stays open: it is shared by every Client of this process on the same address and by the worker's next
     *     PHP requests, so closing it would end the other clients' transactions; it holds no transaction of this
     *     client any more.
     * Never throws. The client stays usable: the next call reconnects if needed. drop() closes even a persistent
     * socket. Called while a reply is being read on the socket (from a destructor the garbage collector runs), it
     * does nothing: the end of the PHP request rolls back what is left.
     */
    public function close(): void
    {
        if ($this->connection->isReading()) {
            // Called from a destructor the garbage collector ran while a reply is read on this socket: nothing may
            // be sent or closed now. The transactions' own destructors, or the end of the PHP request, roll back.
            return;
        }
        $transactions = $this->transactions;
        $this->transactions = [];
        foreach ($transactions as $ref) {
            $tx = $ref->get();
            if ($tx === null || !$tx->isOpen()) {
                continue;
            }
            try {
                $tx->rollback();
            } catch (ServerException) {
                // unknown_tx, internal, timeout, ...: tetherd answered, so the socket is sound. It may be shared
                // (persistent) with other Clients whose transactions it holds: never dropped here. What is left of
                // this transaction on the server ends with the socket or at tx_idle_timeout.
            } catch (\Throwable) {
                // No answer (CommunicationException, UnknownOutcomeException): the socket is broken or out of step
                // (as StreamConnection::release() does: dropped; tetherd rolls back what a closed socket held).
                $this->connection->close();
                break;
            }
        }
        if (!$this->persistent) {
            $this->connection->close();
        }
    }

    /**
     * drop closes the socket, even a persistent one: tetherd rolls back every transaction open on it, of any
     * Client of this process on that address, and forgets its session settings. The next call reconnects.
     */
    public function drop(): void
    {
        $this->transactions = [];
        $this->connection->close();
    }

    /**
     * call sends $request on this client's socket through the one path of every call, StreamConnection::call(),
     * and returns the reply decoded as Reply::decode() does for $as (multiGet, which also passes its key count, calls
     * StreamConnection::call() itself).
     *
     * @param array<string, mixed> $request a map from Request
     * @throws ServerException tetherd answered with an error
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, and no reply came, or one that is
     *                                malformed ("tetherd sent a malformed reply to <the request's op>"; the socket
     *                                is dropped)
     */
    private function call(array $request, string $as): mixed
    {
        if ($this->causal !== [] && $this->causalEpoch !== $this->connection->epoch()) {
            $this->sendCausalAfter();
        }

        return $this->connection->call($request, $as, $this->timeout, $this->maxFrameBytes);
    }

    /**
     * localCall answers a cacheable query from the local cache (option local_cache) when it holds it fresh, and
     * otherwise sends it asking for the table versions that let the reply be kept; decoded as call() decodes $as.
     * The local cache is used only while the session's settings on the socket are known (tetherd reported them
     * since the last request was sent: the key holds them, as tetherd's own does); the first cacheable read of a
     * backend on a socket, and the first after any other request, always goes to tetherd. The request map is built
     * only when it is sent.
     *
     * @param array<mixed> $params
     * @throws TetherException as call()
     */
    private function localCall(string $as, string $sql, array $params, ?string $backend, ?int $timeoutMs, bool $columnar, int $ttlMs): mixed
    {
        $local = $this->local;
        $connection = $this->connection;
        if ($this->causal !== [] && $this->causalEpoch !== $connection->epoch()) {
            $this->sendCausalAfter();
        }
        $name = $backend ?? '';
        $profile = $connection->knownProfile($name);
        if ($profile === null && $connection->resumeProfiles($this->timeout, $this->maxFrameBytes)) {
            $profile = $connection->knownProfile($name);
        }
        $key = $local->key($as, $name, $sql, $params, $this->timeFormat, $profile ?? '');
        if ($key === null) {
            return $connection->call(Request::statement('query', $sql, $params, $backend, null, $timeoutMs, $columnar, $this->timeFormat, $ttlMs), $as, $this->timeout, $this->maxFrameBytes);
        }
        if ($profile === null) {
            LocalCache::unknown();
        } elseif ($local->fetch($key, $value)) {
            return $value;
        }
        $request = Request::statement('query', $sql, $params, $backend, null, $timeoutMs, $columnar, $this->timeFormat, $ttlMs);
        $request['versions'] = true;
        $sent = \microtime(true) * 1000.0;
        $reply = $connection->call($request, 'reply', $this->timeout, $this->maxFrameBytes);
        try {
            $value = Reply::decode($as, $reply);
        } catch (MalformedReply) {
            throw $connection->malformedReply('query');
        }
        $versions = $reply['versions'] ?? null;
        if (\is_array($versions) && \is_string($versions['profile'] ?? null)) {
            $connection->noteProfile($name, $versions['profile'], $connection->epoch());
            if (isset($versions['slots'])) {
                $local->store($profile === $versions['profile'] ? $key : (string) $local->key($as, $name, $sql, $params, $this->timeFormat, $versions['profile']), $value, $versions, $sent + $ttlMs, $ttlMs);
            }
        }

        return $value;
    }

    /**
     * withBackend returns the request map of $op with the client's default backend where it names none: on the
     * operation itself, or for a join on its left and right sides. A ping has no backend and an http op always
     * names its upstream.
     *
     * @return array<string, mixed>
     */
    private function withBackend(Operation $op): array
    {
        $backend = $this->backend;
        $request = $op->request;
        if ($backend === null || $op->op === 'ping' || $op->op === 'http') {
            return $request;
        }
        if ($op->op !== 'join') {
            return isset($request['backend']) ? $request : self::withBackendKey($request, $backend);
        }
        foreach (['left', 'right'] as $side) {
            if (!isset($request[$side]['backend'])) {
                $request[$side] = self::withBackendKey($request[$side], $backend);
            }
        }

        return $request;
    }

    /**
     * withBackendKey returns $map with `backend` right after `op` (first when there is no op), where the spec's
     * key order puts it.
     *
     * @param array<string, mixed> $map
     * @return array<string, mixed>
     */
    private static function withBackendKey(array $map, string $backend): array
    {
        return \array_key_exists('op', $map) ? ['op' => $map['op'], 'backend' => $backend] + $map : ['backend' => $backend] + $map;
    }

    /** appendPrevious hangs $cause at the end of $e's chain of previous exceptions. */
    private static function appendPrevious(\Throwable $e, \Throwable $cause): void
    {
        $last = $e;
        while (($previous = $last->getPrevious()) !== null) {
            if ($previous === $cause) {
                return;
            }
            $last = $previous;
        }
        $property = new \ReflectionProperty($last instanceof \Exception ? \Exception::class : \Error::class, 'previous');
        $property->setAccessible(true);
        $property->setValue($last, $cause);
    }
}
