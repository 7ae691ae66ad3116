<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\Exception\LogicException;
use Tether\NumericResult;

/**
 * NumericResultTest checks the numeric result: rows by position whatever the column names, and associative rows
 * that follow PDO's FETCH_ASSOC.
 */
final class NumericResultTest extends TestCase
{
    public function testRowsColumnsAndIteration(): void
    {
        $result = new NumericResult(['a.id', 'b.id'], [[1, 7], [2, null]]);

        self::assertCount(2, $result);
        self::assertSame([[1, 7], [2, null]], $result->rows);
        self::assertSame([[1, 7], [2, null]], iterator_to_array($result));
        self::assertSame([7, null], $result->column(1));
    }

    public function testRepeatedNamesKeepEveryColumnAndTheLastWinsByName(): void
    {
        $result = new NumericResult(['x', 'x', 'y'], [[1, 2, 3]]);

        self::assertSame([[1, 2, 3]], $result->rows);
        self::assertSame([1], $result->column(0));
        self::assertSame([2], $result->column(1));
        self::assertSame([['x' => 2, 'y' => 3]], $result->associative());
    }

    public function testColumnOutOfRangeIsALogicError(): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('no column at position 2; this result has 2');
        (new NumericResult(['a', 'b'], []))->column(2);
    }
}
