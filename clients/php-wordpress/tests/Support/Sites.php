<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/**
 * Sites holds the two WordPress sites of the test run, made, served and installed once for all tests: `native`
 * (WordPress's own mysqli to the MariaDB socket, table prefix wpn_) and `tether` (the db.php drop-in, table
 * prefix wpt_), both in database TETHER_IT_DB, both installed over HTTP through wp-admin/install.php. Their
 * servers stop when PHPUnit exits.
 */
final class Sites
{
    /** Worker processes of the Tether site's `php -S`: enough for the load test's 20 concurrent requests. */
    public const TETHER_WORKERS = 20;

    private static ?self $instance = null;

    private function __construct(
        public readonly WordPressSite $native,
        public readonly WordPressSite $tether,
    ) {
    }

    public static function get(): self
    {
        if (self::$instance !== null) {
            return self::$instance;
        }
        $native = WordPressSite::create('native', 'wpn_', false);
        $tether = WordPressSite::create('tether', 'wpt_', true);
        \register_shutdown_function(static function () use ($native, $tether): void {
            $native->stop();
            $tether->stop();
        });
        $native->start(2);
        $tether->start(self::TETHER_WORKERS);
        $native->install(new Browser());
        $tether->install(new Browser());

        return self::$instance = new self($native, $tether);
    }
}
