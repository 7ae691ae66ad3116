<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Batch\Operation;
use Tether\ColumnarResult;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\LogicException;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * JoinTest drives Client::join() and the column-oriented reads (queryColumns, scanColumns, readRowsColumns)
 * against the scripted fake tetherd.
 */
final class JoinTest extends FakeServerTestCase
{
    private const JOINED = [
        'columns' => ['id', 'name', 'group_code', 'groups.name'],
        'count' => 3,
        'data' => [[1, 2, 3], ['ada', 'bob', 'cy'], ['adm', null, 'dev'], ['Admins', null, "Dev\x00s"]],
    ];

    public function testJoinSendsOneRequestAndReturnsAColumnarResult(): void
    {
        $server = $this->serve([[['recv'], ['reply', self::JOINED]]]);
        $result = $this->client($server)->join(
            Operation::query('SELECT id, name, group_code FROM users WHERE id BETWEEN ? AND ?', [1, 500], 'maria'),
            'groups',
            on: ['group_code'],
            rightColumns: ['name'],
            orderBy: ['groups.name', '-id'],
        );

        self::assertInstanceOf(ColumnarResult::class, $result);
        self::assertCount(3, $result);
        self::assertSame(['Admins', null, "Dev\x00s"], $result->column('groups.name'));
        self::assertSame(['id' => 2, 'name' => 'bob', 'group_code' => null, 'groups.name' => null], $result->rows()[1]);
        // The golden vector join_request, with the id this connection gave it.
        self::assertSame([
            'id' => 1,
            'op' => 'join',
            'left' => ['op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT id, name, group_code FROM users WHERE id BETWEEN ? AND ?', 'params' => [1, 500]],
            'right' => ['backend' => 'maria', 'table' => 'groups', 'columns' => ['name']],
            'on' => ['group_code'],
            'kind' => 'left',
            'order_by' => ['groups.name', '-id'],
        ], self::maps($server)[0]);
    }

    public function testJoinGetsTheDefaultBackendOnBothSides(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['k'], 'count' => 0, 'data' => [[]]]],
            ['recv'], ['reply', ['columns' => ['k'], 'count' => 0, 'data' => [[]]]],
        ]]);
        $client = $this->client($server, ['backend' => 'maria']);
        $client->join(Operation::get('users', 7), 'profiles', ['id'], kind: 'inner', timeoutMs: 250);
        $client->join(Operation::scan('users', ['a']), 'profiles', ['id'], rightBackend: 'cass');

        [$first, $second] = self::maps($server);
        self::assertSame(['id' => 1, 'op' => 'join', 'timeout_ms' => 250,
            'left' => ['op' => 'get', 'backend' => 'maria', 'table' => 'users', 'key' => [7]],
            'right' => ['backend' => 'maria', 'table' => 'profiles'],
            'on' => ['id'], 'kind' => 'inner'], $first);
        self::assertSame(['op' => 'scan', 'backend' => 'maria', 'table' => 'users', 'prefix' => ['a']], $second['left']);
        self::assertSame(['backend' => 'cass', 'table' => 'profiles'], $second['right']);
    }

    public function testDefaultBackendGoesFirstInASideWithoutOp(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [['columns' => ['k'], 'count' => 0, 'data' => [[]]]]]]]]);
        $join = Operation::join(Operation::query('SELECT k FROM u'), 'groups', ['k']);
        $request = $join->request;
        unset($request['right']['op']); // should tetherd's encoder stop writing the empty op of a join side
        $this->client($server, ['backend' => 'maria'])->batch([$join->with($request)]);

        self::assertSame(['backend' => 'maria', 'table' => 'groups'], self::maps($server)[0]['ops'][0]['right']);
    }

    public function testInvalidKindIsALogicErrorAndNothingIsSent(): void
    {
        $server = $this->serve([[['recv'], ['reply', []]]]);
        $client = $this->client($server);
        try {
            $client->join(Operation::query('SELECT g FROM u'), 'groups', ['g'], kind: 'right');
            self::fail('no exception');
        } catch (LogicException $e) {
            self::assertSame("join: kind must be left or inner, got 'right'", $e->getMessage());
        }
        $client->ping();
        self::assertSame(['ping'], array_column(self::maps($server), 'op'));
    }

    public function testJoinErrorIsAServerException(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['error' => ['code' => 'unknown_table', 'message' => 'no table nope on backend maria', 'retry' => false]]]]]);
        try {
            $this->client($server)->join(Operation::query('SELECT g FROM u', [], 'maria'), 'nope', ['g']);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_TABLE, $e->getErrorCode());
        }
    }

    public function testMalformedJoinReplyIsUnknownOutcome(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['a'], 'rows' => [[1]]]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->expectExceptionMessage('malformed reply to join');
        $this->client($server)->join(Operation::query('SELECT a FROM u'), 'groups', ['a']);
    }

    public function testBatchJoinAndColumnarResults(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [
            self::JOINED,
            ['columns' => ['n'], 'count' => 2, 'data' => [[1, 2]]],
            ['columns' => ['n'], 'rows' => [[1], [2]]],
        ]]]]]);
        $results = $this->client($server, ['backend' => 'pg'])->batch([
            'joined' => Operation::join(Operation::query('SELECT id, name, group_code FROM users'), 'groups', ['group_code'], ['name']),
            'columns' => Operation::queryColumns('SELECT n FROM t'),
            'rows' => Operation::query('SELECT n FROM t'),
        ]);

        self::assertInstanceOf(ColumnarResult::class, $results['joined']);
        self::assertSame([1, 2, 3], $results['joined']->column('id'));
        self::assertInstanceOf(ColumnarResult::class, $results['columns']);
        self::assertSame([['n' => 1], ['n' => 2]], $results['columns']->rows());
        self::assertSame([['n' => 1], ['n' => 2]], $results['rows']);
        $ops = self::maps($server)[0]['ops'];
        self::assertSame(['op' => 'join',
            'left' => ['op' => 'query', 'backend' => 'pg', 'sql' => 'SELECT id, name, group_code FROM users'],
            'right' => ['backend' => 'pg', 'table' => 'groups', 'columns' => ['name']],
            'on' => ['group_code'], 'kind' => 'left'], $ops[0], 'the default backend on both sides, none at the top');
        self::assertSame(['op' => 'query', 'backend' => 'pg', 'sql' => 'SELECT n FROM t', 'columnar' => true], $ops[1]);
    }

    public function testQueryColumns(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['id', 'name'], 'count' => 2, 'data' => [[1, 2], ['ada', null]]]],
            ['recv'], ['reply', ['columns' => ['id', 'name'], 'count' => 0, 'data' => [[], []]]],
        ]]);
        $client = $this->client($server);

        $result = $client->queryColumns('SELECT id, name FROM users WHERE id > ?', [0], 'maria', 200);
        self::assertSame([['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => null]], $result->rows());
        self::assertSame(['ada', null], $result->column('name'));
        $empty = $client->queryColumns('SELECT id, name FROM users');
        self::assertCount(0, $empty);
        self::assertSame(['id', 'name'], $empty->columns());
        self::assertSame([], $empty->rows());

        self::assertSame([
            ['id' => 1, 'op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT id, name FROM users WHERE id > ?', 'params' => [0], 'timeout_ms' => 200, 'columnar' => true],
            ['id' => 2, 'op' => 'query', 'sql' => 'SELECT id, name FROM users', 'columnar' => true],
        ], self::maps($server));
    }

    public function testScanColumnsAndReadRowsColumnsCarryTheCursor(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['k', 'v'], 'count' => 1, 'data' => [['a'], ['x']], 'cursor' => "\x01\xff"]],
            ['recv'], ['reply', ['columns' => ['key', 'family', 'qualifier', 'timestamp', 'value'], 'count' => 1, 'data' => [['r'], ['f'], ['q'], [1700000000000000], ["\x00"]]]],
        ]]);
        $client = $this->client($server);

        $page = $client->scanColumns('kv', prefix: ['a'], limit: 1, backend: 'pg');
        self::assertSame("\x01\xff", $page->cursor());
        self::assertTrue($page->hasMore());
        $cells = $client->readRowsColumns('events', ['prefix' => 'r'], 'bt');
        self::assertSame([1700000000000000], $cells->column('timestamp'));
        self::assertFalse($cells->hasMore());

        [$scan, $read] = self::maps($server);
        self::assertSame(['id' => 1, 'op' => 'scan', 'backend' => 'pg', 'table' => 'kv', 'prefix' => ['a'], 'limit' => 1, 'columnar' => true], $scan);
        self::assertSame(['id' => 2, 'op' => 'read_rows', 'backend' => 'bt', 'table' => 'events', 'prefix' => ['r'], 'columnar' => true], $read);
    }

    public function testMalformedColumnarReplyIsUnknownOutcome(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['a', 'b'], 'count' => 2, 'data' => [[1, 2], [3]]]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->client($server)->queryColumns('SELECT a, b FROM t');
    }
}
