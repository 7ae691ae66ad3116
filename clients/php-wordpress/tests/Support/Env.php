<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/** Env reads the variables scripts/lib/integration.sh exports for the tests. */
final class Env
{
    /** get returns the variable's value; a missing one is an error naming it (the tests need the real tetherd). */
    public static function get(string $name): string
    {
        $value = \getenv($name);
        if ($value === false || $value === '') {
            throw new \RuntimeException("environment variable $name is not set: run the tests with scripts/integration-test.sh wordpress");
        }

        return $value;
    }

    /** mysqli opens a direct connection to the test database (the baseline, and SHOW PROCESSLIST). */
    public static function mysqli(): \mysqli
    {
        \mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $link = new \mysqli('localhost', self::get('TETHER_IT_USER'), self::get('TETHER_IT_PASSWORD'), self::get('TETHER_IT_DB'), 0, self::get('TETHER_IT_MYSQL_SOCKET'));
        $link->set_charset('utf8mb4');

        return $link;
    }
}
