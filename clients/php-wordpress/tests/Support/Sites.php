<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/**
 * Sites holds the WordPress sites of the test run, made, served and installed once for all tests: `native`
 * (WordPress's own mysqli to the MariaDB socket, table prefix wpn_), `tether` (the db.php drop-in, table prefix
 * wpt_) and `cached` (the drop-in with TETHER_CACHE_TTL of a minute, table prefix wpc_: any read the cache served
 * stale after a write would show), all in database TETHER_IT_DB, all installed over HTTP through
 * wp-admin/install.php. Their servers stop when PHPUnit exits.
 */
final class Sites
{
    /** Worker processes of the Tether site's `php -S` (LoadTest starts servers of its own). */
    public const TETHER_WORKERS = 4;

    /** The cached site's TETHER_CACHE_TTL: far longer than a test run's visit, so only invalidation keeps it fresh. */
    public const CACHE_TTL_MS = 60000;

    private static ?self $instance = null;

    private function __construct(
        public readonly WordPressSite $native,
        public readonly WordPressSite $tether,
        public readonly WordPressSite $cached,
    ) {
    }

    public static function get(): self
    {
        if (self::$instance !== null) {
            return self::$instance;
        }
        $native = WordPressSite::create('native', 'wpn_', false);
        $tether = WordPressSite::create('tether', 'wpt_', true);
        $cached = WordPressSite::create('cached', 'wpc_', true, null, self::CACHE_TTL_MS);
        \register_shutdown_function(static function () use ($native, $tether, $cached): void {
            $native->stop();
            $tether->stop();
            $cached->stop();
        });
        $native->start(2);
        $tether->start(self::TETHER_WORKERS);
        $cached->start(2);
        $native->install(new Browser());
        $tether->install(new Browser());
        $cached->install(new Browser());

        return self::$instance = new self($native, $tether, $cached);
    }
}
