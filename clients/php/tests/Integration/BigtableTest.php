<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestSuite;
use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\ScanResult;
use Tether\Server\ServerException;

/**
 * BigtableTest runs the key API and Bigtable's own operations on every backend of type bigtable under test
 * (TETHER_TEST_BACKEND_TYPES "bt=bigtable"). Without one, this class has no tests at all (see suite()).
 *
 * The table must exist: TABLE, with column families `f` and `c` (on the emulator, the test command creates it,
 * e.g. with the backend's dsn option table=php_test:f,c). Each test writes rows under its own random key prefix
 * and deletes them afterwards.
 */
final class BigtableTest extends IntegrationTestCase
{
    private const TABLE = 'php_test';

    /** @var list<array{string, string}> [backend, row key] to delete in tearDown */
    private array $rows = [];
    private string $prefix = '';

    public static function suite(string $className): TestSuite
    {
        return self::suiteForBackendsOf($className, 'bigtable');
    }

    /** @return iterable<string, array{string, string}> */
    public static function bigtableBackends(): iterable
    {
        return self::backendsOfType('bigtable');
    }

    protected function setUp(): void
    {
        parent::setUp();
        $this->prefix = 'php-' . bin2hex(random_bytes(4)) . '#';
    }

    protected function tearDown(): void
    {
        foreach ($this->rows as [$backend, $key]) {
            try {
                $this->client->mutateRow(self::TABLE, $key, [Mutation::deleteRow()], $backend);
            } catch (\Throwable) {
                // best effort; the keys are unique anyway
            }
        }
        $this->rows = [];
        parent::tearDown();
    }

    /** @dataProvider bigtableBackends */
    public function testMutateRowThenReadRowsReturnsLongRows(string $backend): void
    {
        $key = $this->row($backend, 'user');
        $this->requireTable($backend, fn () => $this->client->mutateRow(self::TABLE, $key, [
            Mutation::set('f', 'name', 'ada', 1_000_000_000),
            Mutation::set('f', 'name', 'ada lovelace', 2_000_000_000),
            Mutation::set('f', 'city', "\x00\xffbytes"),
            Mutation::set('c', 'n', pack('J', 5)),
        ], $backend));

        $page = $this->client->readRows(self::TABLE, ['keys' => [$key]], $backend);
        self::assertInstanceOf(ScanResult::class, $page);
        self::assertFalse($page->hasMore());
        $cells = array_map(static fn (array $r): array => [$r['family'], $r['qualifier'], $r['value']], $page->rows);
        self::assertSame([
            ['c', 'n', pack('J', 5)],
            ['f', 'city', "\x00\xffbytes"],
            ['f', 'name', 'ada lovelace'],
            ['f', 'name', 'ada'],
        ], $cells, 'family, qualifier, then newest first');
        self::assertSame(['key', 'family', 'qualifier', 'timestamp', 'value'], array_keys($page->rows[0]));
        self::assertSame($key, $page->rows[0]['key']);
        self::assertSame(2_000_000_000, $page->rows[2]['timestamp']);
        self::assertSame(1_000_000_000, $page->rows[3]['timestamp']);

        $latest = $this->client->readRows(self::TABLE, ['keys' => [$key], 'families' => ['f'], 'latest' => true], $backend);
        self::assertSame([['city', "\x00\xffbytes"], ['name', 'ada lovelace']], array_map(static fn (array $r): array => [$r['qualifier'], $r['value']], $latest->rows));
        $column = $this->client->readRows(self::TABLE, ['keys' => [$key, $this->prefix . 'nobody'], 'columns' => ['f:city']], $backend);
        self::assertSame(["\x00\xffbytes"], array_column($column->rows, 'value'));

        $this->client->mutateRow(self::TABLE, $key, [Mutation::deleteCells('f', 'name'), Mutation::deleteFamily('c')], $backend);
        self::assertSame(['f:city'], array_map(static fn (array $r): string => "{$r['family']}:{$r['qualifier']}", $this->client->readRows(self::TABLE, ['keys' => [$key]], $backend)->rows));
        $this->client->mutateRow(self::TABLE, $key, [Mutation::deleteRow()], $backend);
        self::assertSame([], $this->client->readRows(self::TABLE, ['keys' => [$key]], $backend)->rows);
    }

    /** @dataProvider bigtableBackends */
    public function testKeyApiSeesWideRows(string $backend): void
    {
        $key = $this->row($backend, 'wide');
        $this->requireTable($backend, fn () => $this->client->put(self::TABLE, ['key' => $key, 'f:name' => 'ada', 'f:city' => 'paris'], $backend));

        self::assertSame(['key' => $key, 'f:city' => 'paris', 'f:name' => 'ada'], $this->client->get(self::TABLE, $key, [], $backend));
        self::assertSame(['key' => $key, 'f:name' => 'ada'], $this->client->get(self::TABLE, $key, ['f:name'], $backend));
        self::assertNull($this->client->get(self::TABLE, $this->prefix . 'nobody', [], $backend));

        $other = $this->row($backend, 'wide2');
        $this->client->put(self::TABLE, ['key' => $other, 'f:name' => 'bob'], $backend);
        $rows = $this->client->multiGet(self::TABLE, [$other, $this->prefix . 'nobody', $key], ['f:name'], $backend);
        self::assertSame([['key' => $other, 'f:name' => 'bob'], null, ['key' => $key, 'f:name' => 'ada']], $rows);

        $scan = $this->client->scan(self::TABLE, prefix: [$this->prefix], columns: ['f:name'], backend: $backend);
        self::assertSame([$key, $other], array_column($scan->rows, 'key'));

        self::assertSame(1, $this->client->delete(self::TABLE, $key, $backend));
        self::assertNull($this->client->get(self::TABLE, $key, [], $backend));
    }

    /** @dataProvider bigtableBackends */
    public function testIncrementReturnsTheNewValue(string $backend): void
    {
        $key = $this->row($backend, 'counter');
        self::assertSame(1, $this->requireTable($backend, fn () => $this->client->increment(self::TABLE, $key, 'c', 'views', 1, $backend)));
        self::assertSame(6, $this->client->increment(self::TABLE, $key, 'c', 'views', 5, $backend));
        self::assertSame(4, $this->client->increment(self::TABLE, $key, 'c', 'views', -2, $backend));
        self::assertSame(5, $this->client->increment(self::TABLE, $key, 'c', 'views', backend: $backend), 'delta defaults to 1');
        $cell = $this->client->readRows(self::TABLE, ['keys' => [$key], 'columns' => ['c:views'], 'latest' => true], $backend)->rows;
        self::assertSame(pack('J', 5), $cell[0]['value'], 'a 64-bit big-endian counter');
    }

    /** @dataProvider bigtableBackends */
    public function testCheckAndMutateAppliesOneBranch(string $backend): void
    {
        $key = $this->row($backend, 'lock');
        $this->requireTable($backend, fn () => $this->client->mutateRow(self::TABLE, $key, [Mutation::set('f', 'owner', 'worker-1')], $backend));

        self::assertTrue($this->client->checkAndMutate(self::TABLE, $key, 'f', 'owner', 'worker-1',
            [Mutation::set('f', 'state', 'held')], [Mutation::set('f', 'state', 'refused')], $backend));
        self::assertSame('held', $this->client->get(self::TABLE, $key, ['f:state'], $backend)['f:state']);

        self::assertFalse($this->client->checkAndMutate(self::TABLE, $key, 'f', 'owner', 'worker-2',
            [Mutation::set('f', 'state', 'stolen')], [Mutation::set('f', 'state', 'refused')], $backend));
        self::assertSame('refused', $this->client->get(self::TABLE, $key, ['f:state'], $backend)['f:state']);

        self::assertTrue($this->client->checkAndMutate(self::TABLE, $key, 'f', 'owner', null, [Mutation::deleteCells('f', 'state')], [], $backend), 'any value');
        self::assertFalse($this->client->checkAndMutate(self::TABLE, $key, 'c', null, null, [Mutation::deleteRow()], [], $backend), 'no cell in family c');
        self::assertTrue($this->client->checkAndMutate(self::TABLE, $key, 'f', null, null, [Mutation::deleteRow()], [], $backend), 'any column of family f');
        self::assertNull($this->client->get(self::TABLE, $key, [], $backend));
    }

    /** @dataProvider bigtableBackends */
    public function testReadRowsByPrefixPagesWithCursors(string $backend): void
    {
        $keys = $ops = [];
        for ($i = 1; $i <= 5; $i++) {
            $keys[] = $key = $this->row($backend, sprintf('page%02d', $i));
            $ops[] = Operation::mutateRow(self::TABLE, $key, [Mutation::set('f', 'i', (string) $i)], $backend);
        }
        $this->requireTable($backend, fn () => $this->client->readRows(self::TABLE, ['keys' => $keys], $backend));
        self::assertSame(array_fill(0, 5, true), $this->client->batch($ops));

        $seen = [];
        $cursor = null;
        $pages = 0;
        do {
            $page = $this->client->readRows(self::TABLE, ['prefix' => $this->prefix . 'page', 'limit' => 2, 'cursor' => $cursor], $backend);
            $seen = array_merge($seen, array_column($page->rows, 'key'));
            $cursor = $page->cursor;
            self::assertLessThan(10, ++$pages);
        } while ($page->hasMore());
        self::assertSame($keys, $seen);

        $range = $this->client->readRows(self::TABLE, ['start' => $keys[1], 'end' => $keys[3]], $backend);
        self::assertSame([$keys[1], $keys[2]], array_column($range->rows, 'key'));
        self::assertSame($keys, array_column(iterator_to_array($this->client->scanAll(self::TABLE, prefix: [$this->prefix . 'page'], pageSize: 2, backend: $backend)), 'key'));
    }

    /** @dataProvider bigtableBackends */
    public function testBatchMixesBigtableOperations(string $backend): void
    {
        $key = $this->row($backend, 'batch');
        $this->requireTable($backend, fn () => $this->client->mutateRow(self::TABLE, $key, [Mutation::set('f', 'a', '1')], $backend));

        $results = $this->client->batch([
            'get' => Operation::get(self::TABLE, $key, [], $backend),
            'cells' => Operation::readRows(self::TABLE, ['keys' => [$key]], $backend),
            'counter' => Operation::increment(self::TABLE, $key, 'c', 'n', 7, $backend),
            'check' => Operation::checkAndMutate(self::TABLE, $key, 'f', 'a', '2', [Mutation::deleteRow()], [], $backend),
            'sql' => Operation::query('SELECT 1', [], $backend),
        ]);

        self::assertSame(['key' => $key, 'f:a' => '1'], $results['get']);
        self::assertSame(['1'], array_column($results['cells']->rows, 'value'));
        self::assertSame(7, $results['counter']);
        self::assertFalse($results['check']);
        self::assertInstanceOf(ServerException::class, $results['sql']);
        self::assertSame(ServerException::UNSUPPORTED, $results['sql']->getErrorCode());
    }

    /** row returns a fresh row key of this test, deleted in tearDown. */
    private function row(string $backend, string $name): string
    {
        $key = $this->prefix . $name;
        $this->rows[] = [$backend, $key];

        return $key;
    }

    /**
     * requireTable runs the test's first call on the table, failing with a clear message when the table does not
     * exist.
     *
     * @template T
     * @param callable(): T $call
     * @return T
     */
    private function requireTable(string $backend, callable $call): mixed
    {
        try {
            return $call();
        } catch (ServerException $e) {
            if ($e->getErrorCode() === ServerException::UNKNOWN_TABLE || $e->getBackendCode() === 'NotFound') {
                self::fail(sprintf(
                    'Bigtable table %s with column families f and c must exist on backend %s (the test command creates it in the emulator): %s',
                    self::TABLE,
                    $backend,
                    $e->getMessage(),
                ));
            }
            throw $e;
        }
    }
}
