<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\WordPress\Sql\Statement;

/** StatementTest: what the drop-in reads from SQL text before sending it (no server needed). */
final class StatementTest extends TestCase
{
    /** @dataProvider multipleStatements */
    public function testMultipleStatements(string $sql, bool $multiple): void
    {
        self::assertSame($multiple, Statement::parse($sql)->multiple, $sql);
    }

    /** @return iterable<string, array{string, bool}> */
    public static function multipleStatements(): iterable
    {
        yield 'two selects' => ['SELECT 1; SELECT 2', true];
        yield 'trailing semicolon' => ["SELECT 1;  \n", false];
        yield 'trailing semicolon and comment' => ['SELECT 1; -- done', false];
        yield 'semicolon in single quotes' => ["SELECT 'a;b'", false];
        yield 'semicolon after an escaped quote' => ["SELECT 'it\\'s; fine'", false];
        yield 'semicolon after a doubled quote' => ["SELECT 'it''s; fine'", false];
        yield 'semicolon in double quotes' => ['SELECT "a;b"', false];
        yield 'semicolon in backticks' => ['SELECT 1 AS `a;b`', false];
        yield 'semicolon in a comment' => ["SELECT 1 /* ; DROP */ + 1", false];
        yield 'semicolon in a hash comment' => ["SELECT 1 # ; DROP\n", false];
        yield 'statement in an executable comment' => ['SELECT 1; /*!40101 SET NAMES utf8 */', true];
        yield 'insert then delete' => ["INSERT INTO t VALUES ('x'); DELETE FROM t", true];
        yield 'unterminated literal' => ["SELECT 'a;", false];
    }

    public function testCodeEmptiesLiteralsAndDropsComments(): void
    {
        $s = Statement::parse("/* lead */ SELECT 'x@y.z', \"SQL_CALC_FOUND_ROWS\", `col` -- tail\nFROM t");
        self::assertSame("SELECT '', \"\", `_`  \nFROM t", $s->code);
        self::assertSame([], $s->userVariables);
        self::assertFalse($s->matches('/SQL_CALC_FOUND_ROWS/'));
        self::assertSame('SELECT', $s->verb());
    }

    public function testUserVariables(): void
    {
        self::assertSame(['a', 'b'], Statement::parse('SET @a = 1, @B := @@session.sql_mode')->userVariables);
        self::assertSame(['n'], Statement::parse("SELECT @n := @n + 1, 'me@example.com', @@time_zone")->userVariables);
    }

    public function testKeywordsSkipParenthesesAndExecutableComments(): void
    {
        self::assertSame(['SELECT', 'A'], Statement::parse('((SELECT a FROM t))')->keywords());
        self::assertSame(['SET', 'NAMES'], Statement::parse('/*!40101 SET NAMES utf8mb4 */')->keywords());
        self::assertSame(['LOCK', 'TABLES'], Statement::parse("\n  lock tables t write")->keywords());
    }

    public function testRewriteCodeLeavesLiteralsAndCommentsAlone(): void
    {
        $sql = "SELECT FOUND_ROWS() * 2, 'FOUND_ROWS()', `FOUND_ROWS()` /* FOUND_ROWS() */ -- FOUND_ROWS()\n, found_rows ( )";
        self::assertSame(
            "SELECT 37 * 2, 'FOUND_ROWS()', `FOUND_ROWS()` /* FOUND_ROWS() */ -- FOUND_ROWS()\n, 37",
            Statement::parse($sql)->rewriteCode('/\\bFOUND_ROWS\\s*\\(\\s*\\)/i', '37')->sql,
        );
        self::assertSame('/*!40101 SET x = 37 */', Statement::parse('/*!40101 SET x = FOUND_ROWS() */')->rewriteCode('/FOUND_ROWS\\(\\)/', '37')->sql);
        self::assertSame("SELECT 'it\\'s $1', 1", Statement::parse("SELECT 'it\\'s $1', X")->rewriteCode('/X/', '1')->sql);
    }

    public function testLargeStatementsParseInLinearTime(): void
    {
        $body = \str_repeat("Lorem ipsum dolor sit amet, it\\'s \"quoted\" -- not a comment; ", 40000);
        $start = \microtime(true);
        $s = Statement::parse("INSERT INTO wp_posts (post_content) VALUES ('" . $body . "')");
        self::assertFalse($s->multiple);
        self::assertSame("INSERT INTO wp_posts (post_content) VALUES ('')", $s->code);
        self::assertLessThan(1.0, \microtime(true) - $start, '2.6 MB of post content');
    }

    /** Under NO_BACKSLASH_ESCAPES a backslash is an ordinary byte: `'x\'` is a whole literal, and what follows is code. */
    public function testNoBackslashEscapes(): void
    {
        $sql = "SELECT 'x\\'; SELECT 1 -- '";
        self::assertFalse(Statement::parse($sql)->multiple, 'default mode: one literal up to the last quote');
        self::assertTrue(Statement::parse($sql, true)->multiple, 'NO_BACKSLASH_ESCAPES: the literal ends at \\\'');
        self::assertFalse(Statement::parse("INSERT INTO t VALUES ('x\\'' OR 1=1 -- ')", true)->multiple);
        self::assertSame(['a'], Statement::parse("SELECT 'b\\', @a", true)->userVariables);
    }
}
