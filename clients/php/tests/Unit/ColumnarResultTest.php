<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\ColumnarResult;
use Tether\Exception\LogicException;

/**
 * ColumnarResultTest checks the column-oriented result: its columns as they came, and the rows built from them.
 */
final class ColumnarResultTest extends TestCase
{
    public function testRowsColumnsAndCountWithNullValues(): void
    {
        $result = new ColumnarResult(
            ['id', 'name', 'groups.name'],
            3,
            [[1, 2, 3], ['ada', 'bob', null], ['Admins', null, "Dev\x00s"]],
        );

        self::assertCount(3, $result);
        self::assertSame(3, $result->count());
        self::assertSame(['id', 'name', 'groups.name'], $result->columns());
        self::assertSame(['Admins', null, "Dev\x00s"], $result->column('groups.name'));
        self::assertSame([1, 2, 3], $result->column('id'));
        self::assertSame([
            ['id' => 1, 'name' => 'ada', 'groups.name' => 'Admins'],
            ['id' => 2, 'name' => 'bob', 'groups.name' => null],
            ['id' => 3, 'name' => null, 'groups.name' => "Dev\x00s"],
        ], $result->rows());
        self::assertNull($result->cursor());
        self::assertFalse($result->hasMore());
    }

    public function testIterationYieldsTheRowsOneByOne(): void
    {
        $result = new ColumnarResult(['a', 'b'], 2, [[1, 2], ['x', 'y']]);
        $rows = [];
        foreach ($result as $i => $row) {
            $rows[$i] = $row;
        }
        self::assertSame([0 => ['a' => 1, 'b' => 'x'], 1 => ['a' => 2, 'b' => 'y']], $rows);
        self::assertSame($result->rows(), iterator_to_array($result));
    }

    public function testOneColumn(): void
    {
        $result = new ColumnarResult(['n'], 3, [[null, 0, 'z']]);
        self::assertSame([['n' => null], ['n' => 0], ['n' => 'z']], $result->rows());
        self::assertSame([['n' => null], ['n' => 0], ['n' => 'z']], iterator_to_array($result));
    }

    public function testEmptyResultKeepsItsColumns(): void
    {
        $result = new ColumnarResult(['id', 'name'], 0, [[], []], "\x00cursor\xff");

        self::assertCount(0, $result);
        self::assertSame([], $result->rows());
        self::assertSame([], iterator_to_array($result));
        self::assertSame(['id', 'name'], $result->columns());
        self::assertSame([], $result->column('name'));
        self::assertSame("\x00cursor\xff", $result->cursor(), 'an empty page may still have a cursor');
        self::assertTrue($result->hasMore());
    }

    public function testDuplicateColumnNamesKeepTheLastAsRowsDo(): void
    {
        $result = new ColumnarResult(['id', 'id'], 1, [[1], [2]]);
        self::assertSame([['id' => 2]], $result->rows());
        self::assertSame([2], $result->column('id'));
        self::assertSame([1], $result->columnAt(0), 'columnAt reaches a column its name hides');
        self::assertSame([2], $result->columnAt(1));
    }

    public function testNumericRowsKeepEveryColumnInOrder(): void
    {
        $result = new ColumnarResult(['x', 'x', 'y'], 2, [[1, 4], [2, 5], [3, null]]);
        self::assertSame([[1, 2, 3], [4, 5, null]], $result->numericRows());
        self::assertSame([['x' => 2, 'y' => 3], ['x' => 5, 'y' => null]], $result->rows(), 'the last x wins, at the first one\'s place');
        self::assertSame([[7], [8]], (new ColumnarResult(['n'], 2, [[7, 8]]))->numericRows());
        self::assertSame([], (new ColumnarResult(['a', 'b'], 0, [[], []]))->numericRows());
    }

    public function testColumnAtOutOfRangeIsALogicError(): void
    {
        $result = new ColumnarResult(['id'], 0, [[]]);
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('no column at position 1; this result has 1');
        $result->columnAt(1);
    }

    public function testUnknownColumnIsALogicError(): void
    {
        $result = new ColumnarResult(['id'], 0, [[]]);
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage("no column 'name' in this result; its columns: id");
        $result->column('name');
    }
}
