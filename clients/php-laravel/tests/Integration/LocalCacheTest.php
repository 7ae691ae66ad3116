<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\Schema\Blueprint;
use Tether\Cache\LocalCache;

/**
 * LocalCacheTest checks the connection option `local_cache`: with it, a cacheable read (cache_ttl, withCache()) that
 * was read once is answered again inside the PHP worker, from APCu, without a call to tetherd (LocalCache's `hits`
 * counter moves), and a write through the connection is never followed by a stale hit; without it, no read is
 * answered locally. Needs tetherd's `[cache] local = true` (scripts/lib/integration.sh writes it) and APCu in the
 * CLI (scripts/integration-test.sh runs phpunit with apc.enable_cli=1).
 */
final class LocalCacheTest extends TestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        self::assertTrue(LocalCache::available(), 'APCu or shmop is off: run phpunit with php -d apc.enable_cli=1 (scripts/integration-test.sh does)');
    }

    private function table(Connection $db): void
    {
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('local_items');
        $schema->create('local_items', static function (Blueprint $t): void {
            $t->integer('id')->primary();
            $t->string('v');
        });
        $db->table('local_items')->insert(['id' => 1, 'v' => 'first']);
    }

    /** hits returns how many reads the host's local cache answered so far. */
    private static function hits(): int
    {
        return LocalCache::stats()['hits'];
    }

    /** @dataProvider platforms */
    public function testLocalCacheServesARepeatedReadInTheWorker(string $platform): void
    {
        $db = $this->connect($platform, ['cache_ttl' => 60000, 'local_cache' => true]);
        $this->table($db);
        $read = static fn () => $db->table('local_items')->where('id', 1)->value('v');

        self::assertSame('first', $read(), 'the first read goes to tetherd, and is kept');
        $before = self::hits();
        self::assertSame('first', $read());
        self::assertSame('first', $read());
        self::assertSame(2, self::hits() - $before, 'the repeated reads are answered in the worker');

        $db->table('local_items')->where('id', 1)->update(['v' => 'through']);
        $before = self::hits();
        self::assertSame('through', $read(), 'a write through the connection: no stale hit');
        self::assertSame(0, self::hits() - $before, 'the entry the write made stale is not served');
        self::assertSame('through', $read());
        self::assertSame(1, self::hits() - $before, 'kept again after the write');
    }

    /** @dataProvider platforms */
    public function testWithoutTheOptionNoReadIsServedLocally(string $platform): void
    {
        $db = $this->connect($platform, ['cache_ttl' => 60000]);
        $this->table($db);
        $read = static fn () => $db->table('local_items')->where('id', 1)->value('v');

        $before = self::hits();
        for ($i = 0; $i < 3; ++$i) {
            self::assertSame('first', $read());
        }
        self::assertSame(0, self::hits() - $before, 'without local_cache every read goes to tetherd');
    }

    /** @dataProvider platforms */
    public function testLocalCacheOptionIsChecked(string $platform): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('option local_cache');
        $this->connect($platform, ['local_cache' => 'yes'])->getPdo();
    }
}
