<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Unit;

use Doctrine\DBAL\Platforms\MariaDb1027Platform;
use Doctrine\DBAL\Platforms\MySQL80Platform;
use Doctrine\DBAL\Platforms\PostgreSQL100Platform;
use PHPUnit\Framework\TestCase;
use Tether\DBAL\Dialect;
use Tether\DBAL\Driver;
use Tether\DBAL\Exception\DriverError;
use Tether\DBAL\PlaceholderRewriter;
use Tether\DBAL\SqlText;

/** DialectTest: the parts of the driver that need no server (version strings, placeholders, SQL text). */
final class DialectTest extends TestCase
{
    /** @return array<string, array{string, Dialect}> */
    public static function versions(): array
    {
        return [
            'mariadb as it reports' => ['10.11.19-MariaDB-0+deb12u1', Dialect::MySQL],
            'dbal mariadb convention' => ['mariadb-10.11.6', Dialect::MySQL],
            'mysql 8' => ['8.0.31', Dialect::MySQL],
            'mysql 5.7' => ['5.7.40', Dialect::MySQL],
            'postgresql as it reports' => ['PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu', Dialect::PostgreSQL],
            'postgresql dbal convention' => ['15', Dialect::PostgreSQL],
        ];
    }

    /** @dataProvider versions */
    public function testDialectFromServerVersion(string $version, Dialect $want): void
    {
        self::assertSame($want, Dialect::fromServerVersion($version));
    }

    public function testVersionWithoutNumberIsAnError(): void
    {
        $this->expectException(DriverError::class);
        $this->expectExceptionMessage("'latest'");
        Dialect::fromServerVersion('latest');
    }

    public function testPlatformForServerVersion(): void
    {
        self::assertInstanceOf(MariaDb1027Platform::class, (new Driver())->createDatabasePlatformForVersion('10.11.19-MariaDB-0+deb12u1'));
        self::assertInstanceOf(MySQL80Platform::class, (new Driver())->createDatabasePlatformForVersion('8.0.31'));
        self::assertInstanceOf(PostgreSQL100Platform::class, (new Driver())->createDatabasePlatformForVersion('PostgreSQL 15.18 on x86_64'));
    }

    public function testPlaceholders(): void
    {
        $sql = "SELECT ?, '?', \"a?\", x::int, :name, ? -- ?\nFROM t WHERE a = :name";
        self::assertSame(
            ["SELECT \$1, '?', \"a?\", x::int, \$2, \$3 -- ?\nFROM t WHERE a = \$4", [1, 'name', 2, 'name']],
            PlaceholderRewriter::rewrite($sql, Dialect::PostgreSQL),
        );
        self::assertSame(
            ["SELECT ?, '?', `a?`, ? FROM t", [1, 'b']],
            PlaceholderRewriter::rewrite("SELECT ?, '?', `a?`, :b FROM t", Dialect::MySQL),
        );
        self::assertSame(['SELECT 1', []], PlaceholderRewriter::rewrite('SELECT 1', Dialect::PostgreSQL));
    }

    public function testSqlText(): void
    {
        self::assertTrue(SqlText::returnsRows(" /* c */ (SELECT 1)"));
        self::assertTrue(SqlText::returnsRows("-- x\nWITH a AS (SELECT 1) SELECT * FROM a"));
        self::assertTrue(SqlText::returnsRows('INSERT INTO t (a) VALUES (1) RETURNING id'));
        self::assertFalse(SqlText::returnsRows('UPDATE t SET a = 1'));
        self::assertTrue(SqlText::isInsert('insert into t values (1)'));
        self::assertFalse(SqlText::isInsert('INSERT INTO t VALUES (1) RETURNING id'));
    }
}
