<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Batch\Operation;
use Tether\ColumnarResult;
use Tether\ExecResult;
use Tether\Server\ServerException;
use Tether\Transaction;

/**
 * ClientTest runs the client against a real tetherd, on every backend under test (see IntegrationTestCase).
 */
final class ClientTest extends IntegrationTestCase
{
    public function testPing(): void
    {
        $start = hrtime(true);
        $this->client->ping();
        self::assertLessThan(1e9, hrtime(true) - $start, 'a ping takes well under a second');
    }

    public function testServerTimeOfEachCallIsReported(): void
    {
        $before = $this->client->serverMicrosTotal();
        $start = hrtime(true);
        // A statement that takes SQLite some milliseconds.
        $this->client->query('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) SELECT count(*) AS n FROM c', [], 'main');
        $wallMicros = (hrtime(true) - $start) / 1000;
        $server = $this->client->lastServerMicros();

        self::assertIsInt($server);
        self::assertGreaterThan(1000, $server, 'the statement took tetherd at least a millisecond');
        self::assertLessThanOrEqual($wallMicros + 1, $server, "tetherd's time is part of the call's");
        self::assertSame($before + $server, $this->client->serverMicrosTotal());

        $this->client->ping();
        self::assertNull($this->client->lastServerMicros(), 'a ping carries no server time');
        $this->client->execute('CREATE TABLE IF NOT EXISTS server_time (i INT)', [], 'main');
        self::assertGreaterThan(0, $this->client->lastServerMicros());
    }

    /** @dataProvider backends */
    public function testExecuteInsertsAndQueryReturnsAssociativeRows(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);

        $first = $this->client->execute(self::sql($type, "INSERT INTO $t (name, i) VALUES (?, ?)"), ['ada', 1], $backend);
        $second = $this->client->execute(self::sql($type, "INSERT INTO $t (name, i) VALUES (?, ?)"), ['grace', 2], $backend);

        self::assertSame(1, $first->affectedRows);
        self::assertSame(1, $second->affectedRows);
        $rows = $this->client->query("SELECT id, name, i FROM $t ORDER BY id", [], $backend);
        self::assertCount(2, $rows);
        self::assertSame(['id', 'name', 'i'], array_keys($rows[0]));
        self::assertSame(['ada', 1], [$rows[0]['name'], $rows[0]['i']]);
        self::assertSame(['grace', 2], [$rows[1]['name'], $rows[1]['i']]);
        if ($type === 'postgres') {
            self::assertSame(0, $first->lastInsertId, 'PostgreSQL has no last insert id');
        } else {
            self::assertSame($rows[0]['id'], $first->lastInsertId);
            self::assertSame($rows[1]['id'], $second->lastInsertId);
        }

        $updated = $this->client->execute(self::sql($type, "UPDATE $t SET i = i + ? WHERE i > ?"), [10, 0], $backend);
        self::assertSame(2, $updated->affectedRows);
        self::assertSame(['name' => 'grace', 'i' => 12], $this->client->queryOne(self::sql($type, "SELECT name, i FROM $t WHERE name = ?"), ['grace'], $backend));
        self::assertNull($this->client->queryOne(self::sql($type, "SELECT name FROM $t WHERE name = ?"), ['nobody'], $backend));
    }

    /** @dataProvider backends */
    public function testValuesRoundTrip(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);
        $bytes = implode('', array_map('chr', range(0, 255)));
        // name, i, f, b (binary: every byte value), d (decimal digits, as strings both ways)
        $values = [
            ['nulls', null, null, null, null],
            ['max', PHP_INT_MAX, -1.5e-7, '', '-3.10'],
            ['min', PHP_INT_MIN, 3.25, $bytes, '0.00'],
            ["h\u{e9}llo w\u{f6}rld \u{1F600}", -42, 1e300, strrev($bytes), '12.50'],
        ];
        foreach ($values as $row) {
            $this->client->execute(self::sql($type, "INSERT INTO $t (name, i, f, b, d) VALUES (?, ?, ?, ?, ?)"), $row, $backend);
        }

        $rows = $this->client->query("SELECT name, i, f, b, d FROM $t ORDER BY id", [], $backend);

        self::assertSame(array_map(static fn (array $r): array => array_combine(['name', 'i', 'f', 'b', 'd'], $r), $values), $rows);
    }

    /**
     * time_format 'sql' gives DATETIME/TIMESTAMP values as mysqli, PDO and pgsql do, in queries, transactions and
     * batches; the default stays ISO 8601. SQLite has no such type: its stored text comes back as it is.
     *
     * @dataProvider backends
     */
    public function testTimeFormatSqlGivesTheDatabasesOwnTextForm(string $backend, string $type): void
    {
        [$sql, $iso, $native] = match ($type) {
            'mysql' => ["SELECT CAST('2024-02-29 23:59:58.5' AS DATETIME(1)) AS t, CAST('2024-02-29' AS DATE) AS d",
                '2024-02-29T23:59:58.5', '2024-02-29 23:59:58.5'],
            'postgres' => ["SELECT TIMESTAMP '2024-02-29 23:59:58.5' AS t, DATE '2024-02-29' AS d",
                '2024-02-29T23:59:58.5', '2024-02-29 23:59:58.5'],
            default => ["SELECT '2024-02-29T23:59:58.5' AS t, '2024-02-29' AS d",
                '2024-02-29T23:59:58.5', '2024-02-29T23:59:58.5'],
        };
        $sqlClient = $this->createClient(['time_format' => 'sql']);

        self::assertSame(['t' => $iso, 'd' => '2024-02-29'], $this->client->queryOne($sql, [], $backend));
        self::assertSame(['t' => $native, 'd' => '2024-02-29'], $sqlClient->queryOne($sql, [], $backend));
        self::assertSame([$native], $sqlClient->queryColumns($sql, [], $backend)->column('t'));
        self::assertSame(['t' => $native, 'd' => '2024-02-29'], $sqlClient->transaction(
            static fn (Transaction $tx): ?array => $tx->queryOne($sql),
            $backend,
        ));
        $inTx = $sqlClient->transaction(static fn (Transaction $tx): ColumnarResult => $tx->queryColumns($sql . ' WHERE 1 = 0'), $backend);
        self::assertSame(['t', 'd'], $inTx->columns(), 'a transaction\'s columnar result names its columns without rows');
        self::assertSame(0, $inTx->count());
        [$inBatch, $isoInBatch] = $this->client->batch([
            Operation::query($sql, [], $backend, null, 'sql'),
            Operation::query($sql, [], $backend),
        ]);
        self::assertSame([['t' => $native, 'd' => '2024-02-29']], $inBatch);
        self::assertSame([['t' => $iso, 'd' => '2024-02-29']], $isoInBatch);
    }

    /** @dataProvider backends */
    public function testCommittedTransactionIsVisible(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);
        $tx = $this->client->begin($backend);
        $tx->execute(self::sql($type, "INSERT INTO $t (name) VALUES (?)"), ['in tx']);
        self::assertSame([['name' => 'in tx']], $tx->query("SELECT name FROM $t"), 'a transaction sees its own writes');
        $tx->commit();

        self::assertFalse($tx->isOpen());
        self::assertSame([['name' => 'in tx']], $this->client->query("SELECT name FROM $t", [], $backend));
    }

    /** @dataProvider backends */
    public function testRolledBackTransactionIsInvisible(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);
        $tx = $this->client->begin($backend);
        $tx->execute(self::sql($type, "INSERT INTO $t (name) VALUES (?)"), ['doomed']);
        self::assertCount(1, $tx->query("SELECT name FROM $t"));
        $tx->rollback();

        self::assertSame([], $this->client->query("SELECT name FROM $t", [], $backend));
    }

    /** @dataProvider backends */
    public function testTransactionHelperCommitsOrRollsBack(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);
        $insert = self::sql($type, "INSERT INTO $t (name) VALUES (?)");

        $result = $this->client->transaction(static fn (Transaction $tx): ExecResult => $tx->execute($insert, ['kept']), $backend);
        self::assertSame(1, $result->affectedRows);

        $failure = new \RuntimeException('application failure');
        try {
            $this->client->transaction(static function (Transaction $tx) use ($insert, $failure): void {
                $tx->execute($insert, ['discarded']);
                throw $failure;
            }, $backend);
            self::fail('no exception');
        } catch (\RuntimeException $e) {
            self::assertSame($failure, $e);
        }

        self::assertSame([['name' => 'kept']], $this->client->query("SELECT name FROM $t ORDER BY id", [], $backend));
    }

    /** @dataProvider backends */
    public function testSqlErrorIsBackendErrorWithTheBackendsCode(string $backend, string $type): void
    {
        try {
            $this->client->query('SELECT * FROM tether_no_such_table', [], $backend);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BACKEND_ERROR, $e->getErrorCode());
            self::assertFalse($e->isRetryable());
            self::assertStringContainsString('tether_no_such_table', $e->getMessage());
            $expected = ['sqlite' => '1', 'mysql' => '1146', 'postgres' => '42P01'][$type] ?? null;
            self::assertSame($expected, $e->getBackendCode());
        }
        $this->client->ping(); // the connection survives an error reply
    }

    public function testUnknownBackend(): void
    {
        try {
            $this->client->query('SELECT 1', [], 'tether_no_such_backend');
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_BACKEND, $e->getErrorCode());
            self::assertFalse($e->isRetryable());
        }
    }

    public function testBatchAcrossAllBackendsWithOneFailingOperation(): void
    {
        $ops = [];
        foreach (self::backends() as [$backend]) {
            $ops["$backend:query"] = Operation::query('SELECT 1 AS one', [], $backend);
        }
        $first = array_values(iterator_to_array(self::backends()))[0][0];
        $ops['failing'] = Operation::query('SELECT * FROM tether_no_such_table', [], $first);
        $ops['ping'] = Operation::ping();
        $ops['unknown backend'] = Operation::execute('DELETE FROM t', [], 'tether_no_such_backend');

        $results = $this->client->batch($ops, 5000);

        self::assertSame(array_keys($ops), array_keys($results));
        foreach (self::backends() as [$backend]) {
            self::assertSame([['one' => 1]], $results["$backend:query"], "backend $backend");
        }
        self::assertInstanceOf(ServerException::class, $results['failing']);
        self::assertSame(ServerException::BACKEND_ERROR, $results['failing']->getErrorCode());
        self::assertTrue($results['ping']);
        self::assertInstanceOf(ServerException::class, $results['unknown backend']);
        self::assertSame(ServerException::UNKNOWN_BACKEND, $results['unknown backend']->getErrorCode());
    }

    /** @dataProvider backends */
    public function testTimeoutMsBoundsASlowStatement(string $backend, string $type): void
    {
        $slow = match ($type) {
            'sqlite' => 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) AS n FROM c',
            'mysql' => 'SELECT SLEEP(2) AS n',
            'postgres' => 'SELECT pg_sleep(2) AS n',
            default => self::fail("backend $backend has no known type ($type)"),
        };
        $start = hrtime(true);
        try {
            $this->client->query($slow, [], $backend, 200);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::TIMEOUT, $e->getErrorCode(), $e->getMessage());
        }
        $elapsed = (hrtime(true) - $start) / 1e9;
        self::assertGreaterThanOrEqual(0.19, $elapsed);
        self::assertLessThan(1.9, $elapsed, 'tetherd answered at the deadline, not when the statement ended');

        self::assertSame([['ok' => 1]], $this->client->query('SELECT 1 AS ok', [], $backend), 'the backend is usable after a timeout');
    }
}
