<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Cache\LocalCache;
use Tether\Client;

/**
 * LocalCacheTest checks the local cache (the Client option local_cache) against a real tetherd with cache.local on
 * (scripts/test.sh's): a repeated cacheable read is answered without a call (tetherd's time for the request's calls
 * does not move), a write through tetherd is never followed by a stale hit, the TTL bounds an entry, parameters are
 * keyed by type, a session setting keeps the entry of another settings profile from being served, and without
 * tetherd's versions (no segment) reads go to tetherd as they did. APCu must be on (apc.enable_cli=1 under the CLI:
 * scripts/test.sh runs phpunit so); every worker of a host sharing the entries is the history checker's part
 * (server/cachelocal_checker_test.go).
 */
final class LocalCacheTest extends IntegrationTestCase
{
    private const TTL = 600000;

    /** @return iterable<string, array{string, string}> the backends tetherd's result cache serves: MySQL, PostgreSQL */
    public static function cachedBackends(): iterable
    {
        yield from self::backendsOfType('mysql');
        yield from self::backendsOfType('postgres');
    }

    protected function setUp(): void
    {
        parent::setUp();
        self::assertTrue(LocalCache::available(), 'APCu is off: run phpunit with php -d apc.enable_cli=1 (scripts/test.sh does)');
    }

    private function localClient(): Client
    {
        return $this->createClient(['socket' => (string) getenv('TETHER_SOCKET'), 'local_cache' => true]);
    }

    /** @return array<string, int> how each counter moved since $before */
    private static function moved(array $before): array
    {
        $out = [];
        foreach (LocalCache::stats() as $name => $n) {
            $out[$name] = $n - $before[$name];
        }

        return $out;
    }

    /**
     * settle reads $sql until it is a hit that comes more than 150 ms after the last read that was not: tetherd's
     * change stream reports the test's own writes again (once when they arrive, and once 100 ms later, see
     * server/changestream.go), and each report makes the entries of their tables stale, as it should.
     *
     * @param list<mixed> $params
     */
    private static function settle(Client $local, string $sql, array $params, string $backend, int $ttl = self::TTL): void
    {
        $deadline = microtime(true) + 10;
        $lastMiss = microtime(true);
        while (microtime(true) < $deadline) {
            $hits = LocalCache::stats()['hits'];
            $local->queryOne($sql, $params, $backend, null, $ttl);
            if (LocalCache::stats()['hits'] === $hits) {
                $lastMiss = microtime(true);
            } elseif (microtime(true) - $lastMiss > 0.15) {
                return;
            }
            usleep(10000);
        }
        self::fail("no steady hits of $sql within 10 s");
    }

    /** @dataProvider cachedBackends */
    public function testHitsWithoutACallUntilAWriteThroughTether(string $backend, string $type): void
    {
        $table = $this->table($backend, $type);
        $this->client->execute("INSERT INTO $table (id, name, i) VALUES (1, 'a', 10)", [], $backend);
        $local = $this->localClient();
        $sql = self::sql($type, "SELECT name, i FROM $table WHERE id = ?");
        $before = LocalCache::stats();

        self::assertSame(['name' => 'a', 'i' => 10], $local->queryOne($sql, [1], $backend, null, self::TTL));
        self::assertSame(1, self::moved($before)['stores'], 'the first read kept');
        self::settle($local, $sql, [1], $backend);

        // A hit calls nothing: tetherd's time for this request's calls does not move.
        $served = $local->serverMicrosTotal();
        $hits = LocalCache::stats()['hits'];
        for ($i = 0; $i < 10; $i++) {
            self::assertSame(['name' => 'a', 'i' => 10], $local->queryOne($sql, [1], $backend, null, self::TTL));
        }
        self::assertSame($served, $local->serverMicrosTotal(), 'a hit reached tetherd');
        self::assertSame($hits + 10, LocalCache::stats()['hits']);

        // The other reply forms are kept apart, and each is right.
        self::assertSame([['name' => 'a', 'i' => 10]], $local->query($sql, [1], $backend, null, self::TTL));
        self::assertSame([['name' => 'a', 'i' => 10]], $local->query($sql, [1], $backend, null, self::TTL));
        self::assertSame([['a', 10]], $local->queryNumeric($sql, [1], $backend, null, self::TTL)->rows);
        self::assertSame([['a', 10]], $local->queryNumeric($sql, [1], $backend, null, self::TTL)->rows);
        self::assertSame(['a'], $local->queryColumns($sql, [1], $backend, null, self::TTL)->column('name'));
        self::assertSame(['a'], $local->queryColumns($sql, [1], $backend, null, self::TTL)->column('name'));

        // A write through tetherd, by a client on another socket: never followed by a stale hit.
        $writer = $this->createClient(['socket' => (string) getenv('TETHER_SOCKET'), 'persistent' => false]);
        for ($v = 11; $v <= 15; $v++) {
            $writer->execute("UPDATE $table SET i = $v WHERE id = 1", [], $backend);
            self::assertSame(['name' => 'a', 'i' => $v], $local->queryOne($sql, [1], $backend, null, self::TTL), "after the write of $v");
            self::assertSame(['name' => 'a', 'i' => $v], $local->queryOne($sql, [1], $backend, null, self::TTL), "after the write of $v, again");
        }
        $m = self::moved($before);
        self::assertGreaterThanOrEqual(5, $m['stale'], 'entries refused as stale after writes');
        // A committed transaction too.
        $writer->transaction(static function ($tx) use ($table): void {
            $tx->execute("UPDATE $table SET i = 16 WHERE id = 1");
        }, $backend);
        self::assertSame(['name' => 'a', 'i' => 16], $local->queryOne($sql, [1], $backend, null, self::TTL));
        $writer->close();
    }

    /** @dataProvider cachedBackends */
    public function testTtlAndTypedParameters(string $backend, string $type): void
    {
        $table = $this->table($backend, $type);
        $this->client->execute("INSERT INTO $table (id, name, i) VALUES (1, 'a', 10)", [], $backend);
        $local = $this->localClient();
        $sql = self::sql($type, "SELECT i FROM $table WHERE id = ?");
        $local->queryOne($sql, [1], $backend, null, 1000);
        self::settle($local, $sql, [1], $backend, 1000);
        // Past the TTL (counted from before the read was sent: at most 1 s ago), the entry is not served.
        $before = LocalCache::stats();
        time_nanosleep(1, 50_000_000);
        self::assertSame(['i' => 10], $local->queryOne($sql, [1], $backend, null, 1000));
        self::assertSame(1, self::moved($before)['expired'], 'an entry past its TTL');

        // 1 and "1" are two keys (the database may compare them alike; the cache does not assume it).
        $before = LocalCache::stats();
        self::assertNull($local->queryOne($sql, ['2'], $backend, null, self::TTL));
        self::assertNull($local->queryOne($sql, [2], $backend, null, self::TTL));
        self::assertSame(2, self::moved($before)['stores']);
    }

    /** @dataProvider cachedBackends */
    public function testSessionSettingsAreKeyed(string $backend, string $type): void
    {
        $table = $this->table($backend, $type);
        $this->client->execute("INSERT INTO $table (id, name, i) VALUES (1, 'a', 10)", [], $backend);
        $local = $this->createClient(['socket' => (string) getenv('TETHER_SOCKET'), 'local_cache' => true, 'persistent' => false]);
        $sql = self::sql($type, "SELECT i FROM $table WHERE id = ?");
        $local->queryOne($sql, [1], $backend, null, self::TTL);
        self::settle($local, $sql, [1], $backend);
        $before = LocalCache::stats();
        // A session setting: the settings are unknown until tetherd tells them again, then another profile's key.
        $local->execute($type === 'mysql' ? "SET time_zone = '+03:00'" : "SET TimeZone = 'Europe/Moscow'", [], $backend);
        self::assertSame(['i' => 10], $local->queryOne($sql, [1], $backend, null, self::TTL));
        $m = self::moved($before);
        self::assertSame(1, $m['unknown'], 'the first read after a SET goes to tetherd');
        self::assertSame(0, $m['hits'], 'an entry of the baseline settings served under others');
        self::assertSame(1, $m['stores'], 'kept under the new settings');
        self::assertSame(['i' => 10], $local->queryOne($sql, [1], $backend, null, self::TTL));
        self::assertSame(1, self::moved($before)['hits']);
        $local->close();
    }

    /** @dataProvider backends */
    public function testWithoutVersionsReadsGoToTetherd(string $backend, string $type): void
    {
        $table = $this->table($backend, $type);
        $this->client->execute("INSERT INTO $table (id, name, i) VALUES (1, 'a', 10)", [], $backend);
        // The socket through a symlink with no key file beside it: no segment to read, as with an older tetherd.
        $dir = sys_get_temp_dir() . '/tether-lc-' . bin2hex(random_bytes(4));
        mkdir($dir);
        symlink((string) getenv('TETHER_SOCKET'), "$dir/t.sock");
        try {
            $local = $this->createClient(['socket' => "$dir/t.sock", 'local_cache' => true, 'persistent' => false]);
            $sql = self::sql($type, "SELECT i FROM $table WHERE id = ?");
            $before = LocalCache::stats();
            $served = $local->serverMicrosTotal();
            for ($i = 0; $i < 3; $i++) {
                self::assertSame(['i' => 10], $local->queryOne($sql, [1], $backend, null, self::TTL));
            }
            self::assertSame(0, self::moved($before)['stores'] + self::moved($before)['hits']);
            self::assertGreaterThan($served, $local->serverMicrosTotal(), 'every read went to tetherd');
            $local->close();
        } finally {
            unlink("$dir/t.sock");
            rmdir($dir);
        }
    }
}
