<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestSuite;
use Tether\Batch\Operation;
use Tether\ScanResult;
use Tether\Server\ServerException;

/**
 * CassandraTest runs the key API, paged CQL and the Thrift-era reads of the seed experiment on every backend of
 * type cassandra under test (TETHER_TEST_BACKEND_TYPES "cass=cassandra"). Without one, this class has no tests at
 * all (see suite()).
 *
 * Tables are created through tetherd with CQL, in keyspace KEYSPACE (created when missing), with unique names,
 * and dropped after each test. c1 and s1 are the CQL forms of a Thrift column family and super column family
 * (docs/cassandra.md): (key, column1, value) and (key, super_column, column, value).
 */
final class CassandraTest extends IntegrationTestCase
{
    private const KEYSPACE = 'tether_test';
    private const C1 = 'key text, column1 text, value blob, PRIMARY KEY (key, column1)';
    private const S1 = 'key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column)';

    public static function suite(string $className): TestSuite
    {
        return self::suiteForBackendsOf($className, 'cassandra');
    }

    /** @return iterable<string, array{string, string}> */
    public static function cassandraBackends(): iterable
    {
        return self::backendsOfType('cassandra');
    }

    /** @dataProvider cassandraBackends */
    public function testThriftEraReadsAreScans(string $backend): void
    {
        $c1 = $this->cqlTable($backend, 'c1', self::C1);
        $s1 = $this->cqlTable($backend, 's1', self::S1);
        foreach ([['a', 'z', 'v3'], ['a', 'x', 'v1'], ['a', 'y', "\x00\xff"], ['b', 'x', 'other row']] as [$key, $column, $value]) {
            $this->client->put($c1, ['key' => $key, 'column1' => $column, 'value' => $value], $backend);
        }
        foreach ([['a', 'b1', 'c2', 'v2'], ['a', 'b1', 'c1', 'v1'], ['a', 'b2', 'c1', 'v3'], ['b', 'b1', 'c1', 'other']] as $row) {
            $this->client->execute("INSERT INTO $s1 (key, super_column, column, value) VALUES (?, ?, ?, ?)", $row, $backend);
        }

        // phpcassa get('a') on c1: the whole row, in column order.
        $row = $this->client->scan($c1, prefix: ['a'], backend: $backend);
        self::assertSame([
            ['key' => 'a', 'column1' => 'x', 'value' => 'v1'],
            ['key' => 'a', 'column1' => 'y', 'value' => "\x00\xff"],
            ['key' => 'a', 'column1' => 'z', 'value' => 'v3'],
        ], $row->rows);
        self::assertFalse($row->hasMore());

        // get_super_column('a', 'b1') on s1: the slice under one super column.
        $slice = $this->client->scan($s1, prefix: ['a', 'b1'], columns: ['column', 'value'], backend: $backend);
        self::assertSame([['column' => 'c1', 'value' => 'v1'], ['column' => 'c2', 'value' => 'v2']], $slice->rows);
        self::assertSame(['c1', 'c2', 'c1'], array_column($this->client->scan($s1, prefix: ['a'], backend: $backend)->rows, 'column'));

        $range = $this->client->scan($s1, start: ['a', 'b1', 'c2'], end: ['a', 'b2'], backend: $backend);
        self::assertSame([['a', 'b1', 'c2', 'v2']], array_map('array_values', $range->rows));
    }

    /** @dataProvider cassandraBackends */
    public function testGetMultiGetPutAndDeleteByFullKey(string $backend): void
    {
        $s1 = $this->cqlTable($backend, 's1', self::S1);
        $this->client->put($s1, ['key' => 'a', 'super_column' => 'b1', 'column' => 'c1', 'value' => 'v1'], $backend);
        $this->client->put($s1, ['value' => 'v2', 'column' => 'c2', 'super_column' => 'b1', 'key' => 'a'], $backend);

        self::assertSame(['key' => 'a', 'super_column' => 'b1', 'column' => 'c2', 'value' => 'v2'], $this->client->get($s1, ['a', 'b1', 'c2'], [], $backend));
        self::assertSame(['value' => 'v1'], $this->client->get($s1, ['a', 'b1', 'c1'], ['value'], $backend));
        self::assertNull($this->client->get($s1, ['a', 'b1', 'c3'], [], $backend));
        self::assertSame(
            [['value' => 'v2'], null, ['value' => 'v1']],
            $this->client->multiGet($s1, [['a', 'b1', 'c2'], ['z', 'b1', 'c1'], ['a', 'b1', 'c1']], ['value'], $backend),
        );

        $this->client->put($s1, ['key' => 'a', 'super_column' => 'b1', 'column' => 'c1', 'value' => 'changed'], $backend);
        self::assertSame('changed', $this->client->get($s1, ['a', 'b1', 'c1'], ['value'], $backend)['value']);
        self::assertSame(1, $this->client->delete($s1, ['a', 'b1', 'c1'], $backend));
        self::assertNull($this->client->get($s1, ['a', 'b1', 'c1'], [], $backend));
    }

    /** @dataProvider cassandraBackends */
    public function testScanAndCqlQueriesPageWithCursors(string $backend): void
    {
        $c1 = $this->cqlTable($backend, 'c1', self::C1);
        $ops = [];
        for ($i = 1; $i <= 7; $i++) {
            $ops[] = Operation::put($c1, ['key' => 'p', 'column1' => sprintf('c%02d', $i), 'value' => (string) $i], $backend);
        }
        self::assertSame(array_fill(0, 7, true), $this->client->batch($ops));

        $seen = [];
        $cursor = null;
        $pages = 0;
        do {
            $page = $this->client->scan($c1, prefix: ['p'], limit: 3, cursor: $cursor, backend: $backend);
            $seen = array_merge($seen, array_column($page->rows, 'value'));
            $cursor = $page->cursor;
            self::assertLessThan(10, ++$pages, 'the cursor must make progress');
        } while ($page->hasMore());
        self::assertSame(['1', '2', '3', '4', '5', '6', '7'], $seen);
        self::assertSame(['c01', 'c02', 'c03', 'c04', 'c05', 'c06', 'c07'], array_column(iterator_to_array($this->client->scanAll($c1, prefix: ['p'], pageSize: 2, backend: $backend)), 'column1'));

        $columns = [];
        $cursor = null;
        $pages = 0;
        do {
            $page = $this->client->queryPage("SELECT column1 FROM $c1 WHERE key = ?", ['p'], 3, $cursor, $backend);
            self::assertInstanceOf(ScanResult::class, $page);
            self::assertLessThanOrEqual(3, count($page));
            $columns = array_merge($columns, array_column($page->rows, 'column1'));
            $cursor = $page->cursor;
            self::assertLessThan(10, ++$pages, 'the cursor must make progress');
        } while ($page->hasMore());
        self::assertSame(['c01', 'c02', 'c03', 'c04', 'c05', 'c06', 'c07'], $columns);
        self::assertSame([['n' => 7]], $this->client->query("SELECT count(*) AS n FROM $c1 WHERE key = ?", ['p'], $backend));
    }

    /** @dataProvider cassandraBackends */
    public function testWhatCassandraDoesNotOffer(string $backend): void
    {
        $c1 = $this->cqlTable($backend, 'c1', self::C1);
        foreach ([
            'a transaction' => fn () => $this->client->begin($backend),
            'readRows' => fn () => $this->client->readRows($c1, [], $backend),
            'a scan across partitions' => fn () => $this->client->scan($c1, backend: $backend),
        ] as $what => $call) {
            try {
                $call();
                self::fail("$what did not fail");
            } catch (ServerException $e) {
                self::assertSame(ServerException::UNSUPPORTED, $e->getErrorCode(), "$what: {$e->getMessage()}");
            }
        }
        try {
            $this->client->get(self::KEYSPACE . '.tether_no_such_table', 'a', [], $backend);
            self::fail('no unknown_table');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_TABLE, $e->getErrorCode());
        }
    }

    /**
     * One round trip reads a Cassandra slice, a row from every SQL backend under test and a row from every Bigtable
     * backend under test, run in parallel by tetherd.
     *
     * @dataProvider cassandraBackends
     */
    public function testOneBatchReadsCassandraSqlAndBigtable(string $backend): void
    {
        $c1 = $this->cqlTable($backend, 'c1', self::C1);
        $this->client->put($c1, ['key' => 'a', 'column1' => 'x', 'value' => 'v1'], $backend);

        $ops = ['slice' => Operation::scan($c1, prefix: ['a'], columns: ['column1', 'value'], backend: $backend)];
        foreach (self::backends() as [$sql, $type]) {
            $table = $this->keyTable($sql, $type, 'k VARCHAR(64) PRIMARY KEY, a TEXT');
            $this->client->put($table, ['k' => 'user-1', 'a' => "row of $sql"], $sql);
            $ops[$sql] = Operation::get($table, 'user-1', backend: $sql);
        }
        $bigtables = [];
        foreach (self::backendsOfType('bigtable') as [$bt]) {
            $key = 'batch-' . bin2hex(random_bytes(6));
            $this->client->put('php_test', ['key' => $key, 'f:name' => "row of $bt"], $bt);
            $ops[$bt] = Operation::get('php_test', $key, ['f:name'], $bt);
            $bigtables[$bt] = $key;
        }
        $results = $this->client->batch($ops);

        self::assertSame([['column1' => 'x', 'value' => 'v1']], $results['slice']->rows);
        foreach (self::backends() as [$sql]) {
            self::assertSame(['k' => 'user-1', 'a' => "row of $sql"], $results[$sql]);
        }
        foreach ($bigtables as $bt => $key) {
            self::assertSame(['key' => $key, 'f:name' => "row of $bt"], $results[$bt]);
        }
        self::assertGreaterThan(1, count($ops), 'the batch should span more than one backend');
    }

    /**
     * cqlTable creates KEYSPACE.php_$name_<random> with $columns on $backend (and the keyspace when missing),
     * dropped after the test, and returns its qualified name.
     */
    private function cqlTable(string $backend, string $name, string $columns): string
    {
        $this->client->execute(
            'CREATE KEYSPACE IF NOT EXISTS ' . self::KEYSPACE . " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            [],
            $backend,
        );
        $table = self::KEYSPACE . ".php_{$name}_" . bin2hex(random_bytes(5));
        $this->client->execute("CREATE TABLE $table ($columns)", [], $backend);
        $this->dropAfterTest($backend, $table);

        return $table;
    }
}
