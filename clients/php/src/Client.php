<?php

declare(strict_types=1);

namespace Tether;

use Tether\Batch\Operation;
use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\LogicException;
use Tether\Exception\TetherException;
use Tether\Protocol\Reply;
use Tether\Protocol\Request;
use Tether\Server\ServerException;

/**
 * Client runs SQL on the backends of a tetherd daemon over one local socket.
 *
 * The socket is persistent by default: a php-fpm or mod_php worker keeps it across PHP requests, so a page pays
 * one local round trip per call and no connect. Clients of one process that name the same persistent address
 * share its socket. The constructor connects nothing; the first call does.
 *
 * Every call is synchronous and throws a TetherException subclass on failure:
 * - ServerException: tetherd answered with an error; isRetryable() says whether sending it again is safe.
 * - CommunicationException: the request was not sent (tetherd unreachable); safe to retry.
 * - UnknownOutcomeException (a CommunicationException): the request was sent but no reply came; it may or may
 *   not have run. The client never re-sends a request on its own.
 */
final class Client
{
    private const OPTIONS = ['socket', 'tcp', 'token', 'persistent', 'timeout', 'backend', 'max_frame_bytes'];

    private StreamConnection $connection;
    private ?string $backend;
    private float $timeout;
    private int $maxFrameBytes;

    /**
     * @param array{socket?: string, tcp?: string, token?: string, persistent?: bool, timeout?: float|int,
     *              backend?: string|null, max_frame_bytes?: int} $options
     *   - socket: path of tetherd's Unix socket; default env TETHER_SOCKET, else ./var/tether.sock (relative to the
     *     working directory; use an absolute path under a web server)
     *   - tcp: "host:port" to use TCP instead of the Unix socket; requires token
     *   - token: the shared secret sent in `hello` on each new TCP connection
     *   - persistent: keep the socket across PHP requests of this worker (default true)
     *   - timeout: socket connect and I/O timeout in seconds (default 30); a call with a longer timeoutMs waits
     *     timeoutMs + 1 s instead
     *   - backend: backend used when a call names none (default null: tetherd's default_backend)
     *   - max_frame_bytes: largest reply frame accepted (default 64 MiB); a larger one is a protocol error
     * @throws LogicException an unknown option or an invalid value
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
        } else {
            $socket = $options['socket'] ?? (\getenv('TETHER_SOCKET') ?: './var/tether.sock');
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

        $this->connection = $persistent ? StreamConnection::shared($address, $token) : new StreamConnection($address, false, $token);
        $this->backend = $backend;
        $this->timeout = (float) $timeout;
        $this->maxFrameBytes = $maxFrameBytes;
    }

    /**
     * ping checks that tetherd answers; it does not touch any backend.
     *
     * @throws TetherException
     */
    public function ping(): void
    {
        $this->connection->request(Request::ping(), $this->timeout, $this->maxFrameBytes);
    }

    /**
     * query runs a statement that returns rows.
     *
     * Values arrive as PHP null, int, float, bool (PostgreSQL and SQLite BOOLEAN) or string: text, binary,
     * DECIMAL (exact digits), dates and times are strings (see docs/protocol.md). With duplicate column names
     * the last one wins; alias them.
     *
     * @param array<mixed> $params positional parameters (`?` on MySQL/SQLite, `$1` on PostgreSQL): null, bool,
     *                             int, float or string; always bound, never interpolated
     * @param string|null $backend the backend; null for the client's default
     * @param int|null $timeoutMs deadline of this statement on tetherd; null for the server's default_timeout
     * @return list<array<string, mixed>> the rows, each column name => value
     * @throws ServerException the statement failed (backend_error with getBackendCode(), timeout, busy, ...)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function query(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null): array
    {
        return Reply::rows($this->connection->request(
            Request::query($sql, $params, $backend ?? $this->backend, null, $timeoutMs),
            $this->timeout,
            $this->maxFrameBytes,
        )) ?? throw $this->connection->malformedReply('query');
    }

    /**
     * queryOne runs a statement and returns its first row, or null when it returned none. Errors as query().
     *
     * @param array<mixed> $params
     * @return array<string, mixed>|null
     */
    public function queryOne(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null): ?array
    {
        $rows = Reply::rows($this->connection->request(
            Request::query($sql, $params, $backend ?? $this->backend, null, $timeoutMs),
            $this->timeout,
            $this->maxFrameBytes,
        ), 1) ?? throw $this->connection->malformedReply('query');

        return $rows[0] ?? null;
    }

    /**
     * execute runs a statement for its effect (INSERT, UPDATE, DDL, ...). Errors as query().
     *
     * @param array<mixed> $params
     * @return ExecResult affected rows and the backend's last insert id (0 on PostgreSQL)
     */
    public function execute(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null): ExecResult
    {
        return Reply::exec($this->connection->request(
            Request::exec($sql, $params, $backend ?? $this->backend, null, $timeoutMs),
            $this->timeout,
            $this->maxFrameBytes,
        )) ?? throw $this->connection->malformedReply('exec');
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
        $reply = $this->connection->request(Request::begin($backend ?? $this->backend, $timeoutMs), $this->timeout, $this->maxFrameBytes);
        $tx = $reply['tx'] ?? null;
        if (!\is_int($tx)) {
            throw $this->connection->malformedReply('begin');
        }
        $this->connection->track($tx);

        return new Transaction($this->connection, $tx, $this->connection->epoch(), $this->timeout, $this->maxFrameBytes);
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
     * batch sends several operations in one frame; tetherd runs them concurrently (within each backend's pool
     * limits) and answers once. The result has the keys of $ops, in their order; each element is the operation's
     * result (rows for a query, an ExecResult for an execute, true for a ping) or, for an operation that failed,
     * the ServerException describing it, returned and not thrown: one failing operation does not make the others
     * unavailable. An empty $ops returns [] without a round trip.
     *
     * @param array<array-key, Operation> $ops built with Operation::query(), ::execute(), ::ping()
     * @param int|null $timeoutMs deadline of the whole batch; an operation may carry a shorter one
     * @return array<array-key, list<array<string, mixed>>|ExecResult|true|ServerException>
     * @throws LogicException an element of $ops is not an Operation
     * @throws ServerException the batch as a whole was rejected (bad_request, timeout, ...)
     * @throws CommunicationException not sent; UnknownOutcomeException: sent, outcome unknown
     */
    public function batch(array $ops, ?int $timeoutMs = null): array
    {
        if ($ops === []) {
            return [];
        }
        $maps = [];
        foreach ($ops as $key => $op) {
            if (!$op instanceof Operation) {
                throw new LogicException(\sprintf('batch operation %s: want a %s, got %s', $key, Operation::class, \get_debug_type($op)));
            }
            $request = $op->request;
            if ($this->backend !== null && $op->op !== 'ping' && !isset($request['backend'])) {
                $request = ['op' => $op->op, 'backend' => $this->backend] + $request;
            }
            $maps[] = $request;
        }
        $reply = $this->connection->request(Request::batch($maps, $timeoutMs), $this->timeout, $this->maxFrameBytes);
        $results = $reply['results'] ?? null;
        if (!\is_array($results) || \count($results) !== \count($maps) || !\array_is_list($results)) {
            throw $this->connection->malformedReply('batch');
        }

        $out = [];
        $i = 0;
        foreach ($ops as $key => $op) {
            $item = $results[$i++];
            if (!\is_array($item)) {
                throw $this->connection->malformedReply('batch');
            }
            if (isset($item['error'])) {
                $out[$key] = ServerException::fromError((array) $item['error']);
                continue;
            }
            $out[$key] = match ($op->op) {
                'query' => Reply::rows($item),
                'exec' => Reply::exec($item),
                default => true,
            } ?? throw $this->connection->malformedReply('batch');
        }

        return $out;
    }

    /**
     * close drops the socket, even a persistent one; tetherd rolls back its open transactions. Other Clients of
     * this process on the same persistent address lose it too. The next call reconnects.
     */
    public function close(): void
    {
        $this->connection->close();
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
