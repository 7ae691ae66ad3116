<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Tether\Client;
use Tether\ExecResult;
use Tether\Exception\TetherException;
use Tether\Laravel\Sql\SqlText;
use Tether\NumericResult;
use Tether\Sql\SqlText as SharedSqlText;
use Tether\Transaction;

/**
 * TetherSession plays, for one Laravel connection, the part PDO plays for the native drivers: it is what
 * Connection::getPdo() returns (Laravel calls beginTransaction(), commit(), rollBack(), exec() for savepoints,
 * lastInsertId() and getAttribute() on it), and it runs the connection's statements through a Tether\Client.
 *
 * 1. The connector makes it and runs the session settings Laravel's own connector would (SET NAMES, time zone,
 *    sql_mode / search_path, ...): tetherd remembers them for this client socket and applies them to whichever
 *    pooled connection runs each later statement.
 * 2. Outside a transaction every statement is one tetherd call, possibly on a different backend connection each
 *    time; beginTransaction() opens a Tether\Transaction pinned to one backend connection, and every statement,
 *    savepoint, commit and rollback goes there until it ends.
 * 3. Failures come out as TetherQueryError (a PDOException shaped like PDO's own), statements it will not send as
 *    UnsupportedStatementException.
 *
 * 4. disconnect() / purge() drop the session, and so close it (close(), also run by the destructor): the open
 *    transaction is rolled back at once, its locks free, and the client's socket released (Client::close(): a
 *    socket of its own closed, the worker's shared persistent one kept for the other connections).
 *
 * It is not a PDO: any other PDO method throws a LogicException that names it. Not safe to share between
 * processes.
 */
final class TetherSession
{
    private ?Transaction $transaction = null;
    private string $lastInsertId = '0';
    private ?string $serverVersion = null;
    /** milliseconds a query outside a transaction may be answered from tetherd's result cache; 0: never */
    private int $cacheTtlMs = 0;

    /**
     * @param Client $client the session's client; made by TetherConnector with time_format 'sql' (unless the
     *                       config's sql_datetimes is false), so that DATETIME/TIMESTAMP values come as PDO gives them
     * @param string|null $platform SqlText::MYSQL or SqlText::PGSQL; null to ask the server on first need
     */
    public function __construct(
        private readonly Client $client,
        private readonly ?string $backend,
        private ?string $platform,
    ) {
        if ($platform !== null && $platform !== SqlText::MYSQL && $platform !== SqlText::PGSQL) {
            throw new \InvalidArgumentException(\sprintf("tether driver: option platform: want 'mysql' or 'pgsql', got %s", \var_export($platform, true)));
        }
    }

    /**
     * setCacheTtl sets how long (milliseconds) tetherd may answer this session's queries outside a transaction
     * from its shared result cache (tetherd caches only what it deems a deterministic SELECT, and drops a backend's
     * cached results on every write through it); 0 turns it off. It returns the previous value.
     */
    public function setCacheTtl(int $ttlMs): int
    {
        if ($ttlMs < 0) {
            throw new \InvalidArgumentException(\sprintf('tether driver: cache TTL: want 0 or more milliseconds, got %d', $ttlMs));
        }
        [$previous, $this->cacheTtlMs] = [$this->cacheTtlMs, $ttlMs];

        return $previous;
    }

    /** __destruct closes the session (see close()): Laravel's disconnect() and purge() drop it. */
    public function __destruct()
    {
        $this->close();
    }

    /**
     * close ends the session at once, as closing a PDO connection does: the open transaction is rolled back (its
     * locks are free when close() returns) and the client's socket released (Client::close()). Never throws; the
     * session reconnects if used again.
     */
    public function close(): void
    {
        $this->transaction = null;
        $this->client->close();
    }

    /** client returns the Tether client this session runs on. */
    public function client(): Client
    {
        return $this->client;
    }

    /** backend returns the tetherd backend name, null for tetherd's default_backend. */
    public function backend(): ?string
    {
        return $this->backend;
    }

    /**
     * platform returns 'mysql' (MySQL, MariaDB) or 'pgsql', asking the server (SELECT version()) the first time
     * when it was not configured.
     *
     * @throws TetherQueryError
     */
    public function platform(): string
    {
        if ($this->platform === null) {
            $this->platform = \str_contains($this->serverVersion(), 'PostgreSQL') ? SqlText::PGSQL : SqlText::MYSQL;
        }

        return $this->platform;
    }

    /**
     * serverVersion returns the server's version() string ("10.11.6-MariaDB-...", "PostgreSQL 15.5 on ..."), read
     * once per session.
     *
     * @throws TetherQueryError
     */
    public function serverVersion(): string
    {
        if ($this->serverVersion === null) {
            try {
                $row = $this->client->queryOne('SELECT version() AS version', [], $this->backend);
            } catch (TetherException $e) {
                throw TetherQueryError::from($e, $this->platform ?? SqlText::MYSQL);
            }
            $this->serverVersion = (string) ($row['version'] ?? '');
        }

        return $this->serverVersion;
    }

    /**
     * query runs a statement that returns rows; $bindings are Laravel's prepared bindings (`?` placeholders, or
     * `:name` ones with a name => value array).
     *
     * @param array<int|string, mixed> $bindings
     * @param bool $primary outside a transaction, run on the primary of a backend with replicas (Laravel's write
     *                      connection: a select with $useReadPdo false, useWritePdo(), sticky after a write); inside
     *                      one, every statement runs on the primary anyway
     * @return list<array<string, mixed>> the rows, column => value
     * @throws TetherQueryError|UnsupportedStatementException
     */
    public function query(string $sql, array $bindings = [], bool $primary = false): array
    {
        $this->refuseSessionControl($sql);
        [$sql, $params] = SqlText::bind($sql, $bindings, $this->platform());
        $params = $this->bindableValues($params);
        try {
            $rows = $this->transaction !== null
                ? $this->transaction->query($sql, $params)
                : $this->client->query($sql, $params, $this->backend, null, $this->cacheTtlMs > 0 ? $this->cacheTtlMs : null, $primary);
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }

        return $rows;
    }

    /**
     * queryNumeric runs a statement that returns rows, as query() does, and returns them with every column kept
     * by position (names may repeat: SELECT a.id, b.id), for TetherStatement::shape().
     *
     * @param array<int|string, mixed> $bindings
     * @param bool $primary as for query()
     * @throws TetherQueryError|UnsupportedStatementException
     */
    public function queryNumeric(string $sql, array $bindings = [], bool $primary = false): NumericResult
    {
        $this->refuseSessionControl($sql);
        [$sql, $params] = SqlText::bind($sql, $bindings, $this->platform());
        $params = $this->bindableValues($params);
        try {
            return $this->transaction !== null
                ? $this->transaction->queryNumeric($sql, $params)
                : $this->client->queryNumeric($sql, $params, $this->backend, null, $this->cacheTtlMs > 0 ? $this->cacheTtlMs : null, $primary);
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }
    }

    /**
     * execute runs a statement for its effect and returns the affected row count; an INSERT's generated id is
     * kept for lastInsertId() (MySQL; PostgreSQL has none: Laravel uses INSERT ... RETURNING there).
     *
     * @param array<int|string, mixed> $bindings
     * @throws TetherQueryError|UnsupportedStatementException
     */
    public function execute(string $sql, array $bindings = []): int
    {
        $this->refuseSessionControl($sql);
        [$sql, $params] = SqlText::bind($sql, $bindings, $this->platform());

        return $this->run($sql, $this->bindableValues($params))->affectedRows;
    }

    /**
     * unprepared runs one statement without parameters, as DB::unprepared() does; compound statements (a trigger
     * or procedure body, MariaDB's BEGIN NOT ATOMIC ... END, a PostgreSQL function in $$ quotes) are one statement.
     * Several statements in one string are refused by the server (tetherd prepares every statement, and a prepared
     * statement is one statement): nothing of it runs, and the refusal is an UnsupportedStatementException that
     * names the count, its previous the server's syntax error.
     *
     * @throws TetherQueryError|UnsupportedStatementException
     */
    public function unprepared(string $sql): int
    {
        $this->refuseSessionControl($sql);
        try {
            return $this->run($sql, [])->affectedRows;
        } catch (TetherQueryError $e) {
            $count = \in_array($e->getCode(), ['42000', '42601'], true) ? SqlText::statementCount($sql, $this->platform()) : 1;
            if ($count > 1) {
                throw new UnsupportedStatementException(\sprintf('DB::unprepared() got %d statements in one string and the server refused them, so none ran: tetherd prepares every statement, and a prepared statement holds one; run them one by one', $count), 0, $e);
            }
            throw $e;
        }
    }

    /**
     * exec runs a statement as PDO::exec() does; Laravel uses it for SAVEPOINT and ROLLBACK TO SAVEPOINT.
     *
     * @throws TetherQueryError
     */
    public function exec(string $sql): int
    {
        return $this->run($sql, [])->affectedRows;
    }

    /**
     * beginTransaction opens a transaction pinned by tetherd to one backend connection.
     *
     * @throws TetherQueryError already in a transaction, or tetherd could not begin one
     */
    public function beginTransaction(): bool
    {
        if ($this->transaction !== null) {
            throw new \PDOException('There is already an active transaction');
        }
        try {
            $this->transaction = $this->client->begin($this->backend);
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }

        return true;
    }

    /**
     * commit commits the open transaction; it is over whatever happens.
     *
     * @throws \PDOException no transaction is open
     * @throws TetherQueryError the commit failed (the transaction is rolled back) or its outcome is unknown
     */
    public function commit(): bool
    {
        $transaction = $this->takeTransaction();
        try {
            $transaction->commit();
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }

        return true;
    }

    /**
     * rollBack rolls back the open transaction; one tetherd already rolled back counts as rolled back.
     *
     * @throws \PDOException no transaction is open
     * @throws TetherQueryError
     */
    public function rollBack(): bool
    {
        $transaction = $this->takeTransaction();
        try {
            $transaction->rollback();
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }

        return true;
    }

    /** inTransaction tells whether a transaction is open (begun and not yet committed or rolled back). */
    public function inTransaction(): bool
    {
        return $this->transaction !== null;
    }

    /**
     * lastInsertId returns the id generated by the last statement this session ran for its effect, as a string
     * like PDO's ("0" when it generated none; always "0" on PostgreSQL).
     */
    public function lastInsertId(?string $name = null): string
    {
        return $this->lastInsertId;
    }

    /**
     * getAttribute answers the PDO attributes Laravel reads: PDO::ATTR_SERVER_VERSION and PDO::ATTR_DRIVER_NAME.
     *
     * @throws \LogicException any other attribute
     */
    public function getAttribute(int $attribute): mixed
    {
        return match ($attribute) {
            \PDO::ATTR_SERVER_VERSION => $this->serverVersion(),
            \PDO::ATTR_DRIVER_NAME => $this->platform(),
            default => throw new \LogicException(\sprintf('tether driver: PDO attribute %d is not available (the connection has no PDO)', $attribute)),
        };
    }

    /**
     * quote returns $value as an SQL string literal for this session, as PDO::quote() does (Laravel's
     * Connection::escape() uses it), by Tether\Sql\SqlText::quote(): on MySQL/MariaDB escaped for the session's
     * actual sql_mode (NO_BACKSLASH_ESCAPES or not), as the PHP client keeps it for the socket
     * (Tether\Client::noBackslashEscapes(): read the first time, and again after any statement on the socket that
     * sets sql_mode, whichever Client or path sent it, or a reconnect); PostgreSQL's literal reads the same whatever standard_conforming_strings says. Prefer
     * bindings.
     *
     * @throws \InvalidArgumentException a NUL byte in a PostgreSQL value
     * @throws TetherQueryError the sql_mode could not be read
     */
    public function quote(string $value, int $type = \PDO::PARAM_STR): string
    {
        if ($this->platform() === SqlText::PGSQL) {
            if (\str_contains($value, "\0")) {
                throw new \InvalidArgumentException('tether driver: a PostgreSQL string literal cannot hold a NUL byte');
            }

            return SharedSqlText::quote($value, SharedSqlText::PGSQL);
        }

        return SharedSqlText::quote($value, SharedSqlText::MYSQL, $this->noBackslashEscapes());
    }

    /**
     * noBackslashEscapes tells whether the session's sql_mode has NO_BACKSLASH_ESCAPES (the client's cache).
     *
     * @throws TetherQueryError
     */
    private function noBackslashEscapes(): bool
    {
        try {
            return $this->client->noBackslashEscapes($this->backend, $this->transaction);
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, SqlText::MYSQL);
        }
    }

    /**
     * __call refuses the PDO methods a TetherSession does not have, naming them.
     *
     * @param array<mixed> $arguments
     */
    public function __call(string $method, array $arguments): never
    {
        throw new \LogicException(\sprintf('tether driver: %s() is a PDO method and the tether connection has no PDO; run SQL through the connection (select, statement, ...)', $method));
    }

    /**
     * @param list<mixed> $params
     */
    private function run(string $sql, array $params): ExecResult
    {
        try {
            $result = $this->transaction !== null
                ? $this->transaction->execute($sql, $params)
                : $this->client->execute($sql, $params, $this->backend);
        } catch (TetherException $e) {
            throw TetherQueryError::from($e, $this->platform());
        }
        $this->lastInsertId = (string) $result->lastInsertId;

        return $result;
    }

    private function takeTransaction(): Transaction
    {
        $transaction = $this->transaction ?? throw new \PDOException('There is no active transaction');
        $this->transaction = null;

        return $transaction;
    }

    /**
     * refuseSessionControl refuses, before sending it, raw SQL that would manage the transaction or lock tables
     * behind Laravel's back: tetherd pins a transaction to one backend connection only through begin/commit.
     */
    private function refuseSessionControl(string $sql): void
    {
        $control = SharedSqlText::transactionControl($sql, $this->platform() === SqlText::PGSQL ? SharedSqlText::PGSQL : SharedSqlText::MYSQL);
        if ($control === 'LOCK TABLES') {
            throw new UnsupportedStatementException('LOCK TABLES cannot run through the tether driver: outside a transaction tetherd refuses it (the lock would outlive the statement on a pooled connection), and inside one MySQL commits the transaction implicitly; lock rows with lockForUpdate() or sharedLock() inside DB::transaction() instead');
        }
        if ($control !== null) {
            throw new UnsupportedStatementException(\sprintf('%s cannot run as raw SQL through the tether driver: tetherd pins a transaction to one backend connection only through its own begin and commit; use DB::beginTransaction(), DB::commit(), DB::rollBack() or DB::transaction()', $control));
        }
    }

    /**
     * bindableValues turns the bindings PDO would take into the values tetherd binds: null, bool, int, float,
     * string; a backed enum becomes its value, a Stringable its string, a stream its contents.
     *
     * @param list<mixed> $params
     * @return list<mixed>
     */
    private function bindableValues(array $params): array
    {
        foreach ($params as $i => $value) {
            if ($value === null || \is_scalar($value)) {
                continue;
            }
            if ($value instanceof \BackedEnum) {
                $params[$i] = $value->value;
            } elseif ($value instanceof \Stringable) {
                $params[$i] = (string) $value;
            } elseif (\is_resource($value)) {
                $params[$i] = (string) \stream_get_contents($value);
            } else {
                throw new UnsupportedStatementException(\sprintf('binding %d is a %s, which neither PDO nor tetherd can bind', $i + 1, \get_debug_type($value)));
            }
        }

        return $params;
    }
}
