<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\WordPress\CausalCookie;
use Tether\WordPress\Config;

/** What the drop-in takes from the tether_causal cookie (TETHER_CAUSAL), before the client judges it. */
final class CausalCookieTest extends TestCase
{
    public function testOnlyWhatCanBeATokenIsTaken(): void
    {
        self::assertSame('eyJtIjoiMC0xLTQyIn0', CausalCookie::fromCookies([CausalCookie::NAME => 'eyJtIjoiMC0xLTQyIn0']));
        self::assertNull(CausalCookie::fromCookies([]));
        self::assertNull(CausalCookie::fromCookies([CausalCookie::NAME => '']));
        self::assertNull(CausalCookie::fromCookies([CausalCookie::NAME => ['a']]), 'tether_causal[]=a');
        self::assertNull(CausalCookie::fromCookies([CausalCookie::NAME => 'a b']));
        self::assertNull(CausalCookie::fromCookies([CausalCookie::NAME => 'a+b/c=']), 'base64url only');
        self::assertNull(CausalCookie::fromCookies([CausalCookie::NAME => \str_repeat('A', 2049)]), 'bounded');
    }

    public function testCausalIsOffByDefault(): void
    {
        self::assertFalse((new Config())->causal);
        self::assertTrue((new Config(causal: true))->causal);
        self::assertArrayNotHasKey('causal_token', (new Config(causal: true))->clientOptions(), 'the token comes from the request, not the config');
    }
}
