<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Cache;

use PHPUnit\Framework\TestCase;
use Tether\Cache\LocalCache;

/**
 * LocalCacheTest checks what a hit requires against a versions segment this test writes itself in tetherd's layout
 * (docs/protocol.md, "Table versions"): every slot version, the generation, the reset counter, a recent heartbeat
 * and the TTL. APCu must be on (apc.enable_cli=1 under the CLI: scripts/test.sh runs phpunit so).
 */
final class LocalCacheTest extends TestCase
{
    private string $dir;
    private \Shmop $shm;

    protected function setUp(): void
    {
        self::assertTrue(LocalCache::available(), 'APCu is off: run phpunit with php -d apc.enable_cli=1 (scripts/test.sh does)');
        LocalCache::forget();
        $this->dir = sys_get_temp_dir() . '/tether-lcu-' . bin2hex(random_bytes(4));
        mkdir($this->dir);
        touch($this->dir . '/t.sock.versions');
        $shm = shmop_open(ftok($this->dir . '/t.sock.versions', 'T'), 'c', 0600, 64 + 8 * 16);
        self::assertNotFalse($shm);
        $this->shm = $shm;
        shmop_write($shm, 'TTHRVER1' . pack('VV', 1, 16) . pack('PPP', 77, 0, (int) (microtime(true) * 1000)) . pack('V', 2000), 0);
        shmop_write($shm, str_repeat("\0", 8 * 16), 64);
    }

    protected function tearDown(): void
    {
        shmop_delete($this->shm);
        unlink($this->dir . '/t.sock.versions');
        rmdir($this->dir);
        LocalCache::forget();
    }

    private function bump(int $slot): void
    {
        $v = unpack('P', shmop_read($this->shm, 64 + 8 * $slot, 8))[1];
        shmop_write($this->shm, pack('P', $v + 1), 64 + 8 * $slot);
    }

    /** keep stores ['v' => 1] read under slot 3 and 9 at their current versions, for $ttlMs. */
    private function keep(LocalCache $cache, string $key, int $ttlMs = 60000): void
    {
        $versions = ['generation' => 77, 'reset' => 0, 'slots' => [3, 9], 'values' => [
            unpack('P', shmop_read($this->shm, 64 + 24, 8))[1], unpack('P', shmop_read($this->shm, 64 + 72, 8))[1],
        ]];
        $cache->store($key, ['v' => 1], $versions, microtime(true) * 1000 + $ttlMs, $ttlMs);
    }

    public function testServedOnlyWhileEveryVersionHolds(): void
    {
        $cache = new LocalCache($this->dir . '/t.sock', 65536);
        $key = $cache->key('first', 'db', 'SELECT v FROM t WHERE id = ?', [1], null, '');
        self::assertNotNull($key);
        self::assertNotSame($key, $cache->key('first', 'db', 'SELECT v FROM t WHERE id = ?', ['1'], null, ''), '1 and "1" keyed alike');
        self::assertNotSame($key, $cache->key('first', 'db', 'SELECT v FROM t WHERE id = ?', [1], null, 'tz=+03:00'), 'settings not keyed');
        self::assertNotSame($key, $cache->key('rows', 'db', 'SELECT v FROM t WHERE id = ?', [1], null, ''), 'reply forms keyed alike');

        $this->keep($cache, $key);
        self::assertTrue($cache->fetch($key, $value));
        self::assertSame(['v' => 1], $value);

        $this->bump(5); // another table's slot
        self::assertTrue($cache->fetch($key, $value), 'a bump of an unrelated slot');
        $this->bump(9);
        self::assertFalse($cache->fetch($key, $value), 'served after a slot it depends on was bumped');

        $this->keep($cache, $key);
        self::assertTrue($cache->fetch($key, $value));
        shmop_write($this->shm, pack('P', 1), 24); // the reset counter: a reload
        self::assertFalse($cache->fetch($key, $value), 'served after a reset');
        shmop_write($this->shm, pack('P', 0), 24);
        self::assertTrue($cache->fetch($key, $value));
        shmop_write($this->shm, pack('P', 78), 16); // a new generation: tetherd restarted
        self::assertFalse($cache->fetch($key, $value), 'served under another generation');
        $this->keep($cache, $key); // read under 77, which is not current: not kept
        self::assertFalse($cache->fetch($key, $value), 'kept a result of another generation');
    }

    public function testHeartbeatAndTtl(): void
    {
        $cache = new LocalCache($this->dir . '/t.sock', 65536);
        $key = (string) $cache->key('first', 'db', 'SELECT 1', [], null, '');
        $this->keep($cache, $key);
        self::assertTrue($cache->fetch($key, $value));
        // tetherd's heartbeat 3 s old (killed without closing the segment): nothing served. The check runs at most
        // every 250 ms: a new LocalCache checks at once.
        shmop_write($this->shm, pack('P', (int) (microtime(true) * 1000) - 3000), 32);
        $fresh = new LocalCache($this->dir . '/t.sock', 65536);
        self::assertFalse($fresh->fetch($key, $value), 'served without a heartbeat');
        shmop_write($this->shm, pack('P', (int) (microtime(true) * 1000)), 32);
        self::assertTrue($fresh->fetch($key, $value));

        $this->keep($cache, $key, 50);
        self::assertTrue($cache->fetch($key, $value));
        time_nanosleep(0, 60_000_000);
        self::assertFalse($cache->fetch($key, $value), 'served past its TTL');
    }

    public function testNoSegmentNoKey(): void
    {
        $cache = new LocalCache($this->dir . '/other.sock', 65536);
        self::assertNull($cache->key('first', 'db', 'SELECT 1', [], null, ''));
        // A closed segment (generation 0) is none either.
        shmop_write($this->shm, pack('P', 0), 16);
        LocalCache::forget();
        self::assertNull((new LocalCache($this->dir . '/t.sock', 65536))->key('first', 'db', 'SELECT 1', [], null, ''));
    }

    public function testTooLargeIsNotKept(): void
    {
        $cache = new LocalCache($this->dir . '/t.sock', 100);
        $key = (string) $cache->key('rows', 'db', 'SELECT 1', [], null, '');
        apcu_delete($key);
        $cache->store($key, array_fill(0, 50, ['v' => 'x']), ['generation' => 77, 'reset' => 0, 'slots' => [1], 'values' => [0]], microtime(true) * 1000 + 1000, 1000);
        self::assertFalse($cache->fetch($key, $value));
    }
}
