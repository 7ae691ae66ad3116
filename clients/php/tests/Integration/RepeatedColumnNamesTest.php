<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Batch\Operation;
use Tether\Client;

/**
 * RepeatedColumnNamesTest checks that a result whose column names repeat keeps every column, in order, through
 * tetherd (plain, column-oriented, batched, cached, in a transaction, with time_format sql) and the client's
 * numeric and column-oriented results, on every SQL backend under test; and that what reads by name follows PDO's
 * FETCH_ASSOC: the last column's value, at the first one's place.
 */
final class RepeatedColumnNamesTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testLiteralsWithARepeatedAlias(string $backend, string $type): void
    {
        $sql = 'SELECT 1 AS x, 2 AS x, 3 AS y';

        $numeric = $this->client->queryNumeric($sql, [], $backend);
        self::assertSame(['x', 'x', 'y'], $numeric->columns);
        self::assertSame([[1, 2, 3]], $numeric->rows);
        self::assertSame([['x' => 2, 'y' => 3]], $numeric->associative());
        self::assertSame([2], $numeric->column(1));

        $columns = $this->client->queryColumns($sql, [], $backend);
        self::assertSame(['x', 'x', 'y'], $columns->columns());
        self::assertSame([[1, 2, 3]], $columns->numericRows());
        self::assertSame([1], $columns->columnAt(0));
        self::assertSame([2], $columns->columnAt(1));
        self::assertSame([2], $columns->column('x'), 'by name: the last column of that name, as PDO');
        self::assertSame([['x' => 2, 'y' => 3]], $columns->rows());

        self::assertSame([['x' => 2, 'y' => 3]], $this->client->query($sql, [], $backend));
        self::assertSame(['x' => 2, 'y' => 3], $this->client->queryOne($sql, [], $backend));
    }

    /** @dataProvider backends */
    public function testTwoCallsOfOneFunctionKeepTheirOwnValues(string $backend, string $type): void
    {
        $sql = self::sql($type, 'SELECT LENGTH(?), LENGTH(?)');

        $numeric = $this->client->queryNumeric($sql, ['apple', 'banana'], $backend);
        self::assertSame([[5, 6]], $numeric->rows);
        self::assertCount(2, $numeric->columns);
        self::assertSame($numeric->columns[0], $numeric->columns[1], 'both columns have the same name');

        self::assertSame([[5, 6]], $this->client->queryColumns($sql, ['apple', 'banana'], $backend)->numericRows());
    }

    /** @dataProvider backends */
    public function testJoinSelectingBothIds(string $backend, string $type): void
    {
        [$sql, $want] = $this->joinOfTwoTables($backend, $type);

        $numeric = $this->client->queryNumeric($sql, [], $backend);
        self::assertSame(['id', 'id', 'name'], $numeric->columns);
        self::assertSame($want, $numeric->rows);
        self::assertSame($want, $this->client->queryColumns($sql, [], $backend)->numericRows());

        // in a transaction, in a batch (both forms), and from tetherd's result cache (stored, then answered)
        $tx = $this->client->begin($backend);
        try {
            self::assertSame($want, $tx->queryNumeric($sql)->rows);
            self::assertSame($want, $tx->queryColumns($sql)->numericRows());
        } finally {
            $tx->rollback();
        }
        [$rows, $columns] = $this->client->batch([Operation::query($sql, [], $backend), Operation::queryColumns($sql, [], $backend)]);
        self::assertSame([['id' => 7, 'name' => 'b']], $rows, 'associative: the last id wins');
        self::assertSame($want, $columns->numericRows());
        for ($i = 0; $i < 2; $i++) {
            self::assertSame($want, $this->client->queryNumeric($sql, [], $backend, null, 60_000)->rows, "cached read $i");
            self::assertSame($want, $this->client->queryColumns($sql, [], $backend, null, 60_000)->numericRows(), "cached read $i");
        }
        $sqlTimes = new Client(['socket' => (string) getenv('TETHER_SOCKET'), 'time_format' => 'sql', 'timeout' => 10.0]);
        self::assertSame($want, $sqlTimes->queryNumeric($sql, [], $backend)->rows);
        self::assertSame($want, $sqlTimes->queryColumns($sql, [], $backend)->numericRows());
    }

    /**
     * joinOfTwoTables makes two tables whose rows join with different ids, and returns a join that selects both
     * ids and the rows it must return.
     *
     * @return array{string, list<list<mixed>>}
     */
    private function joinOfTwoTables(string $backend, string $type): array
    {
        $a = $this->table($backend, $type);
        $b = $this->table($backend, $type);
        $this->client->execute(self::sql($type, "INSERT INTO $a (name, i) VALUES (?, ?)"), ['a', 1], $backend);
        $this->client->execute(self::sql($type, "INSERT INTO $b (id, name, i) VALUES (?, ?, ?)"), [7, 'b', 1], $backend);

        return ["SELECT $a.id, $b.id, $b.name FROM $a JOIN $b ON $b.i = $a.i", [[1, 7, 'b']]];
    }
}
