<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Tether\Cache\LocalCache;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * LocalCacheTest checks the parameter tether_local_cache (top level or in driverOptions): with it, a cacheable read
 * (tether_cache_ttl, ResultCache::with()) that was read once is answered again inside the PHP worker, from APCu,
 * without a call to tetherd (LocalCache's `hits` counter moves), and a write through the connection is never
 * followed by a stale hit; without it, no read is answered locally. Needs tetherd's `[cache] local = true`
 * (scripts/lib/integration.sh writes it) and APCu in the CLI (scripts/integration-test.sh runs phpunit with
 * apc.enable_cli=1).
 */
final class LocalCacheTest extends IntegrationTestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        self::assertTrue(LocalCache::available(), 'APCu or shmop is off: run phpunit with php -d apc.enable_cli=1 (scripts/integration-test.sh does)');
    }

    /** hits returns how many reads the host's local cache answered so far. */
    private static function hits(): int
    {
        return LocalCache::stats()['hits'];
    }

    private static function table(Connection $conn): void
    {
        $conn->executeStatement('DROP TABLE IF EXISTS dbal_local');
        $conn->executeStatement('CREATE TABLE dbal_local (id INT PRIMARY KEY, v VARCHAR(20))');
        $conn->insert('dbal_local', ['id' => 1, 'v' => 'first']);
    }

    /** @return array<string, array{string, array<string, mixed>}> each backend, the parameter at the top level and in driverOptions */
    public static function placements(): array
    {
        $out = [];
        foreach (self::backends() as $name => [$kind]) {
            $out["$name, parameter"] = [$kind, ['tether_cache_ttl' => 60000, 'tether_local_cache' => true]];
            $out["$name, driverOptions"] = [$kind, ['driverOptions' => ['tether_cache_ttl' => 60000, 'tether_local_cache' => true]]];
        }

        return $out;
    }

    /**
     * @dataProvider placements
     * @param array<string, mixed> $params
     */
    public function testLocalCacheServesARepeatedReadInTheWorker(string $kind, array $params): void
    {
        $conn = $this->connect($kind, $params);
        self::table($conn);
        $read = static fn () => $conn->fetchOne('SELECT v FROM dbal_local WHERE id = ?', [1]);

        self::assertSame('first', $read(), 'the first read goes to tetherd, and is kept');
        $before = self::hits();
        self::assertSame('first', $read());
        self::assertSame('first', $read());
        self::assertSame(2, self::hits() - $before, 'the repeated reads are answered in the worker');

        $conn->executeStatement('UPDATE dbal_local SET v = ? WHERE id = ?', ['through', 1]);
        $before = self::hits();
        self::assertSame('through', $read(), 'a write through the connection: no stale hit');
        self::assertSame(0, self::hits() - $before, 'the entry the write made stale is not served');
        self::assertSame('through', $read());
        self::assertSame(1, self::hits() - $before, 'kept again after the write');
        $conn->executeStatement('DROP TABLE dbal_local');
    }

    /** @dataProvider backends */
    public function testWithoutTheParameterNoReadIsServedLocally(string $kind): void
    {
        $conn = $this->connect($kind, ['tether_cache_ttl' => 60000]);
        self::table($conn);
        $before = self::hits();
        for ($i = 0; $i < 3; ++$i) {
            self::assertSame('first', $conn->fetchOne('SELECT v FROM dbal_local WHERE id = ?', [1]));
        }
        self::assertSame(0, self::hits() - $before, 'without tether_local_cache every read goes to tetherd');
        $conn->executeStatement('DROP TABLE dbal_local');
    }

    public function testBadLocalCacheIsRefused(): void
    {
        $this->expectExceptionMessage('tether_local_cache');
        $this->connect('mysql', ['tether_local_cache' => 'yes'])->fetchOne('SELECT 1');
    }
}
