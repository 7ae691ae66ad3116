<?php

declare(strict_types=1);

/*
 * bench/web/first-read.php: where a PHP worker's first Tether read spends its time (seed E2's fresh-worker target).
 * Asks pages/diag-first-read.php N times, one request at a time, and prints the mean and p50 of each phase (us) and its mean minor page faults.
 * With --fresh (the fresh-worker copy of a server) every answer must come from a new worker (pid), and each request
 * opens a new connection, 50 ms apart, as bench.php's probe does; otherwise (long-lived workers, one keep-alive
 * connection) each worker's first answer is left out. With --new-socket the page's client opens a socket of its own
 * (not persistent: new to tetherd in every request, the "connect" phase then empty and its cost in "ping 1").
 * --pause: 50 ms between requests to long-lived workers too, as between fresh ones (every process involved idle
 * before each request).
 *
 *   bash bench/web/run.sh --servers nginx --serve     # then, in another shell:
 *   php bench/web/first-read.php --fresh http://127.0.0.1:18080/fresh 150    # fresh php-fpm workers
 *   php bench/web/first-read.php http://127.0.0.1:18080 500          # long-lived workers
 */

$fresh = in_array('--fresh', $argv, true);
$newSocket = in_array('--new-socket', $argv, true);
$pause = $fresh || in_array('--pause', $argv, true);
[$base, $n] = array_values(array_diff(array_slice($argv, 1), ['--fresh', '--new-socket', '--pause'])) + [null, '100'];
$base !== null || exit("usage: php first-read.php [--fresh] [--new-socket] [--pause] BASE_URL [N]\n");
$rows = $pids = [];
$ch = curl_init();
for ($i = 0; $i < (int) $n; $i++) {
    if ($pause) {
        usleep(50000);
    }
    if ($fresh) {
        $ch = curl_init();
        curl_setopt_array($ch, [CURLOPT_FORBID_REUSE => true, CURLOPT_FRESH_CONNECT => true]);
    }
    curl_setopt_array($ch, [CURLOPT_URL => rtrim($base, '/') . '/diag-first-read.php' . ($newSocket ? '?np=1' : ''), CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
    $body = curl_exec($ch);
    $r = is_string($body) ? json_decode($body, true) : null;
    if (!is_array($r) || curl_getinfo($ch, CURLINFO_RESPONSE_CODE) !== 200) {
        fwrite(STDERR, "bad answer: " . var_export($body, true) . "\n");
        exit(1);
    }
    if (isset($pids[$r['pid']]) && $fresh) {
        fwrite(STDERR, "worker {$r['pid']} answered twice: not a fresh worker\n");
        exit(1);
    }
    // Long-lived workers: each worker's first answer in this run is left out (its first read of this page).
    $first = !isset($pids[$r['pid']]);
    $pids[$r['pid']] = true;
    unset($r['pid']);
    if ($fresh || !$first) {
        $rows[] = $r;
    }
}
printf("%s, %d requests%s\n", $base, count($rows), $fresh ? ', every one a fresh worker' : '');
printf("%-14s %9s %9s %14s\n", 'phase', 'mean us', 'p50 us', 'page faults');
foreach (array_keys($rows[0]) as $phase) {
    if (str_starts_with($phase, 'faults:')) {
        continue;
    }
    $v = array_column($rows, $phase);
    sort($v);
    $faults = array_column($rows, "faults:$phase");
    printf("%-14s %9.1f %9.1f %14.1f\n", $phase, array_sum($v) / count($v) / 1000, $v[intdiv(count($v), 2)] / 1000,
        $faults ? array_sum($faults) / count($faults) : NAN);
}
