<?php

/**
 * local-cache-hit.php measures what a hit of the local cache (the Client option local_cache) costs the PHP worker:
 * queryOne() with cacheTtlMs answered from APCu, against the same read answered by tetherd's own result cache (one
 * round trip), and the parts of a hit alone (the key, apcu_fetch, the checks against tetherd's versions, the
 * reply's unpacking). Per call: wall time (hrtime) and this process's CPU time (getrusage); the median of the
 * rounds. Not a test: run it by hand against a tetherd with cache.local on (no system call is made on a hit:
 * check with `strace -c -f php ...`):
 *
 *     php -d apc.enable_cli=1 -d opcache.enable_cli=1 clients/php/tests/Benchmark/local-cache-hit.php \
 *         --socket /abs/path/tether.sock [--backend maria] [--calls 100000] [--rounds 5]
 *
 * It creates table bench_local (one row) on the backend.
 */

declare(strict_types=1);

use Tether\Cache\LocalCache;
use Tether\Client;

$options = getopt('', ['socket:', 'backend:', 'calls:', 'rounds:']);
$socket = $options['socket'] ?? (getenv('TETHER_SOCKET') ?: './var/tether.sock');
$backend = $options['backend'] ?? null;
$calls = (int) ($options['calls'] ?? 100000);
$rounds = (int) ($options['rounds'] ?? 5);
require dirname(__DIR__, 2) . '/autoload.php';

if (!LocalCache::available()) {
    fwrite(STDERR, "APCu is off (run with -d apc.enable_cli=1) or shmop is missing\n");
    exit(1);
}
$local = new Client(['socket' => $socket, 'backend' => $backend, 'local_cache' => true]);
$remote = new Client(['socket' => $socket, 'backend' => $backend]);
$remote->execute('DROP TABLE IF EXISTS bench_local');
$remote->execute('CREATE TABLE bench_local (id INT PRIMARY KEY, name VARCHAR(32), score INT)');
$remote->execute("INSERT INTO bench_local VALUES (1, 'one', 10)");
const SQL = 'SELECT id, name, score FROM bench_local WHERE id = ?';
// Until reads are steady hits: tetherd's change stream reports the setup's own writes (once at once, once 100 ms
// later), and each report makes the table's entries stale, as it should.
$deadline = microtime(true) + 10;
$steadySince = null;
while ($steadySince === null || microtime(true) - $steadySince < 0.3) {
    $before = LocalCache::stats()['hits'];
    $local->queryOne(SQL, [1], null, null, 600000);
    if (LocalCache::stats()['hits'] === $before) {
        $steadySince = null;
    } elseif ($steadySince === null) {
        $steadySince = microtime(true);
    }
    if (microtime(true) > $deadline) {
        fwrite(STDERR, "the local cache did not answer within 10 s: is cache.local on in tetherd's config?\n");
        exit(1);
    }
    usleep(10000);
}

$cpu = static function (): float {
    $r = getrusage();

    return $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
};
$rows = [
    'local hit (queryOne)' => [$calls, static function () use ($local): void {
        $local->queryOne(SQL, [1], null, null, 600000);
    }],
    'tetherd cache hit (queryOne)' => [intdiv($calls, 10), static function () use ($remote): void {
        $remote->queryOne(SQL, [1], null, null, 600000);
    }],
];
$times = [];
for ($r = 0; $r < $rounds; $r++) {
    foreach ($rows as $name => [$n, $fn]) {
        $c0 = $cpu();
        $t0 = hrtime(true);
        for ($i = 0; $i < $n; $i++) {
            $fn();
        }
        $times[$name]['wall'][] = (hrtime(true) - $t0) / $n / 1000;
        $times[$name]['cpu'][] = ($cpu() - $c0) / $n;
    }
}
$median = static function (array $xs): float {
    sort($xs);

    return $xs[intdiv(count($xs), 2)];
};
printf("%-32s %10s %10s\n", 'per call', 'wall us', 'cpu us');
foreach ($times as $name => $t) {
    printf("%-32s %10.2f %10.2f\n", $name, $median($t['wall']), $median($t['cpu']));
}
$s = LocalCache::stats();
printf("local cache: %d hits, %d misses, %d stale, %d stores\n", $s['hits'], $s['misses'], $s['stale'], $s['stores']);
$remote->execute('DROP TABLE IF EXISTS bench_local');
