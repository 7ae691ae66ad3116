<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Tether\DBAL\ResultCache;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * CacheTest: reads marked for tetherd's result cache (ResultCache::with(), the tether_cache_ttl parameter) are
 * answered from it within their TTL (a change made behind tetherd's back, over PDO, is not seen: the cache
 * answered), and fresh after a write through the connection or inside a transaction.
 */
final class CacheTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testResultCacheWithServesUntilAWriteThroughTether(string $kind): void
    {
        $conn = $this->connect($kind);
        $conn->executeStatement('DROP TABLE IF EXISTS dbal_cache');
        $conn->executeStatement('CREATE TABLE dbal_cache (id INT PRIMARY KEY, v VARCHAR(20))');
        $conn->insert('dbal_cache', ['id' => 1, 'v' => 'first']);
        $pdo = self::pdo($kind);
        $read = static fn () => $conn->fetchOne('SELECT v FROM dbal_cache WHERE id = ?', [1]);
        $cached = static fn () => ResultCache::with($conn, 60000, $read);

        self::assertSame('first', $cached());
        $pdo->exec("UPDATE dbal_cache SET v = 'behind' WHERE id = 1");
        self::assertSame('first', $cached(), 'a cached read within its TTL');
        self::assertSame('behind', $read(), 'outside ResultCache::with(): not cached');

        $conn->executeStatement('UPDATE dbal_cache SET v = ? WHERE id = ?', ['x', 2]); // a write through tetherd, of no row
        self::assertSame('behind', $cached(), 'after a write through the connection');

        $pdo->exec("UPDATE dbal_cache SET v = 'in tx' WHERE id = 1");
        $conn->beginTransaction();
        self::assertSame('in tx', $cached(), 'inside a transaction nothing comes from the cache');
        $conn->commit();
        $conn->executeStatement('DROP TABLE dbal_cache');
    }

    /** @dataProvider backends */
    public function testCacheTtlParameter(string $kind): void
    {
        $conn = $this->connect($kind, ['tether_cache_ttl' => 60000]);
        $conn->executeStatement('DROP TABLE IF EXISTS dbal_cache2');
        $conn->executeStatement('CREATE TABLE dbal_cache2 (id INT PRIMARY KEY, v VARCHAR(20))');
        $conn->insert('dbal_cache2', ['id' => 1, 'v' => 'first']);
        $read = static fn () => $conn->fetchOne('SELECT v FROM dbal_cache2 WHERE id = ?', [1]);

        self::assertSame('first', $read());
        self::pdo($kind)->exec("UPDATE dbal_cache2 SET v = 'behind' WHERE id = 1");
        self::assertSame('first', $read(), 'cached by the parameter');
        self::assertSame('behind', ResultCache::with($conn, 0, $read), 'ResultCache::with(0) turns it off for its callback');
        $conn->executeStatement('DROP TABLE dbal_cache2');
    }

    public function testBadCacheTtlIsRefused(): void
    {
        $this->expectExceptionMessage('tether_cache_ttl');
        $this->connect('mysql', ['tether_cache_ttl' => '5s'])->fetchOne('SELECT 1');
    }
}
