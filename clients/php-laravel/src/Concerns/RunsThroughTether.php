<?php

declare(strict_types=1);

namespace Tether\Laravel\Concerns;

use Illuminate\Database\Events\StatementPrepared;
use Tether\Laravel\Sql\SqlText;
use Tether\Laravel\TetherStatement;
use Tether\Laravel\TetherSession;

/**
 * RunsThroughTether replaces, in a Laravel connection, the methods that prepare PDO statements with ones that run
 * the statement through the connection's TetherSession, and keeps everything around them Laravel's own: run()
 * (beforeExecuting callbacks, the query log, QueryExecuted events with the time in ms, QueryException with the SQL
 * and bindings, the retry after a lost connection), prepareBindings() (DateTime, bool), pretend(), the read/write
 * split, and ManagesTransactions (which calls beginTransaction/commit/rollBack/exec on the session).
 *
 * Rows come back as objects (PDO::FETCH_OBJ, Laravel's default); a select fires StatementPrepared with a
 * TetherStatement whose setFetchMode() chooses another shape, as Laravel 8 applications do with PDOStatement.
 * cursor() yields the rows of a result read whole (tetherd sends a result in one reply).
 */
trait RunsThroughTether
{
    /**
     * select runs a query and returns its rows in the connection's fetch mode.
     *
     * @param string $query
     * @param array<int|string, mixed> $bindings
     * @param bool $useReadPdo
     * @return array<mixed>
     */
    public function select($query, $bindings = [], $useReadPdo = true)
    {
        return $this->run($query, $bindings, function ($query, $bindings) use ($useReadPdo) {
            if ($this->pretending()) {
                return [];
            }

            $statement = new TetherStatement($query, $this->fetchMode);
            $this->event(new StatementPrepared($this, $statement));

            $session = $this->tetherSession($useReadPdo);
            $bindings = $this->prepareBindings($bindings);
            $primary = $this->readsFromPrimary($useReadPdo);

            return $statement->shape($statement->wantsPositions() ? $session->queryNumeric($query, $bindings, $primary) : $session->query($query, $bindings, $primary));
        });
    }

    /**
     * cursor runs a query and yields its rows one by one (the result is received whole first).
     *
     * @param string $query
     * @param array<int|string, mixed> $bindings
     * @param bool $useReadPdo
     * @return \Generator<int, mixed>
     */
    public function cursor($query, $bindings = [], $useReadPdo = true)
    {
        $rows = $this->select($query, $bindings, $useReadPdo);
        foreach ($rows as $row) {
            yield $row;
        }
    }

    /**
     * statement runs a statement and returns true (failures throw QueryException).
     *
     * @param string $query
     * @param array<int|string, mixed> $bindings
     * @return bool
     */
    public function statement($query, $bindings = [])
    {
        return $this->run($query, $bindings, function ($query, $bindings) {
            if ($this->pretending()) {
                return true;
            }
            $this->tetherSession()->execute($query, $this->prepareBindings($bindings));
            $this->recordsHaveBeenModified();

            return true;
        });
    }

    /**
     * affectingStatement runs a statement and returns the number of rows it affected.
     *
     * @param string $query
     * @param array<int|string, mixed> $bindings
     * @return int
     */
    public function affectingStatement($query, $bindings = [])
    {
        return $this->run($query, $bindings, function ($query, $bindings) {
            if ($this->pretending()) {
                return 0;
            }
            $count = $this->tetherSession()->execute($query, $this->prepareBindings($bindings));
            $this->recordsHaveBeenModified($count > 0);

            return $count;
        });
    }

    /**
     * unprepared runs one statement without bindings; several statements in one string are refused with an
     * UnsupportedStatementException (wrapped in a QueryException).
     *
     * @param string $query
     * @return bool
     */
    public function unprepared($query)
    {
        return $this->run($query, [], function ($query) {
            if ($this->pretending()) {
                return true;
            }
            $this->tetherSession()->unprepared($query);
            $this->recordsHaveBeenModified();

            return true;
        });
    }

    /**
     * withCache runs $callback with this connection's queries outside a transaction answered, where tetherd may,
     * from its shared result cache for up to $ttlMs milliseconds (every write through tetherd to the backend drops
     * the cached results first), and returns what $callback returns:
     *
     *     $posts = DB::connection()->withCache(5000, fn () => Post::with('author')->latest()->limit(20)->get());
     *
     * @template T
     * @param callable(): T $callback
     * @return T
     */
    public function withCache(int $ttlMs, callable $callback): mixed
    {
        $sessions = [$this->tetherSession(false)];
        if (($read = $this->tetherSession(true)) !== $sessions[0]) {
            $sessions[] = $read;
        }
        $previous = \array_map(static fn (TetherSession $s) => $s->setCacheTtl($ttlMs), $sessions);
        try {
            return $callback();
        } finally {
            foreach ($sessions as $i => $session) {
                $session->setCacheTtl($previous[$i]);
            }
        }
    }

    /**
     * tetherSession returns the session statements run on: the write one, or with $forRead the read one where
     * Laravel would read (no read config, a transaction, or sticky writes: the write one). Connects on first use.
     */
    public function tetherSession(bool $forRead = false): TetherSession
    {
        $session = $forRead ? $this->getReadPdo() : $this->getPdo();
        if (!$session instanceof TetherSession) {
            throw new \LogicException(\sprintf('tether driver: connection %s holds a %s where a TetherSession belongs; was a PDO set on it with setPdo()?', (string) $this->getName(), \get_debug_type($session)));
        }

        return $session;
    }

    /**
     * readsFromPrimary tells whether a select goes to the write side, as Laravel's getReadPdo() decides it: asked for
     * ($useReadPdo false: select(..., false), the query builder's useWritePdo(), useWriteConnectionWhenReading()),
     * or `sticky` after this request wrote through the connection (recordsHaveBeenModified()). tetherd then runs it
     * with `primary: true`: on a backend with replicas, on the primary, even where a replica could serve it (a
     * transaction's statements run there anyway). Without a `read` config, too: one tetherd backend with replicas
     * is both of Laravel's sides.
     */
    protected function readsFromPrimary(bool $useReadPdo): bool
    {
        return !$useReadPdo || $this->readOnWriteConnection || ($this->recordsModified && $this->getConfig('sticky'));
    }

    /**
     * tetherCausalToken returns the write session's Client::causalToken(): a token covering this connection's writes
     * (and the causal_token it started from), for the user's next request; '' when there is none. The CausalTokens
     * middleware keeps it in the Laravel session for connections with `causal` => true.
     */
    public function tetherCausalToken(): string
    {
        $session = $this->pdo;
        if ($session === null || $session instanceof \Closure) {
            // Never connected in this request: it wrote nothing, and its token is the one it would have started from.
            return \Tether\Laravel\CausalTokens::pending((string) $this->getName()) ?? '';
        }
        if (!$session instanceof TetherSession) {
            return '';
        }
        try {
            return $session->client()->causalToken();
        } catch (\Tether\Exception\TetherException $e) {
            throw \Tether\Laravel\TetherQueryError::from($e, $this->tetherPlatform());
        }
    }

    /**
     * getDriverName returns the SQL platform, 'mysql' or 'pgsql', so that code which branches on the driver
     * treats the connection as the native one it stands for. getConfig('driver') still says 'tether'.
     *
     * @return string
     */
    public function getDriverName()
    {
        return $this->tetherPlatform();
    }

    /**
     * getDatabaseName returns the configured database, or, when the config leaves it empty, the backend's
     * current database as the server reports it (read once).
     *
     * @return string
     */
    public function getDatabaseName()
    {
        if ($this->database === null || $this->database === '') {
            $sql = $this->tetherPlatform() === SqlText::PGSQL ? 'SELECT current_database() AS name' : 'SELECT DATABASE() AS name';
            $row = $this->tetherSession()->query($sql)[0] ?? [];
            $this->database = (string) ($row['name'] ?? '');
        }

        return $this->database;
    }

    /**
     * getDoctrineConnection is refused: Doctrine DBAL needs a real PDO (Laravel 8 uses it for renameColumn and
     * change() in migrations).
     *
     * @return never
     */
    public function getDoctrineConnection()
    {
        throw new \LogicException('tether driver: Doctrine DBAL needs a PDO and the tether connection has none, so column renames and ->change() in Laravel 8 migrations are not available; write them as raw ALTER TABLE statements');
    }

    /** tetherPlatform returns the SQL platform this connection class speaks. */
    abstract protected function tetherPlatform(): string;
}
