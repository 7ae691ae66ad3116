<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\ScanResult;
use Tether\Server\ServerException;

/**
 * KeyApiTest runs the key API (get, multiGet, scan, scanAll, put, delete) against a real tetherd, on every SQL
 * backend under test (see IntegrationTestCase), with tables made by plain DDL.
 */
final class KeyApiTest extends IntegrationTestCase
{
    private const SIMPLE = 'k VARCHAR(64) PRIMARY KEY, a TEXT, b TEXT';
    private const COMPOSITE = 'p VARCHAR(64), c VARCHAR(64), v TEXT, PRIMARY KEY (p, c)';

    /** @dataProvider backends */
    public function testPutGetDelete(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, self::SIMPLE);

        $this->client->put($t, ['k' => 'x', 'a' => 'alpha', 'b' => "b\u{e9}ta"], $backend);
        self::assertSame(['k' => 'x', 'a' => 'alpha', 'b' => "b\u{e9}ta"], $this->client->get($t, 'x', [], $backend));
        self::assertSame(['k' => 'x', 'a' => 'alpha', 'b' => "b\u{e9}ta"], $this->client->get($t, ['x'], [], $backend), 'a one-value key as a list');
        self::assertSame(['b' => "b\u{e9}ta"], $this->client->get($t, 'x', ['b'], $backend));
        self::assertNull($this->client->get($t, 'nobody', [], $backend));

        // An upsert: the columns it names change, the others keep their values.
        $this->client->put($t, ['a' => 'ALPHA', 'k' => 'x'], $backend);
        self::assertSame(['k' => 'x', 'a' => 'ALPHA', 'b' => "b\u{e9}ta"], $this->client->get($t, 'x', [], $backend));
        $this->client->put($t, ['k' => 'y', 'a' => null], $backend);
        self::assertSame(['k' => 'y', 'a' => null, 'b' => null], $this->client->get($t, 'y', [], $backend));

        self::assertSame(1, $this->client->delete($t, 'x', $backend));
        self::assertNull($this->client->get($t, 'x', [], $backend));
        self::assertSame(0, $this->client->delete($t, 'x', $backend), 'SQL backends count deleted rows');
        self::assertSame([['k' => 'y']], $this->client->query("SELECT k FROM $t", [], $backend), 'the key API writes real rows');
    }

    /** @dataProvider backends */
    public function testCompositeKeys(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, self::COMPOSITE);
        $this->client->put($t, ['p' => 'a', 'c' => 'b1', 'v' => 'one'], $backend);
        $this->client->put($t, ['p' => 'a', 'c' => 'b2', 'v' => 'two'], $backend);

        self::assertSame(['p' => 'a', 'c' => 'b1', 'v' => 'one'], $this->client->get($t, ['a', 'b1'], [], $backend));
        self::assertSame(['v' => 'two'], $this->client->get($t, ['p' => 'a', 'c' => 'b2'], ['v'], $backend), 'array keys are ignored, order counts');
        self::assertNull($this->client->get($t, ['b1', 'a'], [], $backend));
        try {
            $this->client->get($t, 'a', [], $backend);
            self::fail('a partial key is no key');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BAD_REQUEST, $e->getErrorCode());
        }
        self::assertSame(1, $this->client->delete($t, ['a', 'b1'], $backend));
        self::assertSame([['c' => 'b2']], $this->client->query("SELECT c FROM $t", [], $backend));
    }

    /** @dataProvider backends */
    public function testMultiGetReturnsRowsInKeyOrderWithNulls(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, self::SIMPLE);
        foreach (['x', 'y', 'z'] as $k) {
            $this->client->put($t, ['k' => $k, 'a' => "a-$k", 'b' => "b-$k"], $backend);
        }

        self::assertSame(
            [['k' => 'z', 'a' => 'a-z', 'b' => 'b-z'], null, ['k' => 'x', 'a' => 'a-x', 'b' => 'b-x'], null],
            $this->client->multiGet($t, ['z', 'nobody', 'x', 'none'], [], $backend),
        );
        self::assertSame([['a' => 'a-y'], ['a' => 'a-y']], $this->client->multiGet($t, ['y', ['y']], ['a'], $backend), 'a key asked twice comes twice');
        self::assertSame([], $this->client->multiGet($t, [], [], $backend));

        $c = $this->keyTable($backend, $type, self::COMPOSITE);
        $this->client->put($c, ['p' => 'a', 'c' => 'b1', 'v' => 'one'], $backend);
        self::assertSame([null, ['v' => 'one']], $this->client->multiGet($c, [['a', 'b2'], ['a', 'b1']], ['v'], $backend));
    }

    /** @dataProvider backends */
    public function testScanByPrefixAndRangeInKeyOrder(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, self::COMPOSITE);
        foreach (['b', 'a'] as $p) {
            foreach (['c5', 'c1', 'c3', 'c2', 'c4'] as $c) {
                $this->client->put($t, ['p' => $p, 'c' => $c, 'v' => "$p/$c"], $backend);
            }
        }

        $page = $this->client->scan($t, prefix: ['a'], backend: $backend);
        self::assertSame(['a/c1', 'a/c2', 'a/c3', 'a/c4', 'a/c5'], array_column($page->rows, 'v'));
        self::assertSame(['p', 'c', 'v'], array_keys($page->rows[0]));
        self::assertFalse($page->hasMore());

        $slice = $this->client->scan($t, prefix: ['b', 'c3'], columns: ['v'], backend: $backend);
        self::assertSame([['v' => 'b/c3']], $slice->rows);

        $range = $this->client->scan($t, start: ['a', 'c2'], end: ['a', 'c4'], backend: $backend);
        self::assertSame(['a/c2', 'a/c3'], array_column($range->rows, 'v'));
        $fromB = $this->client->scan($t, start: ['b'], backend: $backend);
        self::assertSame(['b/c1', 'b/c2', 'b/c3', 'b/c4', 'b/c5'], array_column($fromB->rows, 'v'));

        $all = $this->client->scan($t, backend: $backend);
        self::assertCount(10, $all);
        self::assertSame('a/c1', $all->rows[0]['v']);
        self::assertSame('b/c5', $all->rows[9]['v']);
    }

    /** @dataProvider backends */
    public function testScanPagesWithCursorsAndScanAllFollowsThem(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, self::COMPOSITE);
        for ($i = 1; $i <= 7; $i++) {
            $this->client->put($t, ['p' => 'a', 'c' => sprintf('c%02d', $i), 'v' => (string) $i], $backend);
        }
        $this->client->put($t, ['p' => 'b', 'c' => 'c01', 'v' => 'other partition'], $backend);

        $seen = [];
        $cursor = null;
        $pages = 0;
        do {
            $page = $this->client->scan($t, prefix: ['a'], limit: 3, cursor: $cursor, backend: $backend);
            self::assertInstanceOf(ScanResult::class, $page);
            self::assertLessThanOrEqual(3, count($page));
            $seen = array_merge($seen, array_column($page->rows, 'v'));
            $cursor = $page->cursor;
            self::assertLessThan(10, ++$pages, 'the cursor must make progress');
        } while ($page->hasMore());
        self::assertSame(['1', '2', '3', '4', '5', '6', '7'], $seen);
        self::assertGreaterThanOrEqual(3, $pages);

        $rows = iterator_to_array($this->client->scanAll($t, prefix: ['a'], pageSize: 2, columns: ['c'], backend: $backend));
        self::assertSame(['c01', 'c02', 'c03', 'c04', 'c05', 'c06', 'c07'], array_column($rows, 'c'));
        self::assertSame(range(0, 6), array_keys($rows));

        self::assertCount(8, iterator_to_array($this->client->scanAll($t, pageSize: 5, backend: $backend)), 'the whole table');
    }

    /** @dataProvider backends */
    public function testIntegerKeysAndValueTypes(string $backend, string $type): void
    {
        $t = $this->keyTable($backend, $type, 'id BIGINT PRIMARY KEY, name TEXT, score DOUBLE PRECISION');
        $this->client->put($t, ['id' => 17, 'name' => 'ada', 'score' => 1.5], $backend);
        $this->client->put($t, ['id' => PHP_INT_MAX, 'name' => null, 'score' => -0.25], $backend);

        self::assertSame(['id' => 17, 'name' => 'ada', 'score' => 1.5], $this->client->get($t, 17, [], $backend));
        self::assertSame(['id' => PHP_INT_MAX, 'name' => null, 'score' => -0.25], $this->client->get($t, PHP_INT_MAX, [], $backend));
        self::assertSame([['name' => 'ada'], null], $this->client->multiGet($t, [17, 18], ['name'], $backend));
        self::assertSame([17, PHP_INT_MAX], array_column($this->client->scan($t, start: [0], backend: $backend)->rows, 'id'));
    }

    /** @dataProvider backends */
    public function testUnknownTableUnknownColumnAndUnsupportedOperations(string $backend, string $type): void
    {
        $expect = function (string $code, callable $call): void {
            try {
                $call();
                self::fail("no $code");
            } catch (ServerException $e) {
                self::assertSame($code, $e->getErrorCode(), $e->getMessage());
                self::assertFalse($e->isRetryable());
            }
        };
        $t = $this->keyTable($backend, $type, self::SIMPLE);

        $expect(ServerException::UNKNOWN_TABLE, fn () => $this->client->get('tether_no_such_table', 'x', [], $backend));
        $expect(ServerException::UNKNOWN_TABLE, fn () => $this->client->put('tether_no_such_table', ['k' => 'x'], $backend));
        $expect(ServerException::BAD_REQUEST, fn () => $this->client->get($t, 'x', ['no_such_column'], $backend));
        $expect(ServerException::BAD_REQUEST, fn () => $this->client->put($t, ['a' => 'no key'], $backend));
        $expect(ServerException::UNSUPPORTED, fn () => $this->client->readRows($t, [], $backend));
        $expect(ServerException::UNSUPPORTED, fn () => $this->client->mutateRow($t, 'x', [Mutation::deleteRow()], $backend));
        $expect(ServerException::UNSUPPORTED, fn () => $this->client->increment($t, 'x', 'f', 'n', 1, $backend));
        $expect(ServerException::UNSUPPORTED, fn () => $this->client->queryPage("SELECT k FROM $t", [], 10, null, $backend));
        $this->client->ping();
    }

    public function testKeyOperationsInOneBatchAcrossBackends(): void
    {
        $tables = [];
        foreach (self::backends() as [$backend, $type]) {
            $t = $tables[$backend] = $this->keyTable($backend, $type, self::SIMPLE);
            $this->client->put($t, ['k' => 'x', 'a' => "$backend-x", 'b' => null], $backend);
            $this->client->put($t, ['k' => 'gone', 'a' => 'to delete', 'b' => null], $backend);
        }

        $ops = [];
        foreach ($tables as $backend => $t) {
            $ops["$backend:get"] = Operation::get($t, 'x', ['a'], $backend);
            $ops["$backend:missing"] = Operation::get($t, 'nobody', [], $backend);
            $ops["$backend:multi"] = Operation::multiGet($t, ['nobody', 'x'], ['k'], $backend);
            $ops["$backend:scan"] = Operation::scan($t, start: ['x'], columns: ['k'], backend: $backend);
            $ops["$backend:put"] = Operation::put($t, ['k' => 'new', 'a' => 'n'], $backend);
            $ops["$backend:delete"] = Operation::delete($t, 'gone', $backend);
            $ops["$backend:unsupported"] = Operation::increment($t, 'x', 'f', 'n', 1, $backend);
        }
        $ops['unknown table'] = Operation::get('tether_no_such_table', 1, [], array_key_first($tables));

        $results = $this->client->batch($ops, 10000);

        self::assertSame(array_keys($ops), array_keys($results));
        foreach ($tables as $backend => $t) {
            self::assertSame(['a' => "$backend-x"], $results["$backend:get"], $backend);
            self::assertNull($results["$backend:missing"], $backend);
            self::assertSame([null, ['k' => 'x']], $results["$backend:multi"], $backend);
            self::assertInstanceOf(ScanResult::class, $results["$backend:scan"]);
            self::assertSame([['k' => 'x']], $results["$backend:scan"]->rows, $backend);
            self::assertTrue($results["$backend:put"], $backend);
            self::assertSame(1, $results["$backend:delete"], $backend);
            self::assertInstanceOf(ServerException::class, $results["$backend:unsupported"]);
            self::assertSame(ServerException::UNSUPPORTED, $results["$backend:unsupported"]->getErrorCode());
            self::assertSame(['new', 'x'], array_column($this->client->scan($t, columns: ['k'], backend: $backend)->rows, 'k'), $backend);
        }
        self::assertInstanceOf(ServerException::class, $results['unknown table']);
        self::assertSame(ServerException::UNKNOWN_TABLE, $results['unknown table']->getErrorCode());
    }
}
