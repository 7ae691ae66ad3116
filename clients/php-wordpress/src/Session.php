<?php

declare(strict_types=1);

namespace Tether\WordPress;

use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;
use Tether\Sql\SqlText;
use Tether\Transaction;
use Tether\WordPress\Sql\Statement;

/**
 * Session gives WordPress the one MySQL session it expects on top of Tether's pool, where two statements outside
 * a transaction may run on different backend connections. It runs one statement at a time and keeps, per
 * $wpdb, the connection-bound state WordPress and plugins rely on:
 *
 *  1. START TRANSACTION / BEGIN / SET autocommit=0 open a Tether transaction; until COMMIT / ROLLBACK /
 *     SET autocommit=1 every statement runs in it, on one backend connection. A second START TRANSACTION commits
 *     the first, as MySQL does.
 *  2. FOUND_ROWS(): a SELECT with SQL_CALC_FOUND_ROWS outside a transaction runs in a transaction of its own
 *     together with `SELECT FOUND_ROWS()`; the value is kept, and a later `SELECT FOUND_ROWS()` is answered from
 *     it (after a plain SELECT, from its row count, as MySQL does) without reaching the server; any other
 *     statement using FOUND_ROWS() gets that value written in its place.
 *  3. LAST_INSERT_ID(): the insert id of the last INSERT/REPLACE that generated one is kept; `SELECT
 *     LAST_INSERT_ID()` is answered from it, and any other statement naming LAST_INSERT_ID runs in a transaction
 *     that first restores it (`SELECT LAST_INSERT_ID(?)`) and reads it back after.
 *  4. User variables (`SET @v = ...`, `@v := ...`, `... @v ...`): a statement naming any runs in a transaction that
 *     first sets the values kept for them and reads them back after.
 *  5. What cannot hold across statements on a pool is refused with an error naming it, never run half way:
 *     LOCK TABLES (always: it would also end the transaction), and outside a transaction GET_LOCK(),
 *     CREATE TEMPORARY TABLE, USE, PREPARE/EXECUTE/DEALLOCATE, HANDLER, XA; and any string holding more than one
 *     statement (mysqli_query() runs one).
 *  6. A full pool is waited for: while tetherd answers `busy` (not sent, safe to repeat) the statement is asked
 *     again, for at most $busyWait seconds, as a mysqli query would wait for the server.
 *
 * With a cache TTL, a query outside a transaction asks tetherd for its shared result cache (tetherd caches only what
 * it deems a deterministic SELECT, and drops a backend's cached results on every write through it).
 *
 * Session settings (SET NAMES, SET SESSION sql_mode, time_zone, ...) need nothing here: tetherd pools them per
 * client connection and applies them to whichever backend connection runs the next statement.
 */
final class Session
{
    private const FOUND_ROWS_CALL = '/\bFOUND_ROWS\s*\(\s*\)/i';

    private ?Transaction $tx = null;
    private ?int $foundRows = null;
    private int $lastInsertId = 0;
    /** @var array<string, int|float|string|null> user variables by lower-cased name */
    private array $userVariables = [];
    /** the session's sql_mode had NO_BACKSLASH_ESCAPES when last read: used when it cannot be read */
    private bool $noBackslashEscapes = false;

    /**
     * @param float $busyWait seconds a statement keeps asking for a pooled connection when tetherd answers `busy`
     *                        (all max_conns in flight for its acquire_timeout); 0 gives up at the first `busy`
     * @param int $cacheTtlMs milliseconds tetherd may answer a query outside a transaction from its result cache; 0: never
     */
    public function __construct(private readonly Client $client, private readonly float $busyWait = 30.0, private readonly int $cacheTtlMs = 0)
    {
    }

    /** client returns the Tether client this session runs its statements on. */
    public function client(): Client
    {
        return $this->client;
    }

    /**
     * noBackslashEscapes tells whether the session's sql_mode has NO_BACKSLASH_ESCAPES now: how the server reads
     * backslashes in string literals, for escaping and for finding where a literal ends. The PHP client keeps the
     * answer for the socket (Tether\Client::noBackslashEscapes(): read, pinned, again after any statement on the
     * socket that sets sql_mode or a reconnect); inside a transaction it is read there. If it cannot be read, the
     * last known mode is used: the statement it is used for would fail the same way.
     */
    public function noBackslashEscapes(): bool
    {
        try {
            return $this->noBackslashEscapes = $this->call(fn () => $this->client->noBackslashEscapes(null, $this->tx), 'reading sql_mode');
        } catch (QueryError) {
            return $this->noBackslashEscapes;
        }
    }

    /** sqlModeSet records the sql_mode a `SET SESSION sql_mode = '...'` of the drop-in's own has just set. */
    public function sqlModeSet(string $sqlMode): void
    {
        $this->client->sqlModeSet($sqlMode);
    }

    /** inTransaction tells whether a WordPress transaction (START TRANSACTION ... COMMIT) is open. */
    public function inTransaction(): bool
    {
        return $this->tx !== null;
    }

    /**
     * run runs one statement. $exec: run it for its effect (WordPress's INSERT/REPLACE/UPDATE/DELETE and
     * CREATE/ALTER/TRUNCATE/DROP); otherwise as a query that may return rows.
     *
     * @throws QueryError the statement failed or was refused; nothing was left half done
     */
    public function run(string $sql, bool $exec): Result
    {
        $verb = self::plainVerb($sql);
        if ($verb !== null) {
            // Nothing below would find anything in it: send it as it is (most of WordPress's statements).
            $result = $this->send($this->tx, $sql, $exec);
            $this->remember($verb, $result, null);

            return $result;
        }
        // sql_mode decides only what a backslash in a literal means: without one the text reads the same in every
        // mode, and the mode is not read for it (a new socket's first statements, wpdb's connect-time SET NAMES and
        // SET SESSION sql_mode, then cost no round trips to learn it: the latter records it).
        $statement = Statement::parse($sql, \str_contains($sql, '\\') && $this->noBackslashEscapes());
        if ($statement->multiple) {
            throw new QueryError('Tether: the query holds more than one statement; $wpdb runs one statement per query (as mysqli_query() does), so none was run');
        }
        $control = $this->transactionControl($statement);
        if ($control !== null) {
            return $control;
        }
        $this->refuseUnpoolable($statement);
        $emulated = $this->emulatedRead($statement);
        if ($emulated !== null) {
            return $emulated;
        }
        if ($this->tx === null && $statement->matches(self::FOUND_ROWS_CALL)) {
            $statement = $this->withFoundRowsValue($statement);
        }
        $calcFoundRows = !$exec && $statement->matches('/\bSQL_CALC_FOUND_ROWS\b/i');
        $lastInsertId = $statement->matches('/\bLAST_INSERT_ID\s*\(/i');
        if ($this->tx !== null) {
            return $this->runInTransaction($this->tx, $statement, $exec, $calcFoundRows, $lastInsertId, false);
        }
        if ($calcFoundRows || $lastInsertId || $statement->userVariables !== []) {
            $tx = $this->call(fn () => $this->client->begin(), 'begin');
            try {
                $result = $this->runInTransaction($tx, $statement, $exec, $calcFoundRows, $lastInsertId, true);
                $this->call(fn () => $tx->commit(), 'commit');
            } catch (\Throwable $e) {
                $this->rollbackQuietly($tx);
                throw $e;
            }

            return $result;
        }
        $result = $this->send(null, $statement->sql, $exec);
        $this->remember($statement->verb(), $result, null);

        return $result;
    }

    /**
     * plainVerb returns the first keyword (upper-cased) of a statement that run() may send without parsing it: one
     * that begins (after white space and `(`) with SELECT, INSERT, UPDATE, DELETE, REPLACE or SHOW, so is no
     * transaction control and nothing refuseUnpoolable() refuses by its first words, and whose whole text, literals
     * and comments included, holds no `@`, no `;`, no FOUND_ROWS, LAST_INSERT_ID or _LOCK (GET_LOCK, RELEASE_LOCK,
     * RELEASE_ALL_LOCKS): none of what the parsed path looks for in its code can then be there. Null: parse it.
     * One regular expression over the text instead of a parse and a dozen (about 15 us a WordPress query).
     */
    private static function plainVerb(string $sql): ?string
    {
        if (\preg_match('/\A[ \t\r\n(]*(SELECT|INSERT|UPDATE|DELETE|REPLACE|SHOW)(?![A-Za-z_])/i', $sql, $m) !== 1
            || \preg_match('/[@;]|FOUND_ROWS|LAST_INSERT_ID|_LOCK/i', $sql) === 1) {
            return null;
        }

        return \strtoupper($m[1]);
    }

    /** close rolls back an open WordPress transaction and drops the client's socket. */
    public function close(): void
    {
        if ($this->tx !== null) {
            $this->rollbackQuietly($this->tx);
            $this->tx = null;
        }
        $this->client->close();
    }

    private function runInTransaction(Transaction $tx, Statement $statement, bool $exec, bool $calcFoundRows, bool $lastInsertId, bool $restore): Result
    {
        $variables = $statement->userVariables;
        if ($restore) {
            $known = \array_values(\array_filter($variables, fn (string $name) => \array_key_exists($name, $this->userVariables)));
            if ($known !== []) {
                $assignments = \implode(', ', \array_map(static fn (string $name) => '@`' . $name . '` = ?', $known));
                $values = \array_map(fn (string $name) => $this->userVariables[$name], $known);
                $this->call(fn () => $tx->execute('SET ' . $assignments, $values), 'restoring user variables');
            }
            if ($lastInsertId) {
                $this->call(fn () => $tx->query('SELECT LAST_INSERT_ID(?)', [$this->lastInsertId]), 'restoring LAST_INSERT_ID()');
            }
        }
        $result = $this->send($tx, $statement->sql, $exec);
        $found = null;
        if ($calcFoundRows) {
            $found = (int) ($this->call(fn () => $tx->queryOne('SELECT FOUND_ROWS() AS n'), 'FOUND_ROWS()')['n'] ?? 0);
        }
        if ($variables !== []) {
            $select = \implode(', ', \array_map(static fn (string $name, int $i) => '@`' . $name . '` AS v' . $i, $variables, \array_keys($variables)));
            $row = $this->call(fn () => $tx->queryOne('SELECT ' . $select), 'reading user variables') ?? [];
            foreach ($variables as $i => $name) {
                $this->userVariables[$name] = $row['v' . $i] ?? null;
            }
        }
        if ($lastInsertId) {
            $this->lastInsertId = (int) ($this->call(fn () => $tx->queryOne('SELECT LAST_INSERT_ID() AS id'), 'LAST_INSERT_ID()')['id'] ?? 0);
        }
        $this->remember($statement->verb(), $result, $found);

        return $result;
    }

    /**
     * withFoundRowsValue returns $statement with each FOUND_ROWS() call of its code replaced by the value kept for
     * it, for a statement outside a transaction that uses FOUND_ROWS() in more than a plain `SELECT FOUND_ROWS()`
     * (which emulatedRead answers): on a pool it would read another statement's count.
     */
    private function withFoundRowsValue(Statement $statement): Statement
    {
        return $statement->rewriteCode(self::FOUND_ROWS_CALL, (string) ($this->foundRows ?? 0));
    }

    /** remember keeps what later statements may ask of this one ($verb: its first keyword): its insert id and FOUND_ROWS(). */
    private function remember(string $verb, Result $result, ?int $found): void
    {
        if ($result->isExec && $result->insertId !== 0) {
            $this->lastInsertId = $result->insertId;
        }
        if ($found !== null) {
            $this->foundRows = $found;
        } elseif (!$result->isExec && $verb === 'SELECT') {
            $this->foundRows = \count($result->rows);
        }
    }

    /**
     * transactionControl runs a statement that controls the transaction by its text (Tether\Sql\SqlText's
     * detection, shared with the other integrations) on the session's Tether transaction: START TRANSACTION [READ
     * WRITE], BEGIN [WORK], SET autocommit = 0 open one; COMMIT, ROLLBACK [WORK] [AND [NO] CHAIN] and SET autocommit
     * = 1 end it (AND CHAIN opens the next one at once, as MySQL does). SET autocommit may be written in any form the
     * server takes alone: SESSION or LOCAL, @@, @@session. or @@local., `=` or `:=`. Any other form is refused,
     * named (START TRANSACTION READ ONLY / WITH CONSISTENT SNAPSHOT: a Tether transaction has no characteristics;
     * RELEASE: the client's socket is not the server's connection); LOCK/UNLOCK TABLES and XA are left to
     * refuseUnpoolable() and the server. Null: not transaction control.
     */
    private function transactionControl(Statement $statement): ?Result
    {
        $control = SqlText::transactionControl($statement->sql, SqlText::MYSQL, false, $statement->code);
        if ($control === null || $control === 'LOCK TABLES' || $control === 'UNLOCK TABLES' || $control === 'XA') {
            return null;
        }
        $code = \strtoupper(\preg_replace('/\s+/', ' ', \trim($statement->code)));
        $code = \rtrim($code, ' ;');
        $autocommit = '/^SET (?:(?:SESSION|LOCAL) |@@(?:SESSION\.|LOCAL\.)?)?AUTOCOMMIT ?:?= ?(0|OFF|FALSE|1|ON|TRUE)$/';
        if (\preg_match('/^(START TRANSACTION( READ WRITE)?|BEGIN( WORK)?)$/', $code)
            || (\preg_match($autocommit, $code, $m) && \in_array($m[1], ['0', 'OFF', 'FALSE'], true))) {
            if ($this->tx !== null) {
                if (\str_starts_with($code, 'SET')) {
                    return Result::none();
                }
                $this->end(true);
            }
            $this->begin();

            return Result::none();
        }
        if (\str_starts_with($code, 'START TRANSACTION')) {
            throw new QueryError(\sprintf('Tether: %s is not supported (a Tether transaction has no characteristics); use START TRANSACTION', $statement->code));
        }
        if (\preg_match('/^(COMMIT|ROLLBACK)( WORK)?( AND (NO )?CHAIN)?$/', $code, $m)) {
            $chain = ($m[3] ?? '') !== '' && ($m[4] ?? '') === '';
            $open = $this->tx !== null;
            $this->end($m[1] === 'COMMIT');
            if ($chain && $open) {
                $this->begin();
            }

            return Result::none();
        }
        if (\preg_match('/^(COMMIT|ROLLBACK)\b(?! (WORK )?TO\b)/', $code)) {
            throw new QueryError(\sprintf('Tether: %s is not supported; use COMMIT or ROLLBACK [AND CHAIN]', $statement->code));
        }
        if (\preg_match($autocommit, $code)) {
            $this->end(true);

            return Result::none();
        }

        throw new QueryError(\sprintf('Tether: %s is not supported (%s): a Tether transaction is opened and ended only by START TRANSACTION, BEGIN, COMMIT, ROLLBACK and SET autocommit = 0 or 1 alone', \trim($statement->code), $control));
    }

    /** begin opens the WordPress transaction on a Tether transaction. */
    private function begin(): void
    {
        $this->tx = $this->call(fn () => $this->client->begin(), 'START TRANSACTION');
    }

    /** end commits or rolls back the open WordPress transaction; without one it does nothing, as MySQL does. */
    private function end(bool $commit): void
    {
        $tx = $this->tx;
        if ($tx === null) {
            return;
        }
        $this->tx = null;
        if ($commit) {
            $this->call(fn () => $tx->commit(), 'COMMIT');
        } else {
            $this->call(fn () => $tx->rollback(), 'ROLLBACK');
        }
    }

    private function refuseUnpoolable(Statement $statement): void
    {
        [$first, $second] = $statement->keywords(2) + ['', ''];
        if ($first === 'LOCK' || ($first === 'FLUSH' && $statement->matches('/\bREAD\s+LOCK\b/i'))) {
            throw new QueryError(\sprintf('Tether: %s is not supported: table locks cannot be held by a pooled connection (and would end a transaction); use a transaction (START TRANSACTION ... COMMIT) instead', $first . ' ' . $second));
        }
        if ($this->tx !== null) {
            return;
        }
        $why = match (true) {
            $statement->matches('/\b(GET_LOCK|RELEASE_LOCK|RELEASE_ALL_LOCKS)\s*\(/i') => 'GET_LOCK() outside a transaction: the lock would be released as soon as the statement ends',
            $first === 'CREATE' && $second === 'TEMPORARY' => 'CREATE TEMPORARY TABLE outside a transaction: the table would be dropped as soon as the statement ends',
            $first === 'USE' => 'USE outside a transaction: the database would change back as soon as the statement ends (name tables with their database instead)',
            \in_array($first, ['PREPARE', 'EXECUTE', 'DEALLOCATE', 'HANDLER', 'XA'], true) => $first . ' outside a transaction: its state would not outlive the statement',
            default => null,
        };
        if ($why !== null) {
            throw new QueryError('Tether: not supported: ' . $why . '; run it inside START TRANSACTION ... COMMIT');
        }
    }

    private function emulatedRead(Statement $statement): ?Result
    {
        if (\preg_match('/^SELECT\s+(FOUND_ROWS|LAST_INSERT_ID)\s*\(\s*\)(?:\s+(?:AS\s+)?([A-Za-z_][A-Za-z0-9_]*))?$/i', $statement->code, $m) !== 1) {
            return null;
        }
        $function = \strtoupper($m[1]);
        if ($this->tx !== null && $function === 'LAST_INSERT_ID') {
            return null;
        }
        $value = $function === 'FOUND_ROWS' ? ($this->foundRows ?? 0) : $this->lastInsertId;
        $this->foundRows = 1;

        return Result::rows([($m[2] ?? '') !== '' ? $m[2] : $function . '()'], [[(string) $value]]);
    }

    private function send(?Transaction $tx, string $sql, bool $exec): Result
    {
        if ($exec) {
            $r = $this->call(fn () => $tx !== null ? $tx->execute($sql) : $this->client->execute($sql), null);

            return Result::exec($r->affectedRows, $r->lastInsertId);
        }
        $numeric = $this->call(fn () => $tx !== null ? $tx->queryNumeric($sql)
            : $this->client->queryNumeric($sql, [], null, null, $this->cacheTtlMs > 0 ? $this->cacheTtlMs : null), null);

        return Result::rows($numeric->columns, self::textRows($numeric->rows));
    }

    /**
     * textRows turns Tether's typed values into mysqli's text: integers and floats as MySQL prints them (DATETIME
     * and TIMESTAMP already come as mysqli gives them: the client asks for time_format sql). The rows are the
     * decoded reply's own (queryNumeric(): every column by position, whatever its name); a row is copied only when
     * it holds a value that is not text already.
     *
     * @param list<list<mixed>> $rows
     * @return list<list<?string>>
     */
    private static function textRows(array $rows): array
    {
        foreach ($rows as $r => $row) {
            foreach ($row as $i => $value) {
                if (!\is_string($value) && $value !== null) {
                    $rows[$r][$i] = self::text($value);
                }
            }
        }

        return $rows;
    }

    private static function text(mixed $value): ?string
    {
        if (\is_string($value)) {
            return $value;
        }
        if ($value === null) {
            return null;
        }
        if (\is_int($value)) {
            return (string) $value;
        }
        if (\is_float($value)) {
            return self::floatText($value);
        }
        if (\is_bool($value)) {
            return $value ? '1' : '0';
        }

        return (string) \json_encode($value);
    }

    /** floatText prints a double as MySQL does: the shortest form that reads back the same (0.1, 1, 1e20). */
    private static function floatText(float $value): string
    {
        if (\is_nan($value) || \is_infinite($value)) {
            return (string) $value;
        }
        $text = \var_export($value, true);
        $text = \preg_replace('/\.0(?=E|$)/', '', $text);
        $text = \str_replace(['E+', 'E'], ['e', 'e'], $text);

        return $text;
    }

    /**
     * call runs one Tether call and turns its failure into a QueryError: a MySQL error keeps MySQL's message and
     * number; what tetherd refused or could not do is named.
     *
     * @template T
     * @param callable(): T $fn
     * @return T
     */
    private function call(callable $fn, ?string $what): mixed
    {
        $deadline = \microtime(true) + $this->busyWait;
        try {
            while (true) {
                try {
                    return $fn();
                } catch (ServerException $e) {
                    // busy: no pooled connection came free within acquire_timeout, and the request was not sent.
                    // A mysqli connection would have waited for the server: ask again, for at most busyWait.
                    if ($e->getErrorCode() !== ServerException::BUSY || !$e->isRetryable() || \microtime(true) >= $deadline) {
                        throw $e;
                    }
                }
            }
        } catch (ServerException $e) {
            if ($e->getErrorCode() === ServerException::TX_ABORTED || ($this->tx !== null && !$this->tx->isOpen())) {
                $this->tx = null;
            }
            if ($e->getErrorCode() === ServerException::BACKEND_ERROR && $e->getBackendCode() !== null && \ctype_digit($e->getBackendCode())) {
                throw new QueryError($e->getMessage(), (int) $e->getBackendCode(), false, $e);
            }
            throw new QueryError(\sprintf('Tether: tetherd answered %s%s: %s', $e->getErrorCode(), $what !== null ? ' to ' . $what : '', $e->getMessage()), 0, false, $e);
        } catch (UnknownOutcomeException $e) {
            $this->tx = null;
            throw new QueryError('Tether: lost tetherd after sending the statement, its outcome is unknown: ' . $e->getMessage(), 2013, false, $e);
        } catch (CommunicationException $e) {
            $this->tx = null;
            throw new QueryError('Tether: cannot reach tetherd: ' . $e->getMessage(), 2006, true, $e);
        } catch (TetherException $e) {
            throw new QueryError('Tether: ' . $e->getMessage(), 0, false, $e);
        }
    }

    private function rollbackQuietly(Transaction $tx): void
    {
        try {
            if ($tx->isOpen()) {
                $tx->rollback();
            }
        } catch (\Throwable) {
            // tetherd rolls back what a dropped socket left open
        }
    }
}
