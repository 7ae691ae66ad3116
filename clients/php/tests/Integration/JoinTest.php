<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Batch\Operation;
use Tether\ColumnarResult;
use Tether\Server\ServerException;

/**
 * JoinTest runs server-side lookup joins and the column-oriented reads on every SQL backend under test (see
 * IntegrationTestCase): users joined with their groups by group code, both tables on the same backend.
 * JoinAcrossBackendsTest joins across backends.
 *
 * The users, in id order: 1 ada (adm), 2 bob (no group), 3 cy (dev), 4 dan (zzz, a code no group has), 5 eve (adm).
 */
final class JoinTest extends IntegrationTestCase
{
    private const USERS = 'id BIGINT PRIMARY KEY, name VARCHAR(64), group_code VARCHAR(16)';
    private const GROUPS = 'code VARCHAR(16) PRIMARY KEY, name VARCHAR(64), seats INT';

    /** @dataProvider backends */
    public function testLeftJoinKeepsEveryLeftRowInItsOrder(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $result = $this->client->join(
            Operation::query("SELECT id, name, group_code FROM $users ORDER BY id", [], $backend),
            $groups,
            on: ['group_code'],
            rightColumns: ['name'],
        );

        self::assertInstanceOf(ColumnarResult::class, $result);
        self::assertSame(['id', 'name', 'group_code', "$groups.name"], $result->columns(), 'a right column whose name is taken is table.column');
        self::assertSame([1, 2, 3, 4, 5], $result->column('id'));
        self::assertSame(['Admins', null, 'Devs', null, 'Admins'], $result->column("$groups.name"), 'null where nothing matched or the code is null');
        self::assertSame(['id' => 3, 'name' => 'cy', 'group_code' => 'dev', "$groups.name" => 'Devs'], $result->rows()[2]);
    }

    /** @dataProvider backends */
    public function testInnerJoinKeepsTheMatchedRows(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $result = $this->client->join(
            Operation::query("SELECT id, group_code FROM $users ORDER BY id", [], $backend),
            $groups,
            ['group_code'],
            ['name', 'seats'],
            kind: 'inner',
        );

        self::assertSame([
            ['id' => 1, 'group_code' => 'adm', 'name' => 'Admins', 'seats' => 2],
            ['id' => 3, 'group_code' => 'dev', 'name' => 'Devs', 'seats' => 10],
            ['id' => 5, 'group_code' => 'adm', 'name' => 'Admins', 'seats' => 2],
        ], $result->rows());
    }

    /** @dataProvider backends */
    public function testOrderByAJoinedColumnThenDescending(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $result = $this->client->join(
            Operation::query("SELECT id, name, group_code FROM $users", [], $backend),
            $groups,
            ['group_code'],
            ['name'],
            orderBy: ["$groups.name", '-id'],
        );

        // nulls first (4 and 2, ids descending), then Admins (5, 1), then Devs (3)
        self::assertSame([4, 2, 5, 1, 3], $result->column('id'));
        self::assertSame([null, null, 'Admins', 'Admins', 'Devs'], $result->column("$groups.name"));
    }

    /** @dataProvider backends */
    public function testAllRightColumnsByDefault(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $result = $this->client->join(Operation::get($users, 1, ['id', 'group_code'], $backend), $groups, ['group_code']);

        self::assertSame([['id' => 1, 'group_code' => 'adm', 'code' => 'adm', 'name' => 'Admins', 'seats' => 2]], $result->rows());
    }

    /** @dataProvider backends */
    public function testLeftSideFromTheKeyApi(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $scanned = $this->client->join(Operation::scan($users, start: [2], end: [5], backend: $backend), $groups, ['group_code'], ['seats'], kind: 'inner');
        self::assertSame([3], $scanned->column('id'));
        self::assertSame([10], $scanned->column('seats'));

        $some = $this->client->join(Operation::multiGet($users, [5, 1], ['id', 'group_code'], $backend), $groups, ['group_code'], ['seats']);
        self::assertSame([['id' => 5, 'group_code' => 'adm', 'seats' => 2], ['id' => 1, 'group_code' => 'adm', 'seats' => 2]], $some->rows());
    }

    /** @dataProvider backends */
    public function testEmptyRightTable(string $backend, string $type): void
    {
        [$users] = $this->usersAndGroups($backend, $type);
        $none = $this->keyTable($backend, $type, self::GROUPS);
        $left = Operation::query("SELECT id, group_code FROM $users ORDER BY id", [], $backend);

        $result = $this->client->join($left, $none, ['group_code'], ['seats']);
        self::assertSame([1, 2, 3, 4, 5], $result->column('id'));
        self::assertSame([null, null, null, null, null], $result->column('seats'));

        $inner = $this->client->join($left, $none, ['group_code'], ['seats'], kind: 'inner');
        self::assertCount(0, $inner);
        self::assertSame(['id', 'group_code', 'seats'], $inner->columns(), 'an empty result still names its columns');
        self::assertSame([], $inner->rows());
    }

    /** @dataProvider backends */
    public function testEmptyLeftSide(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);

        $result = $this->client->join(Operation::query(self::sql($type, "SELECT id, group_code FROM $users WHERE id > ?"), [100], $backend), $groups, ['group_code'], ['name']);

        self::assertCount(0, $result);
        self::assertSame([], $result->rows());
    }

    /** @dataProvider backends */
    public function testUnknownRightTableFailsTheWholeJoin(string $backend, string $type): void
    {
        [$users] = $this->usersAndGroups($backend, $type);

        try {
            $this->client->join(Operation::query("SELECT id, group_code FROM $users", [], $backend), 'tether_no_such_table', ['group_code']);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_TABLE, $e->getErrorCode(), $e->getMessage());
        }
        self::assertSame(5, \count($this->client->query("SELECT id FROM $users", [], $backend)), 'the connection stays usable');
    }

    /** @dataProvider backends */
    public function testJoinInABatchAndInAPendingBatch(string $backend, string $type): void
    {
        [$users, $groups] = $this->usersAndGroups($backend, $type);
        $join = Operation::join(Operation::query("SELECT id, group_code FROM $users ORDER BY id", [], $backend), $groups, ['group_code'], ['name'], kind: 'inner');

        $pending = $this->client->sendBatch(['joined' => $join, 'count' => Operation::query("SELECT COUNT(*) AS n FROM $groups", [], $backend)]);
        $direct = $this->client->join(Operation::query("SELECT id FROM $users WHERE id = 1", [], $backend), $users, ['id'], ['name']);
        $results = $pending->wait();

        self::assertInstanceOf(ColumnarResult::class, $results['joined']);
        self::assertSame([1, 3, 5], $results['joined']->column('id'));
        self::assertEquals([['n' => 3]], $results['count']);
        self::assertSame([['id' => 1, 'name' => 'ada']], $direct->rows(), 'a table joined with itself by its key');

        $batch = $this->client->batch([$join, Operation::join(Operation::query("SELECT id, group_code FROM $users", [], $backend), 'tether_no_such_table', ['group_code'])]);
        self::assertSame([1, 3, 5], $batch[0]->column('id'));
        self::assertInstanceOf(ServerException::class, $batch[1], 'one failed join does not fail the batch');
        self::assertSame(ServerException::UNKNOWN_TABLE, $batch[1]->getErrorCode());
    }

    /** @dataProvider backends */
    public function testQueryColumnsHasTheValuesOfQuery(string $backend, string $type): void
    {
        $t = $this->table($backend, $type);
        $bytes = "\x00\x01\xfe\xff";
        foreach ([['ada', 1, 1.5, $bytes, '12.50'], ['bob', null, null, null, null], ['cy', -7, 0.25, '', '0.00']] as $row) {
            $this->client->execute(self::sql($type, "INSERT INTO $t (name, i, f, b, d) VALUES (?, ?, ?, ?, ?)"), $row, $backend);
        }
        $sql = "SELECT name, i, f, b, d FROM $t ORDER BY id";

        $columns = $this->client->queryColumns($sql, [], $backend);

        self::assertSame($this->client->query($sql, [], $backend), $columns->rows());
        self::assertSame(['ada', 'bob', 'cy'], $columns->column('name'));
        self::assertSame([1, null, -7], $columns->column('i'));
        self::assertSame([$bytes, null, ''], $columns->column('b'));
        self::assertCount(3, $columns);

        $empty = $this->client->queryColumns(self::sql($type, "SELECT name, i FROM $t WHERE id < ?"), [0], $backend);
        self::assertCount(0, $empty);
        self::assertSame(['name', 'i'], $empty->columns());
    }

    /** @dataProvider backends */
    public function testScanColumnsPagesLikeScan(string $backend, string $type): void
    {
        [$users] = $this->usersAndGroups($backend, $type);

        $first = $this->client->scanColumns($users, limit: 3, columns: ['id', 'name'], backend: $backend);
        self::assertSame([1, 2, 3], $first->column('id'));
        self::assertTrue($first->hasMore());
        $second = $this->client->scanColumns($users, limit: 3, cursor: $first->cursor(), columns: ['id', 'name'], backend: $backend);
        self::assertSame([4, 5], $second->column('id'));
        self::assertSame(['dan', 'eve'], $second->column('name'));
    }

    /**
     * usersAndGroups creates and fills the users and groups tables on $backend.
     *
     * @return array{string, string} [users, groups]
     */
    private function usersAndGroups(string $backend, string $type): array
    {
        $users = $this->keyTable($backend, $type, self::USERS);
        $groups = $this->keyTable($backend, $type, self::GROUPS);
        foreach ([[1, 'ada', 'adm'], [2, 'bob', null], [3, 'cy', 'dev'], [4, 'dan', 'zzz'], [5, 'eve', 'adm']] as [$id, $name, $code]) {
            $this->client->put($users, ['id' => $id, 'name' => $name, 'group_code' => $code], $backend);
        }
        foreach ([['adm', 'Admins', 2], ['dev', 'Devs', 10], ['ops', 'Ops', 1]] as [$code, $name, $seats]) {
            $this->client->put($groups, ['code' => $code, 'name' => $name, 'seats' => $seats], $backend);
        }

        return [$users, $groups];
    }
}
