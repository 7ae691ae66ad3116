<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Driver\Result as ResultInterface;
use Doctrine\DBAL\Driver\Statement as StatementInterface;
use Doctrine\DBAL\ParameterType;
use Doctrine\DBAL\SQL\Parser\Exception as ParserException;
use Tether\Client;
use Tether\DBAL\Exception\DriverError;
use Tether\DBAL\Exception\RefusedStatement;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;
use Tether\Sql\SqlText as SharedSqlText;
use Tether\Transaction;

/**
 * Connection is a DBAL driver connection to one Tether backend: a Tether\Client (its own socket to tetherd unless
 * the `persistent` parameter shares the worker's) and the transaction it has open, if any.
 *
 * Where statements run:
 * - outside a transaction, each statement goes to whichever pooled backend connection tetherd picks; the session
 *   settings this connection made (SET NAMES, SET time_zone, SET search_path, ...) are applied there by tetherd;
 * - while a transaction is open (beginTransaction() until commit() or rollBack()), every statement goes through
 *   it, on the one backend connection tetherd pinned for it; savepoints are SQL inside it.
 *
 * On a backend with replicas (tetherd's `replicas = [...]`), tetherd sends each read outside a transaction that may
 * run on a replica there, and everything else to the primary: this one connection stands for DBAL's
 * PrimaryReadReplicaConnection (see Primary for its switches). setPrimary() (or the `tether_primary` parameter)
 * sends this connection's reads to the primary too; transactions are always there.
 *
 * lastInsertId(): MySQL/MariaDB take it from the INSERT's own reply. PostgreSQL has no such reply, and LASTVAL()
 * is bound to the backend connection: inside a transaction it is asked there; outside one, each INSERT without
 * RETURNING runs in a short transaction of its own followed by SELECT LASTVAL() (the `tether_pg_lastval`
 * parameter turns that off).
 */
final class Connection implements Compat\ServerInfoConnection
{
    private ?Transaction $transaction = null;
    private int|string|null $lastInsertId = null;
    /**
     * @var \WeakMap<Client, \WeakReference<self>>|null the connection of each client, for ResultCache::with(). A
     *      weak reference: a value holding the connection, which holds its client, would keep both alive forever.
     */
    private static ?\WeakMap $byClient = null;

    /** @internal made by Driver::connect() */
    public function __construct(
        private readonly Client $client,
        private readonly ?string $backend,
        private readonly Dialect $dialect,
        private readonly \Closure $serverVersion,
        private readonly bool $pgLastval,
        private int $cacheTtlMs = 0,
        private bool $primary = false,
    ) {
        self::$byClient ??= new \WeakMap();
        self::$byClient[$client] = \WeakReference::create($this);
    }

    /**
     * __destruct is the connection's close: DBAL's Connection::close() drops its driver connection, and so does
     * every other owner going away. The open transaction is rolled back at once and the client's socket released
     * (Client::close(): a socket of its own closed, the worker's shared persistent one kept), so that its locks
     * and its backend connection are free when close() returns, as with PDO.
     */
    public function __destruct()
    {
        $this->close();
    }

    /**
     * close rolls back the open transaction, if any, and releases the client's socket (see __destruct()); the
     * connection reconnects if used again. Never throws.
     */
    public function close(): void
    {
        $this->transaction = null;
        $this->client->close();
    }

    /** @internal the connection that uses $client, for ResultCache::with() */
    public static function forClient(Client $client): ?self
    {
        return (self::$byClient[$client] ?? null)?->get();
    }

    /**
     * setPrimary sends this connection's reads outside a transaction to the primary of a backend with replicas
     * (`primary: true` on each), or, with false, lets tetherd send them to replicas again; ignored on a backend of
     * one server. It returns the previous value. Primary::ensure(), ::release() and ::with() call it on a DBAL
     * connection.
     */
    public function setPrimary(bool $primary): bool
    {
        [$previous, $this->primary] = [$this->primary, $primary];

        return $previous;
    }

    /** isPrimary tells whether this connection's reads are sent to the primary (setPrimary()). */
    public function isPrimary(): bool
    {
        return $this->primary;
    }

    /**
     * setCacheTtl sets how long (milliseconds) tetherd may answer this connection's queries outside a transaction
     * from its shared result cache; 0 turns it off. It returns the previous value.
     */
    public function setCacheTtl(int $ttlMs): int
    {
        if ($ttlMs < 0) {
            throw new \InvalidArgumentException(\sprintf('Tether DBAL: cache TTL: want 0 or more milliseconds, got %d', $ttlMs));
        }
        [$previous, $this->cacheTtlMs] = [$this->cacheTtlMs, $ttlMs];

        return $previous;
    }

    public function prepare(string $sql): StatementInterface
    {
        try {
            [$rewritten, $order] = PlaceholderRewriter::rewrite($sql, $this->dialect);
        } catch (ParserException $e) {
            throw new DriverError(\sprintf('cannot read the placeholders of %s: %s', DriverError::excerpt($sql), $e->getMessage()), null, 0, $e);
        }

        return new Statement($this, $sql, $rewritten, $order);
    }

    public function query(string $sql): ResultInterface
    {
        return $this->run($sql, [], $sql);
    }

    public function exec(string $sql): int
    {
        return $this->run($sql, [], $sql)->rowCount();
    }

    /**
     * quote returns $value as a string literal for this session, as PDO::quote() does (Tether\Sql\SqlText::quote()):
     * on MySQL/MariaDB escaped for the session's actual sql_mode (NO_BACKSLASH_ESCAPES or not), as the PHP client
     * keeps it for the socket (Tether\Client::noBackslashEscapes(): read the first time, and again after any
     * statement on the socket that sets sql_mode, or a reconnect); PostgreSQL's literal reads the same whatever
     * standard_conforming_strings says. Prefer bound parameters.
     *
     * @param mixed $value
     * @param mixed $type ignored, as by DBAL's drivers
     * @throws DriverError the sql_mode could not be read
     */
    public function quote($value, $type = ParameterType::STRING): string
    {
        if ($this->dialect === Dialect::PostgreSQL) {
            try {
                return SharedSqlText::quote((string) $value, SharedSqlText::PGSQL);
            } catch (TetherException $e) {
                throw new DriverError($e->getMessage(), '22021', 0, $e);
            }
        }

        return SharedSqlText::quote((string) $value, SharedSqlText::MYSQL, $this->noBackslashEscapes());
    }

    /** noBackslashEscapes tells whether the session's sql_mode has NO_BACKSLASH_ESCAPES (the client's cache). */
    private function noBackslashEscapes(): bool
    {
        try {
            return $this->client->noBackslashEscapes($this->backend, $this->transaction);
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $this->dialect, 'SELECT @@SESSION.sql_mode');
        }
    }

    /**
     * lastInsertId returns the id generated by this connection's last INSERT. MySQL/MariaDB: LAST_INSERT_ID() as
     * of that INSERT (0 when it generated none; $name is ignored). PostgreSQL: inside a transaction,
     * CURRVAL($name) or else LASTVAL() on the transaction's backend connection, which is also what it returns
     * after the commit (an INSERT in a transaction whose id was not asked before commit leaves no id); outside
     * one, the LASTVAL() taken right after the last INSERT run outside a transaction (whatever $name).
     *
     * @param string|null $name PostgreSQL: the sequence
     * @throws DriverError PostgreSQL: no id known (SQLSTATE 55000, as PostgreSQL's own "lastval is not yet defined")
     */
    public function lastInsertId($name = null): int|string
    {
        if ($this->dialect === Dialect::MySQL) {
            return $this->lastInsertId ?? 0;
        }
        if ($this->transaction !== null) {
            $sql = $name === null ? 'SELECT LASTVAL()' : 'SELECT CURRVAL($1)';
            try {
                $row = $this->transaction->queryOne($sql, $name === null ? [] : [$name]);
            } catch (TetherException $e) {
                throw DriverError::fromTether($e, $this->dialect, $sql);
            }

            if ($row === null) {
                throw new DriverError('no id: ' . $sql . ' returned no row', '55000');
            }

            return $this->lastInsertId = \reset($row);
        }

        return $this->lastInsertId ?? throw new DriverError(
            $this->pgLastval
                ? 'no id known: the last INSERT ran in a transaction whose id was not asked before commit (call lastInsertId() inside the transaction), or its table has no sequence, or no INSERT ran on this connection'
                : 'no id known: outside a transaction lastInsertId() needs tether_pg_lastval (off on this connection); use INSERT ... RETURNING, or ask inside a transaction',
            '55000',
        );
    }

    /**
     * beginTransaction opens a Tether transaction: every statement runs through it until commit() or rollBack().
     *
     * @throws DriverError one is already open (DBAL nests with savepoints instead), or tetherd could not begin
     */
    public function beginTransaction(): void
    {
        if ($this->transaction !== null) {
            throw new DriverError('a transaction is already open on this connection');
        }
        try {
            $this->transaction = $this->client->begin($this->backend);
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $this->dialect, null);
        }
    }

    /** commit commits the open transaction; it is over whatever happens. */
    public function commit(): void
    {
        $tx = $this->takeTransaction('commit');
        try {
            $tx->commit();
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $this->dialect, null);
        }
    }

    /** rollBack rolls the open transaction back; one that tetherd already rolled back or lost counts as done. */
    public function rollBack(): void
    {
        $tx = $this->takeTransaction('roll back');
        try {
            $tx->rollback();
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $this->dialect, null);
        }
    }

    /** getServerVersion returns the version of the backend's server, as DBAL's native drivers report it. */
    public function getServerVersion(): string
    {
        return ($this->serverVersion)();
    }

    /** getNativeConnection returns the Tether\Client this connection uses. */
    public function getNativeConnection(): Client
    {
        return $this->client;
    }

    /** inTransaction tells whether a Tether transaction is open. */
    public function inTransaction(): bool
    {
        return $this->transaction !== null;
    }

    /**
     * run sends $sql (placeholders already in the dialect's form) with $params, through the open transaction if
     * any, and returns its result.
     *
     * @internal for Statement
     * @param list<mixed> $params
     * @throws DriverError the statement failed or was refused
     */
    public function run(string $sql, array $params, string $originalSql): Result
    {
        $returnsRows = SqlText::returnsRows($sql);
        try {
            if ($this->transaction !== null) {
                $control = SharedSqlText::transactionControl($sql, $this->dialect === Dialect::MySQL ? SharedSqlText::MYSQL : SharedSqlText::PGSQL);
                if ($control !== null) {
                    throw RefusedStatement::insideTransaction($originalSql, $control);
                }
                if ($returnsRows) {
                    return Result::fromColumns($this->transaction->queryColumns($sql, $params));
                }

                $result = $this->transaction->execute($sql, $params);
                if ($this->dialect === Dialect::PostgreSQL && SqlText::isInsert($sql)) {
                    $this->lastInsertId = null; // asked of the transaction by lastInsertId(), which keeps it
                }
            } elseif ($returnsRows) {
                return Result::fromColumns($this->client->queryColumns($sql, $params, $this->backend, null, $this->cacheTtlMs > 0 ? $this->cacheTtlMs : null, $this->primary));
            } elseif ($this->dialect === Dialect::PostgreSQL && $this->pgLastval && SqlText::isInsert($sql)) {
                return $this->insertWithLastval($sql, $params);
            } else {
                $result = $this->client->execute($sql, $params, $this->backend);
            }
            if ($this->dialect === Dialect::MySQL && $result->lastInsertId !== 0) {
                $this->lastInsertId = $result->lastInsertId;
            }

            return Result::fromAffectedRows($result->affectedRows);
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $this->dialect, $originalSql);
        }
    }

    /**
     * insertWithLastval runs a PostgreSQL INSERT outside a transaction in a short transaction of its own,
     * followed by SELECT LASTVAL() on the same backend connection, and keeps that id for lastInsertId(). When the
     * INSERT called no sequence (LASTVAL() fails with 55000 and aborts that transaction), the INSERT is run again
     * alone: the failed transaction rolled it back.
     *
     * @param list<mixed> $params
     * @throws TetherException
     */
    private function insertWithLastval(string $sql, array $params): Result
    {
        $tx = $this->client->begin($this->backend);
        try {
            $affected = $tx->execute($sql, $params)->affectedRows;
            try {
                $row = $tx->queryOne('SELECT LASTVAL() AS id');
            } catch (ServerException $e) {
                if ($e->getBackendCode() !== '55000') {
                    throw $e;
                }
                $tx->rollback();
                $this->lastInsertId = null;

                return Result::fromAffectedRows($this->client->execute($sql, $params, $this->backend)->affectedRows);
            }
            $tx->commit();
            $this->lastInsertId = $row === null ? null : \reset($row);

            return Result::fromAffectedRows($affected);
        } finally {
            if (!$tx->isFinished()) {
                try {
                    $tx->rollback();
                } catch (\Throwable) {
                    // the error being thrown says more; tetherd rolls back a transaction whose socket went away
                }
            }
        }
    }

    private function takeTransaction(string $what): Transaction
    {
        $tx = $this->transaction ?? throw new DriverError(\sprintf('cannot %s: no transaction is open on this connection', $what));
        $this->transaction = null;

        return $tx;
    }
}
