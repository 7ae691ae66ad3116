<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Batch;

use PHPUnit\Framework\TestCase;
use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\Exception\LogicException;
use Tether\Protocol\Request;

final class OperationTest extends TestCase
{
    public function testOperationsAreRequestMapsWithoutIdInSpecKeyOrder(): void
    {
        $query = Operation::query('SELECT * FROM t WHERE a = $1', ['k' => 5], 'pg', 100);
        self::assertSame('query', $query->op);
        self::assertSame(['op' => 'query', 'backend' => 'pg', 'sql' => 'SELECT * FROM t WHERE a = $1', 'params' => [5], 'timeout_ms' => 100], $query->request);

        $exec = Operation::execute('DELETE FROM t');
        self::assertSame('exec', $exec->op);
        self::assertSame(['op' => 'exec', 'sql' => 'DELETE FROM t'], $exec->request);

        self::assertSame(['op' => 'ping'], Operation::ping()->request);
        self::assertSame(['op' => 'ping', 'timeout_ms' => 10], Operation::ping(10)->request);
    }

    public function testCachedQueriesCarryTheirTtl(): void
    {
        self::assertSame(['op' => 'query', 'sql' => 'SELECT 1', 'cache_ttl_ms' => 5000], Operation::query('SELECT 1', cacheTtlMs: 5000)->request);
        self::assertSame(['op' => 'query', 'sql' => 'SELECT 1', 'columnar' => true, 'cache_ttl_ms' => 5000], Operation::queryColumns('SELECT 1', cacheTtlMs: 5000)->request);
        self::assertArrayNotHasKey('cache_ttl_ms', Operation::query('SELECT 1', cacheTtlMs: 0)->request);
    }

    public function testKeyAndBigtableOperationsAreTheRequestMapsWithoutId(): void
    {
        $set = [Mutation::set('f', 'q', 'v', 1000)];
        $cases = [
            'get' => [Operation::get('t', [1, 'b'], ['a'], 'pg', 5), Request::get('t', [1, 'b'], ['a'], 'pg', 5)],
            'multi_get' => [Operation::multiGet('t', [1, [2]], [], 'pg'), Request::multiGet('t', [1, [2]], [], 'pg')],
            'scan' => [Operation::scan('t', ['a'], null, null, 10, 'c', ['x']), Request::scan('t', ['a'], null, null, 10, 'c', ['x'])],
            'put' => [Operation::put('t', ['b' => 2, 'a' => 1]), Request::put('t', ['a' => 1, 'b' => 2])],
            'delete' => [Operation::delete('t', 7, 'maria'), Request::delete('t', [7], 'maria')],
            'read_rows' => [Operation::readRows('e', ['start' => 'a', 'end' => 'b'], 'bt'), Request::readRows('e', ['start' => 'a', 'end' => 'b'], 'bt')],
            'mutate_row' => [Operation::mutateRow('e', 'k', $set, 'bt'), Request::mutateRow('e', 'k', $set, 'bt')],
            'increment' => [Operation::increment('e', 'k', 'c', 'n'), Request::increment('e', 'k', 'c', 'n', 1)],
            'check_and_mutate' => [Operation::checkAndMutate('e', 'k', 'f', null, null, $set), Request::checkAndMutate('e', 'k', 'f', null, null, $set)],
        ];
        foreach ($cases as $op => [$operation, $request]) {
            self::assertSame($op, $operation->op);
            self::assertSame(0, $request['id']);
            unset($request['id']);
            self::assertSame($request, $operation->request, $op);
        }
        self::assertSame(['op' => 'delete', 'backend' => 'maria', 'table' => 't', 'key' => [7]], Operation::delete('t', 7, 'maria')->request);
        self::assertSame(['op' => 'increment', 'table' => 'e', 'key' => ['k'], 'family' => 'c', 'qualifier' => 'n', 'delta' => 1], Operation::increment('e', 'k', 'c', 'n')->request);
    }

    public function testMutationMaps(): void
    {
        self::assertSame(['op' => 'set', 'family' => 'f', 'qualifier' => 'q', 'value' => "\x00\xff"], Mutation::set('f', 'q', "\x00\xff")->map);
        self::assertSame(['op' => 'set', 'family' => 'f', 'qualifier' => 'q', 'value' => 'v', 'ts' => 1700000000000000], Mutation::set('f', 'q', 'v', 1700000000000000)->map);
        self::assertSame(['op' => 'delete_cells', 'family' => 'f', 'qualifier' => 'q'], Mutation::deleteCells('f', 'q')->map);
        self::assertSame(['op' => 'delete_family', 'family' => 'f'], Mutation::deleteFamily('f')->map);
        self::assertSame(['op' => 'delete_row'], Mutation::deleteRow()->map);
    }

    public function testPutOfAnEmptyRowIsALogicError(): void
    {
        $this->expectException(LogicException::class);
        Operation::put('t', []);
    }

    public function testColumnarReadsSetTheFlagLast(): void
    {
        $query = Operation::queryColumns('SELECT a FROM t WHERE b = ?', [1], 'maria', 50);
        self::assertSame(['op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT a FROM t WHERE b = ?', 'params' => [1], 'timeout_ms' => 50, 'columnar' => true], $query->request);
        self::assertTrue($query->isColumnar());
        self::assertFalse(Operation::query('SELECT 1')->isColumnar());

        $scan = Operation::scanColumns('t', ['a'], limit: 10, cursor: 'c');
        self::assertSame(['op' => 'scan', 'table' => 't', 'prefix' => ['a'], 'limit' => 10, 'cursor' => 'c', 'columnar' => true], $scan->request);
        $read = Operation::readRowsColumns('e', ['prefix' => 'u#', 'latest' => true], 'bt');
        self::assertSame(['op' => 'read_rows', 'backend' => 'bt', 'table' => 'e', 'prefix' => ['u#'], 'latest' => true, 'columnar' => true], $read->request);
    }

    public function testHttpOperation(): void
    {
        $http = Operation::http('api', 'POST', '/v1/orders?x=1', ['x-b' => 'two', 'Content-Length' => 5, 'a' => '1'], "\x00body", 1500);
        self::assertSame('http', $http->op);
        self::assertSame([
            'op' => 'http', 'backend' => 'api', 'timeout_ms' => 1500, 'method' => 'POST', 'path' => '/v1/orders?x=1',
            'headers' => ['Content-Length' => '5', 'a' => '1', 'x-b' => 'two'], // sorted by name, as tetherd's encoder
            'body' => "\x00body",
        ], $http->request);
        self::assertSame(['op' => 'http', 'backend' => 'api', 'method' => 'GET', 'path' => '/'], Operation::http('api', 'GET', '/')->request);
        self::assertSame(['op' => 'http', 'backend' => 'api', 'method' => 'PUT', 'path' => '/e', 'body' => ''], Operation::http('api', 'PUT', '/e', body: '')->request, 'an empty body is a body');
    }

    public function testHttpHeaderValuesMustBeStrings(): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('http: header accept: want a string value, got array');
        Operation::http('api', 'GET', '/', ['accept' => ['a', 'b']]);
    }

    public function testJoinOperationInSpecKeyOrder(): void
    {
        $left = Operation::query('SELECT id, g FROM u WHERE id < ?', [9], 'maria', 100);
        $join = Operation::join($left, 'groups', ['g'], ['name'], 'pg', 'inner', ['-name', 'id'], 700);

        self::assertSame('join', $join->op);
        self::assertTrue($join->isColumnar());
        self::assertSame([
            'op' => 'join',
            'timeout_ms' => 700,
            'left' => ['op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT id, g FROM u WHERE id < ?', 'params' => [9], 'timeout_ms' => 100],
            'right' => ['backend' => 'pg', 'table' => 'groups', 'columns' => ['name']],
            'on' => ['g'],
            'kind' => 'inner',
            'order_by' => ['-name', 'id'],
        ], $join->request);
    }

    public function testJoinRightSideDefaultsToTheLeftBackendAndAllColumns(): void
    {
        $join = Operation::join(Operation::scan('u', ['a'], backend: 'cass'), 'profiles', ['id']);
        self::assertSame(['backend' => 'cass', 'table' => 'profiles'], $join->request['right']);
        self::assertSame('left', $join->request['kind']);
        self::assertArrayNotHasKey('order_by', $join->request);

        $noBackend = Operation::join(Operation::multiGet('u', [1, 2]), 'profiles', ['id']);
        self::assertSame(['table' => 'profiles'], $noBackend->request['right'], 'the server default, like the left');
        self::assertSame(['op' => 'multi_get', 'table' => 'u', 'keys' => [[1], [2]]], $noBackend->request['left']);
    }

    public function testJoinOfAColumnarLeftSendsTheLeftWithoutTheFlag(): void
    {
        $join = Operation::join(Operation::queryColumns('SELECT g FROM u'), 'groups', ['g']);
        self::assertSame(['op' => 'query', 'sql' => 'SELECT g FROM u'], $join->request['left']);
    }

    /** @dataProvider invalidJoins */
    public function testInvalidJoinIsALogicError(callable $join, string $message): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage($message);
        $join();
    }

    /** @return iterable<string, array{callable, string}> */
    public static function invalidJoins(): iterable
    {
        $left = Operation::query('SELECT g FROM u');
        yield 'kind' => [static fn () => Operation::join($left, 'groups', ['g'], kind: 'outer'), "join: kind must be left or inner, got 'outer'"];
        yield 'kind case' => [static fn () => Operation::join($left, 'groups', ['g'], kind: 'LEFT'), "join: kind must be left or inner, got 'LEFT'"];
        yield 'no on column' => [static fn () => Operation::join($left, 'groups', []), 'join: want at least one column in $on'];
        yield 'on not names' => [static fn () => Operation::join($left, 'groups', [1]), 'join: $on: want a list of column names, got a int in it'];
        yield 'an exec on the left' => [static fn () => Operation::join(Operation::execute('DELETE FROM u'), 'groups', ['g']), 'join: the left side must be a query, scan, get, multiGet or readRows operation, got exec'];
        yield 'a join on the left' => [static fn () => Operation::join(Operation::join($left, 'groups', ['g']), 'x', ['g']), 'got join'];
        yield 'an http call on the left' => [static fn () => Operation::join(Operation::http('api', 'GET', '/'), 'x', ['g']), 'got http'];
    }
}
