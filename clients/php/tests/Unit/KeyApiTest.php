<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\Connection\UnknownOutcomeException;
use Tether\ExecResult;
use Tether\Exception\LogicException;
use Tether\ScanResult;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * KeyApiTest drives the key API (get, multiGet, scan, scanAll, put, delete), queryPage and the Bigtable operations
 * against a scripted fake tetherd: the request maps that go on the wire, and what the replies become.
 */
final class KeyApiTest extends FakeServerTestCase
{
    /** A cursor as tetherd sends it: opaque bytes, not UTF-8. */
    private const CURSOR = "\x92\xa1a\xa2b1\xff\x00";

    public function testGetSendsTheKeyAsAListAndReturnsTheRowOrNull(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['k', 'a'], 'rows' => [['x', 'alpha']]]],
            ['recv'], ['reply', ['columns' => ['k', 'a'], 'rows' => []]],
            ['recv'], ['reply', ['columns' => ['v'], 'rows' => [['slice']]]],
        ]]);
        $client = $this->client($server);

        self::assertSame(['k' => 'x', 'a' => 'alpha'], $client->get('t', 'x'));
        self::assertNull($client->get('t', 'missing', ['k', 'a'], 'maria', 50));
        self::assertSame(['v' => 'slice'], $client->get('s1', ['p' => 'a', 'c' => 'b1'], ['v']));

        self::assertSame([
            ['id' => 1, 'op' => 'get', 'table' => 't', 'key' => ['x']],
            ['id' => 2, 'op' => 'get', 'backend' => 'maria', 'timeout_ms' => 50, 'table' => 't', 'key' => ['missing'], 'columns' => ['k', 'a']],
            ['id' => 3, 'op' => 'get', 'table' => 's1', 'key' => ['a', 'b1'], 'columns' => ['v']],
        ], self::maps($server));
    }

    public function testReadsAndJoinsAskForTheCacheWithATtl(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['a'], 'rows' => [['x']]]],
            ['recv'], ['reply', ['columns' => ['a'], 'rows' => [['x'], null]]],
            ['recv'], ['reply', ['columns' => ['id', 'bio'], 'count' => 0, 'data' => [[], []]]],
        ]]);
        $client = $this->client($server);

        $client->get('t', 1, [], null, null, 5000);
        $client->multiGet('t', [1, 2], [], null, null, 5000);
        $client->join(Operation::query('SELECT id FROM users'), 'profiles', ['id'], ['bio'], 'other', 'left', [], null, 5000);

        $maps = self::maps($server);
        self::assertSame([5000, 5000, 5000], array_column($maps, 'cache_ttl_ms'), 'each read asks for the cache');
        self::assertArrayNotHasKey('cache_ttl_ms', $maps[2]['left'], 'the join is cached whole, not its left side');
    }

    public function testMultiGetKeepsRequestOrderWithNullForMissingKeys(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['id', 'name'], 'rows' => [[1, 'ada'], null, [3, 'cy']]]],
        ]]);

        $rows = $this->client($server)->multiGet('users', [1, 2, [3]], ['id', 'name'], 'pg');

        self::assertSame([['id' => 1, 'name' => 'ada'], null, ['id' => 3, 'name' => 'cy']], $rows);
        self::assertSame(
            ['id' => 1, 'op' => 'multi_get', 'backend' => 'pg', 'table' => 'users', 'keys' => [[1], [2], [3]], 'columns' => ['id', 'name']],
            self::maps($server)[0],
        );
    }

    public function testMultiGetOfNoKeysNeedsNoRoundTrip(): void
    {
        $server = $this->serve([[['recv'], ['reply', []]]]);
        $client = $this->client($server);
        self::assertSame([], $client->multiGet('users', []));
        $client->ping();
        self::assertSame(['ping'], array_column(self::maps($server), 'op'));
    }

    public function testMultiGetWithAnotherNumberOfRowsIsMalformed(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['id'], 'rows' => [[1]]]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->client($server)->multiGet('users', [1, 2]);
    }

    public function testScanReturnsAPageAndSendsTheCursorBackUnchanged(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['key', 'super_column', 'column', 'value'], 'rows' => [['a', 'b1', 'c1', 'v1']], 'cursor' => self::CURSOR]],
            ['recv'], ['reply', ['columns' => ['key', 'super_column', 'column', 'value'], 'rows' => [['a', 'b1', 'c2', 'v2']]]],
        ]]);
        $client = $this->client($server);

        $first = $client->scan('s1', prefix: ['a', 'b1'], limit: 1, backend: 'cass');
        self::assertInstanceOf(ScanResult::class, $first);
        self::assertSame([['key' => 'a', 'super_column' => 'b1', 'column' => 'c1', 'value' => 'v1']], $first->rows);
        self::assertSame(self::CURSOR, $first->cursor);
        self::assertTrue($first->hasMore());
        self::assertCount(1, $first);
        self::assertSame($first->rows, iterator_to_array($first));

        $second = $client->scan('s1', prefix: ['a', 'b1'], limit: 1, cursor: $first->cursor, backend: 'cass');
        self::assertSame('c2', $second->rows[0]['column']);
        self::assertNull($second->cursor);
        self::assertFalse($second->hasMore());

        $requests = $server->requests();
        self::assertSame(
            ['id' => 2, 'op' => 'scan', 'backend' => 'cass', 'table' => 's1', 'prefix' => ['a', 'b1'], 'limit' => 1, 'cursor' => self::CURSOR],
            $requests[1]['map'],
        );
        self::assertStringContainsString("\xa6cursor\xa8" . self::CURSOR, $requests[1]['raw'], 'the cursor goes back as str with its exact bytes');
    }

    public function testScanRangeAndColumnsInSpecKeyOrder(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['id'], 'rows' => []]]]]);
        $page = $this->client($server)->scan('users', start: [100], end: [200], limit: 50, columns: ['id'], timeoutMs: 300);

        self::assertSame([], $page->rows);
        self::assertFalse($page->hasMore());
        $map = self::maps($server)[0];
        self::assertSame(['id' => 1, 'op' => 'scan', 'timeout_ms' => 300, 'table' => 'users', 'columns' => ['id'], 'start' => [100], 'end' => [200], 'limit' => 50], $map);
        self::assertSame(['id', 'op', 'timeout_ms', 'table', 'columns', 'start', 'end', 'limit'], array_keys($map));
    }

    public function testScanAllFollowsCursorsAcrossPages(): void
    {
        $columns = ['k', 'v'];
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => $columns, 'rows' => [['a', 1], ['b', 2]], 'cursor' => "c1\xff"]],
            ['recv'], ['reply', ['columns' => $columns, 'rows' => [], 'cursor' => "c2\x00"]],
            ['recv'], ['reply', ['columns' => $columns, 'rows' => [['c', 3]]]],
        ]]);

        $generator = $this->client($server)->scanAll('t', prefix: ['p'], pageSize: 2, backend: 'main');
        self::assertInstanceOf(\Generator::class, $generator);
        self::assertSame([], $server->requests(), 'nothing is sent before the first row is asked for');
        $rows = iterator_to_array($generator);

        self::assertSame([['k' => 'a', 'v' => 1], ['k' => 'b', 'v' => 2], ['k' => 'c', 'v' => 3]], $rows);
        $maps = self::maps($server);
        self::assertCount(3, $maps);
        self::assertArrayNotHasKey('cursor', $maps[0]);
        self::assertSame("c1\xff", $maps[1]['cursor']);
        self::assertSame("c2\x00", $maps[2]['cursor'], 'an empty page with a cursor is not the end');
        foreach ($maps as $map) {
            self::assertSame(['p'], $map['prefix']);
            self::assertSame(2, $map['limit']);
            self::assertSame('main', $map['backend']);
        }
    }

    public function testScanAllThrowsAnErrorWhileIterating(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['k'], 'rows' => [['a']], 'cursor' => 'next']],
            ['recv'], ['reply', ['error' => ['code' => 'unknown_table', 'message' => 'no table "t"', 'retry' => false]]],
        ]]);
        $seen = [];
        try {
            foreach ($this->client($server)->scanAll('t') as $row) {
                $seen[] = $row['k'];
            }
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_TABLE, $e->getErrorCode());
        }
        self::assertSame(['a'], $seen);
    }

    public function testPutSendsColumnsSortedByNameAndReturnsNothing(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]]]]);
        $this->client($server, ['backend' => 'maria'])->put('users', ['name' => 'ada', 'id' => 42, 'score' => 1.5, 'note' => null]);

        $request = $server->requests()[0];
        self::assertSame(['id' => 1, 'op' => 'put', 'backend' => 'maria', 'table' => 'users', 'row' => ['id' => 42, 'name' => 'ada', 'note' => null, 'score' => 1.5]], $request['map']);
        self::assertSame(['id', 'name', 'note', 'score'], array_keys($request['map']['row']));
    }

    public function testPutOfAnEmptyRowIsALogicError(): void
    {
        $client = $this->client($this->serve([[]]));
        $this->expectException(LogicException::class);
        $client->put('users', []);
    }

    public function testDeleteReturnsAffectedRows(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
        ]]);
        $client = $this->client($server);

        self::assertSame(1, $client->delete('users', 42));
        self::assertSame(0, $client->delete('pairs', ['a', 'b'], 'pg'));
        self::assertSame([
            ['id' => 1, 'op' => 'delete', 'table' => 'users', 'key' => [42]],
            ['id' => 2, 'op' => 'delete', 'backend' => 'pg', 'table' => 'pairs', 'key' => ['a', 'b']],
        ], self::maps($server));
    }

    public function testQueryPageSendsLimitAndCursorAndReturnsAPage(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['k'], 'rows' => [['a'], ['b']], 'cursor' => self::CURSOR]],
            ['recv'], ['reply', ['columns' => ['k'], 'rows' => [['c']]]],
        ]]);
        $client = $this->client($server);

        $first = $client->queryPage('SELECT k FROM test.c1 WHERE key = ?', ['a'], 2, null, 'cass');
        $second = $client->queryPage('SELECT k FROM test.c1 WHERE key = ?', ['a'], 2, $first->cursor, 'cass', 500);

        self::assertSame([['k' => 'a'], ['k' => 'b']], $first->rows);
        self::assertTrue($first->hasMore());
        self::assertSame([['k' => 'c']], $second->rows);
        self::assertFalse($second->hasMore());
        self::assertSame([
            ['id' => 1, 'op' => 'query', 'backend' => 'cass', 'sql' => 'SELECT k FROM test.c1 WHERE key = ?', 'params' => ['a'], 'limit' => 2],
            ['id' => 2, 'op' => 'query', 'backend' => 'cass', 'sql' => 'SELECT k FROM test.c1 WHERE key = ?', 'params' => ['a'], 'timeout_ms' => 500, 'limit' => 2, 'cursor' => self::CURSOR],
        ], self::maps($server));
    }

    public function testQueryPageNeedsAPositivePageSize(): void
    {
        $client = $this->client($this->serve([[]]));
        $this->expectException(LogicException::class);
        $client->queryPage('SELECT 1', [], 0);
    }

    public function testReadRowsMapsOptionsToTheWireAndReturnsLongRows(): void
    {
        $cells = [['user#42#1', 'f', 'name', 1700000000000000, 'ada'], ['user#42#2', 'f', 'name', 1700000000001000, 'bob']];
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['key', 'family', 'qualifier', 'timestamp', 'value'], 'rows' => $cells, 'cursor' => 'user#42#2']],
            ['recv'], ['reply', ['columns' => ['key', 'family', 'qualifier', 'timestamp', 'value'], 'rows' => []]],
        ]]);
        $client = $this->client($server);

        $page = $client->readRows('events', ['prefix' => 'user#42#', 'limit' => 2, 'families' => ['f'], 'latest' => true], 'bt');
        $client->readRows('events', ['keys' => ['a', 'b'], 'columns' => ['f:name'], 'cursor' => $page->cursor, 'latest' => false], 'bt');

        self::assertSame(['key' => 'user#42#1', 'family' => 'f', 'qualifier' => 'name', 'timestamp' => 1700000000000000, 'value' => 'ada'], $page->rows[0]);
        self::assertSame('user#42#2', $page->cursor);
        self::assertSame([
            ['id' => 1, 'op' => 'read_rows', 'backend' => 'bt', 'table' => 'events', 'prefix' => ['user#42#'], 'limit' => 2, 'families' => ['f'], 'latest' => true],
            ['id' => 2, 'op' => 'read_rows', 'backend' => 'bt', 'table' => 'events', 'keys' => [['a'], ['b']], 'columns' => ['f:name'], 'cursor' => 'user#42#2'],
        ], self::maps($server));
    }

    /**
     * @dataProvider invalidReadRowsOptions
     * @param array<string, mixed> $options
     */
    public function testReadRowsRejectsInvalidOptions(array $options, string $message): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage($message);
        Operation::readRows('events', $options);
    }

    /** @return iterable<string, array{array<string, mixed>, string}> */
    public static function invalidReadRowsOptions(): iterable
    {
        yield 'unknown option' => [['prefx' => 'a'], 'unknown option prefx'];
        yield 'prefix as a list' => [['prefix' => ['a']], 'option prefix'];
        yield 'keys of ints' => [['keys' => [1]], 'option keys'];
        yield 'negative limit' => [['limit' => -1], 'option limit'];
        yield 'latest not bool' => [['latest' => 1], 'option latest'];
    }

    public function testMutateRowIncrementAndCheckAndMutate(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['recv'], ['reply', ['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['page#home', 'c', 'views', 7]]]],
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
        ]]);
        $client = $this->client($server, ['backend' => 'bt']);

        $client->mutateRow('events', 'user#42', [
            Mutation::set('f', 'name', 'ada'),
            Mutation::set('f', 'seen', '2026', 1700000000000000),
            Mutation::deleteCells('f', 'old'),
            Mutation::deleteFamily('tmp'),
            Mutation::deleteRow(),
        ]);
        self::assertSame(7, $client->increment('counters', 'page#home', 'c', 'views', 3));
        self::assertTrue($client->checkAndMutate('locks', 'job#7', 'l', 'owner', 'worker-1', [Mutation::deleteRow()], [Mutation::set('l', 'seen', '1')]));
        self::assertFalse($client->checkAndMutate('locks', 'job#8', 'l', null, null, [Mutation::deleteRow()]));

        self::assertSame([
            ['id' => 1, 'op' => 'mutate_row', 'backend' => 'bt', 'table' => 'events', 'key' => ['user#42'], 'mutations' => [
                ['op' => 'set', 'family' => 'f', 'qualifier' => 'name', 'value' => 'ada'],
                ['op' => 'set', 'family' => 'f', 'qualifier' => 'seen', 'value' => '2026', 'ts' => 1700000000000000],
                ['op' => 'delete_cells', 'family' => 'f', 'qualifier' => 'old'],
                ['op' => 'delete_family', 'family' => 'tmp'],
                ['op' => 'delete_row'],
            ]],
            ['id' => 2, 'op' => 'increment', 'backend' => 'bt', 'table' => 'counters', 'key' => ['page#home'], 'family' => 'c', 'qualifier' => 'views', 'delta' => 3],
            ['id' => 3, 'op' => 'check_and_mutate', 'backend' => 'bt', 'table' => 'locks', 'key' => ['job#7'],
                'if_true' => [['op' => 'delete_row']], 'if_false' => [['op' => 'set', 'family' => 'l', 'qualifier' => 'seen', 'value' => '1']],
                'family' => 'l', 'qualifier' => 'owner', 'value' => 'worker-1'],
            ['id' => 4, 'op' => 'check_and_mutate', 'backend' => 'bt', 'table' => 'locks', 'key' => ['job#8'], 'if_true' => [['op' => 'delete_row']], 'family' => 'l'],
        ], self::maps($server));
    }

    public function testMutateRowRejectsSomethingElseThanMutations(): void
    {
        $client = $this->client($this->serve([[]]));
        try {
            $client->mutateRow('events', 'k', []);
            self::fail('no exception for no mutations');
        } catch (LogicException $e) {
            self::assertStringContainsString('at least one', $e->getMessage());
        }
        $this->expectException(LogicException::class);
        $client->mutateRow('events', 'k', [['op' => 'delete_row']]);
    }

    public function testIncrementReplyWithoutAnIntegerValueIsMalformed(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => []]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->client($server)->increment('counters', 'k', 'c', 'n');
    }

    public function testUnsupportedAndUnknownTableAreServerExceptions(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['error' => ['code' => 'unsupported', 'message' => 'backend "pg" (postgres) does not support read_rows', 'retry' => false]]],
            ['recv'], ['reply', ['error' => ['code' => 'unknown_table', 'message' => 'postgres: no table "nope"', 'retry' => false]]],
            ['recv'], ['reply', []],
        ]]);
        $client = $this->client($server);
        foreach ([
            ServerException::UNSUPPORTED => static fn () => $client->readRows('t', [], 'pg'),
            ServerException::UNKNOWN_TABLE => static fn () => $client->get('nope', 1, [], 'pg'),
        ] as $code => $call) {
            try {
                $call();
                self::fail("no $code exception");
            } catch (ServerException $e) {
                self::assertSame($code, $e->getErrorCode());
                self::assertFalse($e->isRetryable());
            }
        }
        $client->ping();
        self::assertSame(1, $server->count('accept'));
    }

    public function testBatchResultsAreWhatTheMethodsReturn(): void
    {
        $server = $this->serve([[[
            'recv'], ['reply', ['results' => [
                ['columns' => ['k', 'a'], 'rows' => [['x', 'alpha']]],
                ['columns' => ['k', 'a'], 'rows' => []],
                ['columns' => ['k'], 'rows' => [['x'], null]],
                ['columns' => ['k'], 'rows' => [['x']], 'cursor' => self::CURSOR],
                ['affected' => 1, 'insert_id' => 0],
                ['affected' => 1, 'insert_id' => 0],
                ['columns' => ['key', 'family', 'qualifier', 'timestamp', 'value'], 'rows' => [['r', 'f', 'q', 5000, 'v']]],
                ['affected' => 1, 'insert_id' => 0],
                ['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['r', 'c', 'n', -2]]],
                ['affected' => 0, 'insert_id' => 0],
                ['error' => ['code' => 'unsupported', 'message' => 'no read_rows on sqlite', 'retry' => false]],
                ['affected' => 1, 'insert_id' => 9],
            ]]],
        ]]);
        $results = $this->client($server, ['backend' => 'main'])->batch([
            'get' => Operation::get('t', 'x'),
            'missing' => Operation::get('t', 'y', ['k', 'a'], 'maria'),
            'multi' => Operation::multiGet('t', ['x', 'y'], ['k']),
            'scan' => Operation::scan('t', limit: 1),
            'put' => Operation::put('t', ['k' => 'z', 'a' => 'zeta']),
            'delete' => Operation::delete('t', 'x'),
            'cells' => Operation::readRows('bt_table', ['keys' => ['r']], 'bt'),
            'mutate' => Operation::mutateRow('bt_table', 'r', [Mutation::set('f', 'q', 'v')], 'bt'),
            'counter' => Operation::increment('bt_table', 'r', 'c', 'n', -2, 'bt'),
            'lock' => Operation::checkAndMutate('bt_table', 'r', 'f', 'q', 'v', [Mutation::deleteRow()], [], 'bt'),
            'unsupported' => Operation::readRows('t'),
            'exec' => Operation::execute('UPDATE t SET a = 1'),
        ]);

        self::assertSame(['k' => 'x', 'a' => 'alpha'], $results['get']);
        self::assertNull($results['missing']);
        self::assertSame([['k' => 'x'], null], $results['multi']);
        self::assertInstanceOf(ScanResult::class, $results['scan']);
        self::assertSame([['k' => 'x']], $results['scan']->rows);
        self::assertSame(self::CURSOR, $results['scan']->cursor);
        self::assertTrue($results['put']);
        self::assertSame(1, $results['delete']);
        self::assertInstanceOf(ScanResult::class, $results['cells']);
        self::assertSame([['key' => 'r', 'family' => 'f', 'qualifier' => 'q', 'timestamp' => 5000, 'value' => 'v']], $results['cells']->rows);
        self::assertTrue($results['mutate']);
        self::assertSame(-2, $results['counter']);
        self::assertFalse($results['lock']);
        self::assertInstanceOf(ServerException::class, $results['unsupported']);
        self::assertSame(ServerException::UNSUPPORTED, $results['unsupported']->getErrorCode());
        self::assertInstanceOf(ExecResult::class, $results['exec']);

        $ops = self::maps($server)[0]['ops'];
        self::assertSame(['op' => 'get', 'backend' => 'main', 'table' => 't', 'key' => ['x']], $ops[0]);
        self::assertSame(['op' => 'get', 'backend' => 'maria', 'table' => 't', 'key' => ['y'], 'columns' => ['k', 'a']], $ops[1]);
        self::assertSame(['op' => 'multi_get', 'backend' => 'main', 'table' => 't', 'keys' => [['x'], ['y']], 'columns' => ['k']], $ops[2]);
        self::assertSame(['op' => 'put', 'backend' => 'main', 'table' => 't', 'row' => ['a' => 'zeta', 'k' => 'z']], $ops[4]);
        self::assertSame(['op' => 'read_rows', 'backend' => 'bt', 'table' => 'bt_table', 'keys' => [['r']]], $ops[6]);
        self::assertSame(['op' => 'increment', 'backend' => 'bt', 'table' => 'bt_table', 'key' => ['r'], 'family' => 'c', 'qualifier' => 'n', 'delta' => -2], $ops[8]);
    }

    public function testBatchMultiGetWithTheWrongNumberOfRowsIsMalformed(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [['columns' => ['k'], 'rows' => [['x']]]]]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->client($server)->batch([Operation::multiGet('t', ['x', 'y'])]);
    }
}
