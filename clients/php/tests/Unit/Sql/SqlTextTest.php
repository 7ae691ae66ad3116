<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Sql;

use PHPUnit\Framework\TestCase;
use Tether\Exception\LogicException;
use Tether\Sql\SqlText;

final class SqlTextTest extends TestCase
{
    public function testNoBackslashEscapesReadsTheModeList(): void
    {
        self::assertTrue(SqlText::noBackslashEscapes('STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'));
        self::assertTrue(SqlText::noBackslashEscapes('no_backslash_escapes'));
        self::assertFalse(SqlText::noBackslashEscapes(''));
        self::assertFalse(SqlText::noBackslashEscapes('STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'));
        self::assertFalse(SqlText::noBackslashEscapes('NO_BACKSLASH_ESCAPES_X'));
    }

    public function testEscapeMySqlDefaultModeIsMysqliRealEscapeString(): void
    {
        self::assertSame("a\\'b\\\\c\\\"d\\0e\\nf\\rg\\Zh", SqlText::escapeMySql("a'b\\c\"d\0e\nf\rg\x1ah", false));
        self::assertSame("\xf0\x9f\x98\x80 \xff", SqlText::escapeMySql("\xf0\x9f\x98\x80 \xff", false), 'other bytes copied');
    }

    /** Under NO_BACKSLASH_ESCAPES a backslash is an ordinary byte: escaping one would end the literal at `\'`. */
    public function testEscapeMySqlNoBackslashEscapesDoublesQuotesOnly(): void
    {
        self::assertSame("x\\'' OR 1=1 -- ", SqlText::escapeMySql("x\\' OR 1=1 -- ", true));
        self::assertSame("a''b\\c\"d\0e\nf", SqlText::escapeMySql("a'b\\c\"d\0e\nf", true));
        self::assertSame("'it''s \\'", SqlText::quote("it's \\", SqlText::MYSQL, true));
        self::assertSame("'it\\'s \\\\'", SqlText::quote("it's \\", SqlText::MYSQL, false));
    }

    public function testQuotePostgres(): void
    {
        self::assertSame("'it''s'", SqlText::quote("it's", SqlText::PGSQL));
        self::assertSame("E'a\\\\'' OR 1=1 -- '", SqlText::quote("a\\' OR 1=1 -- ", SqlText::PGSQL), 'a backslash: an E literal, whatever standard_conforming_strings says');
        $this->expectException(LogicException::class);
        SqlText::quote("a\0b", SqlText::PGSQL);
    }

    public function testQuoteRefusesAnUnknownDialect(): void
    {
        $this->expectException(LogicException::class);
        SqlText::quote('x', 'sqlite');
    }

    /**
     * @return iterable<string, array{string, string, ?string}>
     */
    public static function transactionControlCases(): iterable
    {
        $m = SqlText::MYSQL;
        $p = SqlText::PGSQL;
        // statement, dialect, expected
        yield 'begin' => ['BEGIN', $m, 'BEGIN'];
        yield 'begin work' => ['begin work', $m, 'BEGIN'];
        yield 'begin pg' => ['BEGIN ISOLATION LEVEL SERIALIZABLE', $p, 'BEGIN'];
        yield 'begin not atomic is a compound statement' => ['BEGIN NOT ATOMIC SELECT 1; END', $m, null];
        yield 'begin not atomic after a comment' => ["/* x */ begin\n  not atomic\nUPDATE t SET a = 1;\nEND", $m, null];
        yield 'start transaction' => ['START TRANSACTION READ ONLY', $m, 'START TRANSACTION'];
        yield 'start transaction pg' => ['start transaction', $p, 'START TRANSACTION'];
        yield 'start slave is not' => ['START SLAVE', $m, null];
        yield 'commit' => ['COMMIT', $m, 'COMMIT'];
        yield 'commit work and chain' => ['COMMIT WORK AND CHAIN', $m, 'COMMIT'];
        yield 'commit prepared' => ["COMMIT PREPARED 'x'", $p, 'COMMIT'];
        yield 'rollback' => ['ROLLBACK', $m, 'ROLLBACK'];
        yield 'rollback work' => ['ROLLBACK WORK', $m, 'ROLLBACK'];
        yield 'rollback and chain' => ['ROLLBACK AND CHAIN', $m, 'ROLLBACK'];
        yield 'rollback to savepoint' => ['ROLLBACK TO SAVEPOINT s1', $m, null];
        yield 'rollback to' => ['rollback to s1', $p, null];
        yield 'rollback work to savepoint' => ['ROLLBACK WORK TO SAVEPOINT s1', $m, null];
        yield 'rollback transaction to savepoint' => ['ROLLBACK TRANSACTION TO SAVEPOINT s1', $p, null];
        yield 'rollback work to, comments between' => ['ROLLBACK /* c */ WORK -- c' . "\n" . ' TO s1', $m, null];
        yield 'savepoint' => ['SAVEPOINT s1', $m, null];
        yield 'release savepoint' => ['RELEASE SAVEPOINT s1', $p, null];
        yield 'end pg' => ['END', $p, 'END'];
        yield 'end mysql' => ['END', $m, null];
        yield 'abort pg' => ['ABORT', $p, 'ABORT'];
        yield 'prepare transaction' => ["PREPARE TRANSACTION 'x'", $p, 'PREPARE TRANSACTION'];
        yield 'prepare statement' => ['PREPARE s FROM \'SELECT 1\'', $m, null];
        yield 'xa' => ["XA START 'x'", $m, 'XA'];
        yield 'set autocommit' => ['SET autocommit = 0', $m, 'SET autocommit'];
        yield 'set session autocommit' => ['set session autocommit=1', $m, 'SET autocommit'];
        yield 'set @@autocommit' => ['SET @@autocommit := 0', $m, 'SET autocommit'];
        yield 'set @@session.autocommit' => ['SET @@SESSION.autocommit=0', $m, 'SET autocommit'];
        yield 'set among others' => ["SET NAMES utf8mb4, autocommit = 0", $m, 'SET autocommit'];
        yield 'set another variable' => ['SET autocommit_x = 1', $m, null];
        yield 'set user variable' => ['SET @autocommit = 0', $m, null];
        yield 'set other' => ["SET time_zone = '+00:00'", $m, null];
        yield 'set in a literal' => ["SET @x = 'a, autocommit = 0'", $m, null];
        yield 'lock tables' => ['LOCK TABLES t WRITE', $m, 'LOCK TABLES'];
        yield 'unlock tables' => ['UNLOCK TABLES', $m, 'UNLOCK TABLES'];
        yield 'lock table pg' => ['LOCK TABLE t IN ACCESS EXCLUSIVE MODE', $p, null];
        yield 'executable comment' => ['/*!40101 START TRANSACTION */', $m, 'START TRANSACTION'];
        yield 'comment pg' => ['/* START TRANSACTION */ SELECT 1', $p, null];
        yield 'hash comment' => ["# BEGIN\nSELECT 1", $m, null];
        yield 'parenthesis' => ['(SELECT 1)', $m, null];
        yield 'select' => ['SELECT 1', $m, null];
        yield 'leading space and semicolons' => ["  ;\n commit;", $m, 'COMMIT'];
    }

    /**
     * @dataProvider transactionControlCases
     */
    public function testTransactionControl(string $sql, string $dialect, ?string $expected): void
    {
        self::assertSame($expected, SqlText::transactionControl($sql, $dialect));
    }

    public function testSetsSqlMode(): void
    {
        self::assertTrue(SqlText::setsSqlMode("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'"));
        self::assertTrue(SqlText::setsSqlMode("SET sql_mode='ANSI'"));
        self::assertTrue(SqlText::setsSqlMode("SET @@sql_mode := ''"));
        self::assertTrue(SqlText::setsSqlMode("SET @@session.sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"));
        self::assertTrue(SqlText::setsSqlMode("SET NAMES utf8mb4, SESSION sql_mode = ''"));
        self::assertTrue(SqlText::setsSqlMode("/* x */ SET LOCAL sql_mode = ''"));
        self::assertFalse(SqlText::setsSqlMode("SET GLOBAL sql_mode = ''"), 'a global change reaches new sessions only');
        self::assertFalse(SqlText::setsSqlMode("SET @sql_mode = ''"));
        self::assertFalse(SqlText::setsSqlMode("SELECT @@sql_mode"));
        self::assertFalse(SqlText::setsSqlMode("SET time_zone = 'sql_mode='"));
    }

    /**
     * The checks run on every statement of the integrations; they must not read a long statement's string literals
     * byte by byte (they once took about 80 ms each on a 2.6 MB INSERT, 12 us on a 300-byte one). The bound is
     * loose, for a shared machine: the work is now a few microseconds whatever the length.
     */
    public function testChecksOfALongStatementDoNotReadItsLiterals(): void
    {
        $sql = "INSERT INTO `wp_posts` (`post_content`) VALUES ('" . \str_repeat("It\\'s a \\\"post\\\" with ''quotes''. ", 80_000) . "')";
        $best = \INF;
        for ($round = 0; $round < 3; $round++) {
            $t = \hrtime(true);
            self::assertFalse(SqlText::setsSqlMode($sql));
            self::assertNull(SqlText::transactionControl($sql, SqlText::MYSQL));
            self::assertSame(['INSERT', 'INTO'], SqlText::leadingWords($sql, 3, SqlText::MYSQL));
            $best = \min($best, (\hrtime(true) - $t) / 1e6);
        }
        self::assertLessThan(10.0, $best, \sprintf('ms for the checks of a %d-byte statement', \strlen($sql)));
    }

    /** Under NO_BACKSLASH_ESCAPES `'x\'` is a whole literal: what follows it is code. */
    public function testSetsSqlModeFollowsNoBackslashEscapes(): void
    {
        $sql = "SET @a = 'x\\', sql_mode = ''";
        self::assertTrue(SqlText::setsSqlMode($sql, true));
        self::assertFalse(SqlText::setsSqlMode($sql, false), "with backslash escapes, sql_mode = is inside the literal");
        self::assertSame('SET autocommit', SqlText::transactionControl("SET @a = 'x\\', autocommit = 0", SqlText::MYSQL, true));
        self::assertNull(SqlText::transactionControl("SET @a = 'x\\', autocommit = 0", SqlText::MYSQL, false));
    }

    /** A caller that has the statement's code already (the WordPress drop-in's parse) passes it: not scanned again. */
    public function testChecksTakeTheCallersCode(): void
    {
        self::assertSame('COMMIT', SqlText::transactionControl('anything', SqlText::MYSQL, false, ' COMMIT '));
        self::assertTrue(SqlText::setsSqlMode('sql_mode', false, "SET sql_mode = ''"));
    }

    /** PostgreSQL's block comments nest; an E'...' literal has backslash escapes. */
    public function testPostgresNestedCommentsAndEscapeStrings(): void
    {
        self::assertSame('COMMIT', SqlText::transactionControl('/* a /* b */ c */ COMMIT', SqlText::PGSQL));
        self::assertSame(" SELECT E'' FROM t", SqlText::code("/* a /* b */ */SELECT E'\\' FROM' FROM t", SqlText::PGSQL));
        self::assertSame("SELECT e'', x''", SqlText::code("SELECT e'\\'', x'\\'", SqlText::PGSQL));
        self::assertSame("'' FROM''", SqlText::code("'\\' FROM' FROM t", SqlText::PGSQL), "a backslash in a standard string is a byte");
    }
    /** bind() rewrites PDO placeholders in code only, as PDO reads them: a MySQL executable comment is a comment. */
    public function testBindRewritesPlaceholdersInCodeOnly(): void
    {
        self::assertSame(['select $1, \'?\', "?", $$ ? $$ /* ? /* ? */ ? */ from t where a ? $2', [1, 2]], SqlText::bind('select ?, \'?\', "?", $$ ? $$ /* ? /* ? */ ? */ from t where a ?? ?', [1, 2], SqlText::PGSQL));
        self::assertSame(['select a$b$ $1', [1]], SqlText::bind('select a$b$ ?', [1], SqlText::PGSQL), 'a $ inside a word starts no dollar quote');
        self::assertSame(["select /*! ?? */ ?, '\\'??' ?", [1]], SqlText::bind("select /*! ?? */ ??, '\\'??' ?", [1], SqlText::MYSQL));
        self::assertSame(['select $1::int, $2, $1', [1, 2]], SqlText::bind('select :a::int, :b, :a', [':a' => 1, 'b' => 2], SqlText::PGSQL));
        self::assertSame(['select ?, ?, ?', [1, 2, 1]], SqlText::bind('select :a, :b, :a', ['a' => 1, 'b' => 2], SqlText::MYSQL));
        self::assertSame(['select ? -- ?', [1, 2]], SqlText::bind('select ? -- ?', [3 => 1, 7 => 2], SqlText::MYSQL), 'MySQL: no `??`, nothing to rewrite');
    }

    public function testBindRefusesWhatDoesNotFit(): void
    {
        foreach ([
            ['select :a, ?', ['a' => 1], SqlText::PGSQL, 'the statement mixes positional (?) and named (:name) parameters; use one kind'],
            ['select :a, :b', ['a' => 1], SqlText::MYSQL, 'no value is bound to the named parameter :b'],
            ['select ?, ?', [1], SqlText::PGSQL, 'the statement has 2 ? placeholders but 1 bindings'],
        ] as [$sql, $bindings, $dialect, $want]) {
            try {
                SqlText::bind($sql, $bindings, $dialect);
                self::fail("bind accepted $sql");
            } catch (LogicException $e) {
                self::assertSame($want, $e->getMessage());
            }
        }
    }

    public function testStatementCountSkipsLiteralsAndComments(): void
    {
        self::assertSame(1, SqlText::statementCount("insert into t values ('a;b'); -- c; d\n", SqlText::MYSQL));
        self::assertSame(1, SqlText::statementCount('select 1; /*! select 2 */', SqlText::MYSQL), 'read as bind() reads it: an executable comment is a comment');
        self::assertSame(1, SqlText::statementCount('create function f() returns int as $$ begin return 1; end $$ language plpgsql;', SqlText::PGSQL));
        self::assertSame(0, SqlText::statementCount(' ; /* ; /* ; */ ; */ ', SqlText::PGSQL));
    }
}
