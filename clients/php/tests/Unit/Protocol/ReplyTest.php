<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Protocol;

use PHPUnit\Framework\TestCase;
use Tether\ColumnarResult;
use Tether\HttpResponse;
use Tether\NumericResult;
use Tether\Protocol\Reply;
use Tether\ScanResult;

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

    public function testFirstIsTheFirstRowOrNull(): void
    {
        self::assertSame(['a' => 1, 'b' => 'x'], Reply::first(['columns' => ['a', 'b'], 'rows' => [[1, 'x'], [2, 'y']]]));
        self::assertNull(Reply::first(['columns' => ['a'], 'rows' => []]));
    }

    /** @dataProvider malformedQueryReplies */
    public function testFirstOfAMalformedQueryReplyIsFalse(array $reply): void
    {
        self::assertFalse(Reply::first($reply));
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

    public function testNumericKeepsEveryColumnAndTheDecodedRows(): void
    {
        $result = Reply::numeric(['id' => 1, 'columns' => ['id', 'id', 'name'], 'rows' => [[1, 7, 'b'], [2, 8, null]]]);
        self::assertInstanceOf(NumericResult::class, $result);
        self::assertSame(['id', 'id', 'name'], $result->columns);
        self::assertSame([[1, 7, 'b'], [2, 8, null]], $result->rows);
        self::assertSame([], Reply::numeric(['columns' => ['a'], 'rows' => []])->rows);
    }

    /** @dataProvider malformedQueryReplies */
    public function testNumericOfAMalformedQueryReplyIsNull(array $reply): void
    {
        self::assertNull(Reply::numeric($reply));
    }

    /** @return iterable<string, array{array<mixed>}> */
    public static function malformedQueryReplies(): iterable
    {
        yield 'no columns' => [['rows' => []]];
        yield 'no rows' => [['columns' => ['a']]];
        yield 'row too short' => [['columns' => ['a', 'b'], 'rows' => [[1]]]];
        yield 'row not a list' => [['columns' => ['a'], 'rows' => [1]]];
        yield 'row too long' => [['columns' => ['a'], 'rows' => [[1, 2]]]];
    }

    public function testSparseRowsKeepNullForMissingKeys(): void
    {
        $reply = ['id' => 11, 'columns' => ['id', 'name'], 'rows' => [[1, 'ada'], null, [3, 'cy']]];

        self::assertSame([['id' => 1, 'name' => 'ada'], null, ['id' => 3, 'name' => 'cy']], Reply::sparseRows($reply, 3));
        self::assertNull(Reply::sparseRows($reply, 2), 'one row per key, or the reply is malformed');
        self::assertNull(Reply::sparseRows(['columns' => ['a'], 'rows' => [[1, 2]]], 1));
        self::assertNull(Reply::sparseRows(['columns' => ['a'], 'rows' => ['x']], 1));
        self::assertSame([], Reply::sparseRows(['columns' => ['a'], 'rows' => []], 0));
    }

    public function testRowsOfAMultiGetReplyWithNullIsMalformed(): void
    {
        self::assertNull(Reply::rows(['columns' => ['a'], 'rows' => [[1], null]]), 'null rows are for multi_get only');
    }

    public function testPageHasRowsAndCursor(): void
    {
        $page = Reply::page(['columns' => ['k'], 'rows' => [['a'], ['b']], 'cursor' => "\x01\x02\x03"]);
        self::assertInstanceOf(ScanResult::class, $page);
        self::assertSame([['k' => 'a'], ['k' => 'b']], $page->rows);
        self::assertSame("\x01\x02\x03", $page->cursor);
        self::assertTrue($page->hasMore());

        $last = Reply::page(['columns' => ['k'], 'rows' => []]);
        self::assertNotNull($last);
        self::assertNull($last->cursor);
        self::assertFalse($last->hasMore());
        self::assertCount(0, $last);

        self::assertNull(Reply::page(['columns' => ['k'], 'rows' => [], 'cursor' => 5]), 'a cursor is bytes');
        self::assertNull(Reply::page(['rows' => []]));
    }

    public function testAffectedAndCounter(): void
    {
        self::assertSame(1, Reply::affected(['affected' => 1, 'insert_id' => 0]));
        self::assertSame(0, Reply::affected(['affected' => 0]));
        self::assertNull(Reply::affected(['ok' => true]));

        self::assertSame(-3, Reply::counter(['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['k', 'c', 'n', -3]]]));
        self::assertNull(Reply::counter(['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => []]));
        self::assertNull(Reply::counter(['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['k', 'c', 'n', "\0\0\0\0\0\0\0\1"]]]));
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

    public function testColumnsKeepTheDataAsItCame(): void
    {
        $result = Reply::columns(['id' => 3, 'columns' => ['a', 'b'], 'count' => 2, 'data' => [[1, null], ['x', 'y']], 'cursor' => "\x00c"]);
        self::assertInstanceOf(ColumnarResult::class, $result);
        self::assertSame([1, null], $result->column('a'));
        self::assertSame("\x00c", $result->cursor());
        self::assertSame(0, Reply::columns(['columns' => [], 'count' => 0, 'data' => []])?->count(), 'no columns, no rows');
    }

    /** @dataProvider malformedColumnReplies */
    public function testMalformedColumnReplyIsNull(array $reply): void
    {
        self::assertNull(Reply::columns($reply));
    }

    /** @return iterable<string, array{array<mixed>}> */
    public static function malformedColumnReplies(): iterable
    {
        yield 'a row-oriented reply' => [['columns' => ['a'], 'rows' => [[1]]]];
        yield 'no count' => [['columns' => ['a'], 'data' => [[1]]]];
        yield 'negative count' => [['columns' => [], 'count' => -1, 'data' => []]];
        yield 'a column short' => [['columns' => ['a', 'b'], 'count' => 2, 'data' => [[1, 2], [1]]]];
        yield 'a column long' => [['columns' => ['a'], 'count' => 1, 'data' => [[1, 2]]]];
        yield 'fewer columns of data than names' => [['columns' => ['a', 'b'], 'count' => 1, 'data' => [[1]]]];
        yield 'a column that is not a list' => [['columns' => ['a'], 'count' => 1, 'data' => [[5 => 1]]]];
        yield 'a column name that is not a string' => [['columns' => [7], 'count' => 1, 'data' => [[1]]]];
        yield 'a cursor that is not a string' => [['columns' => ['a'], 'count' => 0, 'data' => [[]], 'cursor' => 5]];
    }

    public function testHttp(): void
    {
        $response = Reply::http(['id' => 1, 'status' => 503, 'headers' => ['retry-after' => ['5']], 'body' => "down\xff"]);
        self::assertInstanceOf(HttpResponse::class, $response);
        self::assertSame([503, ['retry-after' => ['5']], "down\xff"], [$response->status, $response->headers, $response->body]);
        self::assertSame([204, [], ''], (static fn (HttpResponse $r): array => [$r->status, $r->headers, $r->body])(Reply::http(['status' => 204])), 'no headers, no body');
        self::assertNull(Reply::http(['headers' => [], 'body' => '']), 'no status');
        self::assertNull(Reply::http(['status' => '200']));
        self::assertNull(Reply::http(['status' => 200, 'headers' => ['a' => 'one value, not a list']]));
        self::assertNull(Reply::http(['status' => 200, 'body' => 5]));
    }
}
