<?php

declare(strict_types=1);

namespace Tether;

use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\LogicException;
use Tether\Protocol\Reply;
use Tether\Protocol\Request;
use Tether\Server\ServerException;

/**
 * Transaction is a database transaction pinned by tetherd to one backend connection, and owned by this client's
 * socket. Get one from Client::begin() or Client::transaction().
 *
 * Its statements run in order on the backend connection that began it. A transaction lives only as long as the
 * socket that began it: if the socket is dropped, tetherd rolls the transaction back and every later statement
 * throws CommunicationException without being sent. After commit() or rollback(), any call throws
 * LogicException.
 *
 * A transaction still open when this object is destroyed, or when the PHP request ends, is rolled back without
 * throwing: the socket is persistent, so tetherd cannot see the PHP request end.
 */
final class Transaction
{
    private const OPEN = 'open';
    private const COMMITTED = 'committed';
    private const ROLLED_BACK = 'rolled back';

    private string $state = self::OPEN;

    /**
     * @internal created by Client::begin()
     */
    public function __construct(
        private readonly StreamConnection $connection,
        private readonly int $handle,
        private readonly int $epoch,
        private readonly float $timeout,
        private readonly int $maxFrameBytes,
        private readonly ?string $timeFormat = null,
        private readonly ?\Closure $onCommit = null,
    ) {
    }

    /**
     * query runs a statement that returns rows, inside this transaction.
     *
     * @param array<mixed> $params positional parameters (`?` on MySQL/SQLite, `$1` on PostgreSQL)
     * @return list<array<string, mixed>> the rows, each column name => value
     * @throws ServerException the statement failed (the transaction stays open; on PostgreSQL it is aborted)
     * @throws CommunicationException the transaction was lost with its connection; nothing was sent
     * @throws UnknownOutcomeException the statement was sent but its reply never came; the transaction is lost
     * @throws LogicException the transaction was already committed or rolled back
     */
    public function query(string $sql, array $params = [], ?int $timeoutMs = null): array
    {
        return $this->call(Request::statement('query', $sql, $params, null, $this->handle, $timeoutMs, false, $this->timeFormat), 'rows');
    }

    /**
     * queryOne runs a statement inside this transaction and returns its first row, or null when it returned none.
     * Errors as query().
     *
     * @param array<mixed> $params
     * @return array<string, mixed>|null
     */
    public function queryOne(string $sql, array $params = [], ?int $timeoutMs = null): ?array
    {
        return $this->call(Request::statement('query', $sql, $params, null, $this->handle, $timeoutMs, false, $this->timeFormat), 'first');
    }

    /**
     * queryNumeric runs a statement inside this transaction and returns its rows as lists of values in column
     * order, every column kept, as Client::queryNumeric() does. Errors as query().
     *
     * @param array<mixed> $params
     */
    public function queryNumeric(string $sql, array $params = [], ?int $timeoutMs = null): NumericResult
    {
        return $this->call(Request::statement('query', $sql, $params, null, $this->handle, $timeoutMs, false, $this->timeFormat), 'numeric');
    }

    /**
     * queryColumns runs a statement inside this transaction and returns its rows in column-oriented form, as
     * Client::queryColumns() does (column names even when no row came). Errors as query().
     *
     * @param array<mixed> $params
     */
    public function queryColumns(string $sql, array $params = [], ?int $timeoutMs = null): ColumnarResult
    {
        return $this->call(Request::statement('query', $sql, $params, null, $this->handle, $timeoutMs, true, $this->timeFormat), 'columns');
    }

    /**
     * execute runs a statement for its effect inside this transaction. Errors as query().
     *
     * @param array<mixed> $params
     */
    public function execute(string $sql, array $params = [], ?int $timeoutMs = null): ExecResult
    {
        return $this->call(Request::statement('exec', $sql, $params, null, $this->handle, $timeoutMs), 'exec');
    }

    /**
     * commit ends the transaction, making its changes visible. The transaction is over whatever happens: after
     * a ServerException it is rolled back; after an UnknownOutcomeException it may or may not have committed.
     *
     * @throws ServerException tetherd could not commit (e.g. tx_aborted, a deferred constraint)
     * @throws CommunicationException the transaction was lost with its connection (rolled back); nothing was sent
     * @throws UnknownOutcomeException the commit was sent but its reply never came
     * @throws LogicException the transaction was already committed or rolled back
     */
    public function commit(?int $timeoutMs = null): void
    {
        $this->finish(self::COMMITTED);
        if ($this->onCommit !== null) {
            // Before the call: a commit whose reply never came may have run, and causalToken() must cover it.
            ($this->onCommit)();
        }
        $this->connection->call(Request::commit($this->handle, $timeoutMs), 'ok', $this->timeout, $this->maxFrameBytes, $this->epoch);
    }

    /**
     * rollback ends the transaction, discarding its changes. A transaction that tetherd already rolled back
     * (tx_aborted), or that was lost with its connection, counts as rolled back: no exception then.
     *
     * @throws ServerException tetherd reported another error
     * @throws UnknownOutcomeException the rollback was sent but its reply never came (tetherd rolls back the
     *                                 transaction of the dropped socket anyway)
     * @throws LogicException the transaction was already committed or rolled back
     */
    public function rollback(?int $timeoutMs = null): void
    {
        $this->finish(self::ROLLED_BACK);
        if ($this->epoch !== $this->connection->epoch()) {
            return;
        }
        try {
            $this->connection->call(Request::rollback($this->handle, $timeoutMs), 'ok', $this->timeout, $this->maxFrameBytes, $this->epoch);
        } catch (ServerException $e) {
            if ($e->getErrorCode() !== ServerException::TX_ABORTED) {
                throw $e;
            }
        }
    }

    /** isOpen tells whether statements can still run: neither committed, rolled back, nor lost with its socket. */
    public function isOpen(): bool
    {
        return $this->state === self::OPEN && $this->connection->holds($this->handle, $this->epoch);
    }

    /** isFinished tells whether commit() or rollback() was called, whatever its outcome. */
    public function isFinished(): bool
    {
        return $this->state !== self::OPEN;
    }

    /** handle returns tetherd's handle of this transaction, valid on its socket only. */
    public function handle(): int
    {
        return $this->handle;
    }

    /** __destruct rolls back a transaction left open, without throwing. */
    public function __destruct()
    {
        // Not while a reply is being read: a destructor run by the garbage collector in the middle of it must not
        // interleave frames. The end-of-request hook rolls it back then. Other pending requests (a batch sent with
        // sendBatch) do not matter: the rollback's reply is matched by its id.
        if ($this->isOpen() && !$this->connection->isReading()) {
            try {
                $this->rollback();
            } catch (\Throwable) {
                // the socket was dropped, and tetherd rolls back the transactions of a closed socket
            }
        }
    }

    /**
     * call sends a statement of this transaction, in its epoch, through the one path of every call,
     * StreamConnection::call(), and returns the reply decoded as Reply::decode() does for $as. commit() and
     * rollback() take that path too, after finish().
     *
     * @param array<string, mixed> $request a map from Request
     * @throws LogicException the transaction was already committed or rolled back (nothing is sent)
     * @throws ServerException|CommunicationException|UnknownOutcomeException as query() (a malformed reply: "tetherd
     *                                                sent a malformed reply to <the request's op>")
     */
    private function call(array $request, string $as): mixed
    {
        if ($this->state !== self::OPEN) {
            throw new LogicException(\sprintf('transaction %d is already %s', $this->handle, $this->state));
        }

        return $this->connection->call($request, $as, $this->timeout, $this->maxFrameBytes, $this->epoch);
    }

    private function finish(string $state): void
    {
        if ($this->state !== self::OPEN) {
            throw new LogicException(\sprintf('transaction %d is already %s', $this->handle, $this->state));
        }
        $this->state = $state;
        $this->connection->untrack($this->handle);
    }
}
