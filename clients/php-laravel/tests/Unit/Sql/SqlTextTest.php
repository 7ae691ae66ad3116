<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Unit\Sql;

use PHPUnit\Framework\TestCase;
use Tether\Laravel\Sql\SqlText;
use Tether\Laravel\UnsupportedStatementException;

final class SqlTextTest extends TestCase
{
    /** @return array<string, array{string, string, int}> */
    public function postgresRewrites(): array
    {
        return [
            'plain' => ['select * from "t" where "a" = ? and "b" = ?', 'select * from "t" where "a" = $1 and "b" = $2', 2],
            'string literal' => ["select '?', 'it''s ?' from t where a = ?", "select '?', 'it''s ?' from t where a = \$1", 1],
            'escape string' => ["select E'\\'?' where a = ?", "select E'\\'?' where a = \$1", 1],
            'quoted identifier' => ['select "what?" from t where "a""?" = ?', 'select "what?" from t where "a""?" = $1', 1],
            'dollar quoted' => ['select $$ ? $$, $tag$ ?$ ? $tag$ where a = ?', 'select $$ ? $$, $tag$ ?$ ? $tag$ where a = $1', 1],
            'line comment' => ["select 1 -- why?\nwhere a = ?", "select 1 -- why?\nwhere a = \$1", 1],
            'nested block comment' => ['select /* a /* ? */ ? */ ? ', 'select /* a /* ? */ ? */ $1 ', 1],
            'jsonb operators escaped by Laravel' => ['select * from t where "m" ?? ? and "m" ??| array[?] and "m" ??& array[?]', 'select * from t where "m" ? $1 and "m" ?| array[$2] and "m" ?& array[$3]', 3],
            'existing dollar params untouched' => ['select $1::int', 'select $1::int', 0],
        ];
    }

    /** @dataProvider postgresRewrites */
    public function testBindRewritesPositionalPlaceholdersOnPostgres(string $sql, string $want, int $count): void
    {
        $bindings = $count > 0 ? \range(1, $count) : [];
        [$got, $params] = SqlText::bind($sql, $bindings, SqlText::PGSQL);
        self::assertSame($want, $got);
        self::assertSame($bindings, $params);
    }

    public function testBindLeavesMysqlPlaceholdersButUnescapesDoubleQuestionMarks(): void
    {
        self::assertSame(['select ? from `t?` where a = ?', [1, 2]], SqlText::bind('select ? from `t?` where a = ?', [1, 2], SqlText::MYSQL));
        self::assertSame(["select '??', ? from t where j ? ?", [1, 2]], SqlText::bind("select '??', ? from t where j ?? ?", [1, 2], SqlText::MYSQL));
    }

    public function testBindTurnsNamedParametersIntoPositionalOnes(): void
    {
        self::assertSame(
            ['select $1::int + $2::int, $1::text, \':b\'', [1, 2]],
            SqlText::bind('select :a::int + :b::int, :a::text, \':b\'', ['b' => 2, 'a' => 1], SqlText::PGSQL),
        );
        self::assertSame(
            ['select ? + ?, ?, "x:a"', [1, 2, 1]],
            SqlText::bind('select :a + :b, :a, "x:a"', [':a' => 1, 'b' => 2], SqlText::MYSQL),
        );
    }

    public function testBindRefusesMixedOrMissingParameters(): void
    {
        try {
            SqlText::bind('select :a, ?', ['a' => 1], SqlText::PGSQL);
            self::fail('mixed placeholders were accepted');
        } catch (UnsupportedStatementException $e) {
            self::assertStringContainsString('mixes positional', $e->getMessage());
        }
        $this->expectException(UnsupportedStatementException::class);
        $this->expectExceptionMessage(':b');
        SqlText::bind('select :a, :b', ['a' => 1], SqlText::MYSQL);
    }

    public function testBindRefusesAPlaceholderCountThatDoesNotMatchOnPostgres(): void
    {
        $this->expectException(UnsupportedStatementException::class);
        $this->expectExceptionMessage('2 ? placeholders but 1 bindings');
        SqlText::bind('select ?, ?', [1], SqlText::PGSQL);
    }

    public function testStatementCountIgnoresSemicolonsInLiteralsAndComments(): void
    {
        self::assertSame(1, SqlText::statementCount("insert into t values ('a;b'); -- c; d\n", SqlText::MYSQL));
        self::assertSame(2, SqlText::statementCount('create table a (x int); create table b (y int)', SqlText::MYSQL));
        self::assertSame(1, SqlText::statementCount('create function f() returns int as $$ begin return 1; end $$ language plpgsql;', SqlText::PGSQL));
        self::assertSame(0, SqlText::statementCount(' ; /* ; */ ', SqlText::PGSQL));
    }
}
