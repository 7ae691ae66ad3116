<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\Schema\Blueprint;
use Tether\Laravel\Tests\Support\Databases;

/**
 * CacheTest checks the ways a Laravel application marks reads cacheable in tetherd's shared result cache: the
 * connection option `cache_ttl` and `withCache()`. A change made behind tetherd's back (a direct PDO connection) is
 * not seen by a cached read within its TTL, which shows the cache answered; a write through the connection, or a
 * transaction, gives the fresh value.
 */
final class CacheTest extends TestCase
{
    private function table(Connection $db): void
    {
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('cache_items');
        $schema->create('cache_items', static function (Blueprint $t): void {
            $t->integer('id')->primary();
            $t->string('v');
        });
        $db->table('cache_items')->insert(['id' => 1, 'v' => 'first']);
    }

    /** @dataProvider platforms */
    public function testWithCacheServesUntilAWriteThroughTether(string $platform): void
    {
        $db = $this->connect($platform);
        $this->table($db);
        $direct = Databases::direct($platform);
        $read = static fn () => $db->withCache(60000, static fn () => $db->table('cache_items')->where('id', 1)->value('v'));

        self::assertSame('first', $read());
        $direct->exec("UPDATE cache_items SET v = 'behind' WHERE id = 1");
        self::assertSame('first', $read(), 'a cached read within its TTL');
        self::assertSame('behind', $db->table('cache_items')->where('id', 1)->value('v'), 'outside withCache: no cache');

        $db->table('cache_items')->where('id', 2)->update(['v' => 'x']); // a write through tetherd, of no row
        self::assertSame('behind', $read(), 'after a write through the connection');

        $direct->exec("UPDATE cache_items SET v = 'in tx' WHERE id = 1");
        $inTx = $db->transaction(static fn () => $read());
        self::assertSame('in tx', $inTx, 'inside a transaction nothing comes from the cache');
        self::assertSame(42, $db->withCache(1000, static fn () => 42), 'withCache returns what its callback returns');
    }

    /** @dataProvider platforms */
    public function testCacheTtlOptionCachesEveryRead(string $platform): void
    {
        $db = $this->connect($platform, ['cache_ttl' => 60000]);
        $this->table($db);
        $direct = Databases::direct($platform);
        $read = static fn () => $db->table('cache_items')->where('id', 1)->value('v');

        self::assertSame('first', $read());
        $direct->exec("UPDATE cache_items SET v = 'behind' WHERE id = 1");
        self::assertSame('first', $read(), 'cached by the connection option');
        self::assertSame('behind', $db->withCache(0, $read), 'withCache(0) turns it off for its callback');
        self::assertSame('first', $read(), 'and back on after it');
    }

    /** @dataProvider platforms */
    public function testCacheTtlOptionIsChecked(string $platform): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('option cache_ttl');
        $this->connect($platform, ['cache_ttl' => '5s'])->getPdo();
    }
}
