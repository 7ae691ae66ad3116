<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Tether\Laravel\Tests\Support\Databases;

/**
 * ExamplePageTest runs examples/capsule-page.php (the README's Capsule snippet) as a PHP process of its own, twice,
 * and checks what it prints.
 */
final class ExamplePageTest extends TestCase
{
    /** @dataProvider platforms */
    public function testTheCapsulePageRuns(string $platform): void
    {
        Databases::direct($platform)->exec('DROP TABLE IF EXISTS page_visits');
        $env = [
            'TETHER_SOCKET' => Databases::env('TETHER_SOCKET'),
            'TETHER_BACKEND' => Databases::env($platform === Databases::MYSQL ? 'TETHER_IT_MYSQL_BACKEND' : 'TETHER_IT_PGSQL_BACKEND'),
            'TETHER_PLATFORM' => $platform,
            'PATH' => (string) \getenv('PATH'),
        ];
        foreach ([1, 2] as $visits) {
            $process = \proc_open([\PHP_BINARY, \dirname(__DIR__, 2) . '/examples/capsule-page.php'], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
            self::assertIsResource($process);
            $out = (string) \stream_get_contents($pipes[1]);
            $err = (string) \stream_get_contents($pipes[2]);
            self::assertSame(0, \proc_close($process), "the page failed: $err $out");
            $page = \json_decode($out, true, 8, \JSON_THROW_ON_ERROR);
            self::assertStringContainsString($platform === Databases::MYSQL ? 'MariaDB' : 'PostgreSQL', $page['version']);
            self::assertContains($page['time_zone'], ['+00:00', '<+00>-00']);
            self::assertSame($visits, $page['visits']);
        }
    }
}
