<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Tether\Client;
use Tether\WordPress\Tests\Support\Browser;
use Tether\WordPress\Tests\Support\Env;
use Tether\WordPress\Tests\Support\Sites;
use Tether\WordPress\Tests\Support\WordPressSite;

/**
 * LoadTest sends concurrent requests to the Tether site and watches the MariaDB server meanwhile: the sessions it
 * sees for the test database stay within the pool's max_conns, and each request still sees its own session
 * settings (WordPress's SET NAMES and sql_mode, its own time_zone) and its own FOUND_ROWS().
 *
 * Each concurrent request has a `php -S` of its own (one worker, on the Tether site's tables): one `php -S` with
 * many workers does not spread requests over them, as a worker accepts every connection it sees before serving
 * them one by one, and on a fast machine one worker took all 20 (at most 1 DO SLEEP at once).
 */
final class LoadTest extends TestCase
{
    /** max_conns of the backend in the tetherd.toml scripts/lib/integration.sh writes. */
    private const MAX_CONNS = 8;
    private const REQUESTS = 20;

    public function testConcurrentRequestsStayWithinThePoolAndKeepTheirSessions(): void
    {
        Sites::get(); // installs the wpt_ tables these servers of the Tether site use
        $servers = [];
        for ($i = 0; $i < self::REQUESTS; $i++) {
            $servers[$i] = WordPressSite::create("tether-load-$i", 'wpt_', true);
            $servers[$i]->start(1);
        }
        try {
            $this->loadAndWatch($servers);
        } finally {
            foreach ($servers as $server) {
                $server->stop();
            }
        }
    }

    /** @param list<WordPressSite> $servers one per concurrent request */
    private function loadAndWatch(array $servers): void
    {
        $monitor = Env::mysqli();
        $myId = (int) $monitor->query('SELECT CONNECTION_ID()')->fetch_row()[0];
        $db = Env::get('TETHER_IT_DB');
        $sessions = static function () use ($monitor, $myId, $db): int {
            $n = 0;
            foreach ($monitor->query('SHOW PROCESSLIST')->fetch_all(MYSQLI_ASSOC) as $p) {
                if ($p['User'] === 'tether' && $p['db'] === $db && (int) $p['Id'] !== $myId) {
                    $n++;
                }
            }

            return $n;
        };
        // Warm every worker once (each opens its persistent socket to tetherd and loads WordPress).
        $this->runConcurrently($servers, '/tether-probe.php?case=session&sleep=0&n=', static fn () => null);

        $peak = 0;
        $busyPeak = 0;
        $replies = $this->runConcurrently($servers, '/tether-probe.php?case=session&sleep=1&n=', static function () use ($sessions, $monitor, $myId, $db, &$peak, &$busyPeak): void {
            $peak = \max($peak, $sessions());
            // Other integrations use the user `tether` on their own databases at the same time: count this one's only.
            $busy = (int) $monitor->query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'tether' AND DB = '$db' AND ID <> $myId AND INFO LIKE 'DO SLEEP%'")->fetch_row()[0];
            $busyPeak = \max($busyPeak, $busy);
        });

        self::assertLessThanOrEqual(self::MAX_CONNS, $peak, "server sessions of the test database during the load: at most $peak seen");
        self::assertGreaterThan(1, $busyPeak, "requests ran concurrently on several pooled connections: at most $busyPeak DO SLEEP at once");
        self::assertCount(self::REQUESTS, $replies);
        foreach ($replies as $n => $reply) {
            $r = $reply['result'];
            self::assertSame($n, $r['n']);
            self::assertSame([], $r['errors'], "request $n: every statement succeeded (waiting for a pooled connection, not failing busy)");
            self::assertSame($r['tz_set'], $r['tz'], "request $n sees its own time_zone");
            self::assertSame((string) (100 + $n), $r['found'], "request $n sees its own FOUND_ROWS()");
            self::assertSame('utf8mb4', $r['cs'], "request $n: SET NAMES utf8mb4");
            self::assertSame('utf8mb4_unicode_520_ci', $r['coll'], "request $n: COLLATE");
            self::assertStringNotContainsString('STRICT_TRANS_TABLES', $r['sql_mode'], "request $n: WordPress's sql_mode");
        }
    }

    /**
     * With every pooled connection held (8 transactions of other clients) for longer than the backend's
     * acquire_timeout (1 s), a $wpdb query waits for a connection, as it would wait for a MySQL server, instead of
     * failing with tetherd's `busy` (TETHER_BUSY_WAIT).
     */
    public function testAQueryWaitsForAConnectionInsteadOfFailingBusy(): void
    {
        $site = Sites::get()->tether;
        $transactions = [];
        for ($i = 0; $i < self::MAX_CONNS; $i++) {
            $client = new Client(['socket' => Env::get('TETHER_SOCKET'), 'backend' => Env::get('TETHER_IT_MYSQL_BACKEND'), 'persistent' => false]);
            $transactions[] = $client->begin(null, 10000);
        }
        $multi = \curl_multi_init();
        $h = \curl_init($site->url('/tether-probe.php?case=select'));
        \curl_setopt_array($h, [CURLOPT_RETURNTRANSFER => true, CURLOPT_HEADER => true, CURLOPT_TIMEOUT => 60]);
        \curl_multi_add_handle($multi, $h);
        $heldUntil = \microtime(true) + 2.5;
        while (\microtime(true) < $heldUntil) {
            \curl_multi_exec($multi, $running);
            \curl_multi_select($multi, 0.05);
        }
        self::assertSame(1, $running, 'the request waits while every connection is held');
        foreach ($transactions as $tx) {
            $tx->commit();
        }
        do {
            \curl_multi_exec($multi, $running);
            \curl_multi_select($multi, 0.05);
        } while ($running > 0);
        $response = Browser::parse((string) \curl_multi_getcontent($h), \curl_getinfo($h, CURLINFO_HEADER_SIZE), \curl_getinfo($h, CURLINFO_RESPONSE_CODE));
        \curl_multi_close($multi);
        self::assertSame(200, $response->status, \substr($response->body, 0, 2000));
        $r = $response->json()['result'];
        self::assertSame(['value' => '42', 'error' => ''], ['value' => $r['value'], 'error' => $r['error']]);
    }

    /**
     * runConcurrently GETs $path . $i from $servers[$i] for every server, all at once, calling $tick while they run.
     *
     * @param list<WordPressSite> $servers
     * @return array<int, array<string, mixed>> decoded JSON replies by i
     */
    private function runConcurrently(array $servers, string $path, callable $tick): array
    {
        $multi = \curl_multi_init();
        $handles = [];
        foreach ($servers as $i => $server) {
            $h = \curl_init($server->url($path . $i));
            \curl_setopt_array($h, [CURLOPT_RETURNTRANSFER => true, CURLOPT_HEADER => true, CURLOPT_TIMEOUT => 60]);
            \curl_multi_add_handle($multi, $h);
            $handles[$i] = $h;
        }
        $deadline = \microtime(true) + 60;
        do {
            \curl_multi_exec($multi, $running);
            $tick();
            \curl_multi_select($multi, 0.02);
        } while ($running > 0 && \microtime(true) < $deadline);
        $replies = [];
        foreach ($handles as $i => $h) {
            $response = Browser::parse((string) \curl_multi_getcontent($h), \curl_getinfo($h, CURLINFO_HEADER_SIZE), \curl_getinfo($h, CURLINFO_RESPONSE_CODE));
            self::assertSame(200, $response->status, "request $i: " . \substr($response->body, 0, 1000));
            $replies[$i] = $response->json();
            \curl_multi_remove_handle($multi, $h);
        }
        \curl_multi_close($multi);

        return $replies;
    }
}
