<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Protocol;

use PHPUnit\Framework\TestCase;
use Tether\Protocol\Reply;

final class ReplyTest extends TestCase
{
    public function testRowsCombineColumnsWithEachRow(): void
    {
        self::assertSame(
            [['a' => 1, 'b' => null], ['a' => 2, 'b' => 'x']],
            Reply::rows(['id' => 1, 'columns' => ['a', 'b'], 'rows' => [[1, null], [2, 'x']]]),
        );
    }

    public function testRowsStopAtTheLimit(): void
    {
        self::assertSame([['a' => 1]], Reply::rows(['columns' => ['a'], 'rows' => [[1], [2], [3]]], 1));
    }

    public function testDuplicateColumnNamesKeepTheLastValue(): void
    {
        self::assertSame([['id' => 2]], Reply::rows(['columns' => ['id', 'id'], 'rows' => [[1, 2]]]));
    }

    /** @dataProvider malformedQueryReplies */
    public function testMalformedQueryReplyIsNull(array $reply): void
    {
        self::assertNull(Reply::rows($reply));
    }

    /** @return iterable<string, array{array<mixed>}> */
    public static function malformedQueryReplies(): iterable
    {
        yield 'no columns' => [['rows' => []]];
        yield 'no rows' => [['columns' => ['a']]];
        yield 'row too short' => [['columns' => ['a', 'b'], 'rows' => [[1]]]];
        yield 'row not a list' => [['columns' => ['a'], 'rows' => [1]]];
    }

    public function testExec(): void
    {
        $result = Reply::exec(['affected' => 2, 'insert_id' => 9]);
        self::assertNotNull($result);
        self::assertSame(2, $result->affectedRows);
        self::assertSame(9, $result->lastInsertId);
        self::assertSame(0, Reply::exec(['affected' => 2])?->lastInsertId, 'a missing insert_id is 0');
        self::assertNull(Reply::exec(['insert_id' => 9]));
        self::assertNull(Reply::exec(['affected' => '2', 'insert_id' => 9]));
    }
}
