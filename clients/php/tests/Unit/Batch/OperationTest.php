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
}
