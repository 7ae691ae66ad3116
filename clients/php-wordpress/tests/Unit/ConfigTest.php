<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\WordPress\Config;

/** The client options the drop-in's constants turn into. */
final class ConfigTest extends TestCase
{
    public function testLocalCacheIsAskedOnlyWithACacheTtl(): void
    {
        $this->assertTrue((new Config(cacheTtlMs: 5000, localCache: true))->clientOptions()['local_cache'] ?? false);
        // Without a TTL no read is cacheable: the local cache would only attach a segment for nothing.
        $this->assertArrayNotHasKey('local_cache', (new Config(cacheTtlMs: 0, localCache: true))->clientOptions());
        $this->assertArrayNotHasKey('local_cache', (new Config(cacheTtlMs: 5000))->clientOptions());
    }
}
