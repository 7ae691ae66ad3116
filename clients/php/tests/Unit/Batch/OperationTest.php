<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Batch;

use PHPUnit\Framework\TestCase;
use Tether\Batch\Operation;

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
}
