<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestSuite;
use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;

/**
 * JoinAcrossBackendsTest joins users on one backend with their groups looked up on another, in one round trip:
 * each SQL backend under test with the next one (main with maria, maria with pg, pg with main), and the first
 * SQL backend with each Cassandra and Bigtable backend under test. With fewer than two backends to join, this
 * class has no tests at all (see suite()).
 *
 * The right table's value column is `title`, a name the left's columns do not have, so that no `table.column`
 * renaming is involved: JoinTest covers that.
 */
final class JoinAcrossBackendsTest extends IntegrationTestCase
{
    private const USERS = 'id BIGINT PRIMARY KEY, name VARCHAR(64), group_code VARCHAR(64)';
    private const GROUPS = 'code VARCHAR(64) PRIMARY KEY, title VARCHAR(64)';
    private const KEYSPACE = 'tether_test';
    /** BIGTABLE_TABLE is the table with column families f and c that BigtableTest uses too. */
    private const BIGTABLE_TABLE = 'php_test';

    /** @var list<array{string, string}> [backend, row key] of Bigtable rows to delete in tearDown */
    private array $bigtableRows = [];

    public static function suite(string $className): TestSuite
    {
        foreach (self::pairs() as $_) {
            return new TestSuite(new \ReflectionClass($className));
        }
        $suite = new TestSuite();
        $suite->setName($className);

        return $suite;
    }

    /**
     * pairs is the data provider: [left backend, its type, right backend, its type].
     *
     * @return iterable<string, array{string, string, string, string}>
     */
    public static function pairs(): iterable
    {
        $sql = array_values(iterator_to_array(self::backends(), false));
        $n = \count($sql);
        if ($n >= 2) {
            for ($i = 0; $i < ($n === 2 ? 1 : $n); $i++) {
                [$left, $leftType] = $sql[$i];
                [$right, $rightType] = $sql[($i + 1) % $n];
                yield "$left ($leftType) with $right ($rightType)" => [$left, $leftType, $right, $rightType];
            }
        }
        if ($n >= 1) {
            [$left, $leftType] = $sql[0];
            foreach (['cassandra', 'bigtable'] as $type) {
                foreach (self::backendsOfType($type) as [$right]) {
                    yield "$left ($leftType) with $right ($type)" => [$left, $leftType, $right, $type];
                }
            }
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->bigtableRows as [$backend, $key]) {
            try {
                $this->client->mutateRow(self::BIGTABLE_TABLE, $key, [Mutation::deleteRow()], $backend);
            } catch (\Throwable) {
                // best effort; the keys are unique anyway
            }
        }
        $this->bigtableRows = [];
        parent::tearDown();
    }

    /** @dataProvider pairs */
    public function testJoinAcrossBackends(string $left, string $leftType, string $right, string $rightType): void
    {
        // Codes unique to this test, since a Bigtable table is shared.
        $adm = 'adm-' . bin2hex(random_bytes(4));
        $dev = 'dev-' . bin2hex(random_bytes(4));
        $users = $this->keyTable($left, $leftType, self::USERS);
        foreach ([[1, 'ada', $adm], [2, 'bob', null], [3, 'cy', $dev], [4, 'dan', 'nobody'], [5, 'eve', $adm]] as [$id, $name, $code]) {
            $this->client->put($users, ['id' => $id, 'name' => $name, 'group_code' => $code], $left);
        }
        [$groups, $title] = $this->groups($right, $rightType, [$adm => 'Admins', $dev => 'Devs', 'ops-' . bin2hex(random_bytes(4)) => 'Ops']);
        $query = Operation::query("SELECT id, name, group_code FROM $users ORDER BY id", [], $left);

        $joined = $this->client->join($query, $groups, ['group_code'], [$title], $right);
        // Bigtable's key API returns the row key `key` with any column list, and the join passes it on.
        $rightColumns = $rightType === 'bigtable' ? ['key', $title] : [$title];
        self::assertSame(['id', 'name', 'group_code', ...$rightColumns], $joined->columns());
        self::assertSame([1, 2, 3, 4, 5], $joined->column('id'));
        self::assertSame(['Admins', null, 'Devs', null, 'Admins'], $joined->column($title));

        $inner = $this->client->join($query, $groups, ['group_code'], [$title], $right, 'inner', ["-$title", 'id']);
        self::assertSame([[3, 'Devs'], [1, 'Admins'], [5, 'Admins']], array_map(null, $inner->column('id'), $inner->column($title)));

        // The same join as one operation of a batch sent ahead, next to a plain read of each backend.
        $pending = $this->client->sendBatch([
            'joined' => Operation::join($query, $groups, ['group_code'], [$title], $right, 'inner'),
            'users' => Operation::get($users, 5, ['name'], $left),
        ]);
        $results = $pending->wait();
        self::assertSame([1, 3, 5], $results['joined']->column('id'));
        self::assertSame(['name' => 'eve'], $results['users']);
    }

    /**
     * groups creates the right table on $backend holding $titles (code => title) and returns its name and the name
     * of its title column.
     *
     * @param array<string, string> $titles
     * @return array{string, string}
     */
    private function groups(string $backend, string $type, array $titles): array
    {
        switch ($type) {
            case 'cassandra':
                $this->client->execute(
                    'CREATE KEYSPACE IF NOT EXISTS ' . self::KEYSPACE . " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
                    [],
                    $backend,
                );
                $table = self::KEYSPACE . '.php_groups_' . bin2hex(random_bytes(5));
                $this->client->execute("CREATE TABLE $table (code text PRIMARY KEY, title text)", [], $backend);
                $this->dropAfterTest($backend, $table);
                break;
            case 'bigtable':
                // Wide rows: `key` and one family:qualifier column per column.
                foreach ($titles as $code => $title) {
                    $this->client->put(self::BIGTABLE_TABLE, ['key' => $code, 'f:title' => $title], $backend);
                    $this->bigtableRows[] = [$backend, $code];
                }

                return [self::BIGTABLE_TABLE, 'f:title'];
            default:
                $table = $this->keyTable($backend, $type, self::GROUPS);
        }
        foreach ($titles as $code => $title) {
            $this->client->put($table, ['code' => $code, 'title' => $title], $backend);
        }

        return [$table, 'title'];
    }
}
