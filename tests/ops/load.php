<?php

/**
 * load.php: one PHP worker's load for scripts/ops-test.sh, as a php-fpm worker would make it: "pages" of a few
 * reads and one short transaction, each page with a new Tether\Client on the worker's persistent socket, until
 * the deadline. Every call that fails is counted and its error printed to stderr; nothing is retried here, so
 * any request that tetherd's reloads or upgrades made fail shows.
 *
 * Usage: php load.php SOCKET SECONDS WORKER BACKEND...
 * Prints one line of JSON: {"worker":W,"ok":N,"failed":F,"pages":P}
 */

declare(strict_types=1);

require __DIR__ . '/../../clients/php/autoload.php';

[, $socket, $seconds, $worker] = $argv;
$backends = array_slice($argv, 4);
$deadline = microtime(true) + (float) $seconds;
$ok = $failed = $pages = 0;
$key = (int) $worker * 10_000_000;
$call = static function (callable $fn, string $what) use (&$ok, &$failed): mixed {
    try {
        $out = $fn();
        $ok++;

        return $out;
    } catch (\Throwable $e) {
        $failed++;
        fwrite(STDERR, sprintf("worker %s: %s failed: %s: %s\n", $GLOBALS['worker'], $what, $e::class, $e->getMessage()));

        return null;
    }
};
while (microtime(true) < $deadline) {
    $client = new Tether\Client(['socket' => $socket, 'timeout' => 10]);
    foreach ($backends as $i => $backend) {
        for ($q = 0; $q < 3; $q++) {
            $call(static fn () => $client->query('SELECT COUNT(*) AS n FROM ops_load', [], $backend), "query on $backend");
        }
        $p = $backend === 'pg' ? '$1' : '?';
        $tx = $call(static fn () => $client->begin($backend), "begin on $backend");
        if ($tx !== null) {
            $key++;
            $call(static fn () => $tx->execute("INSERT INTO ops_load (id, n) VALUES ($p, 1)", [$key]), "insert on $backend");
            $call(static fn () => $tx->commit(), "commit on $backend");
        }
    }
    $pages++;
    usleep(1000); // the page's own work
}
echo json_encode(['worker' => (int) $worker, 'ok' => $ok, 'failed' => $failed, 'pages' => $pages]), "\n";
