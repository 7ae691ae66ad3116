<?php
/**
 * bench/compare/bench.php: the point read and the page of 20 point reads through the PHP client, against two
 * tetherds (before and after) in interleaved rounds; run by bench/compare/run.sh, which documents the environment:
 *   BEFORE_SOCKET, BEFORE_PID, AFTER_SOCKET, AFTER_PID   each tetherd's socket and pid (CPU from /proc)
 * Options: --quick (2 rounds of fewer calls). Prints markdown on stdout, progress on stderr.
 *
 * A row's figure for a build is the median over rounds; CPU is tetherd's on-CPU time (the sum over its threads of
 * /proc/PID/task/TID/schedstat's first field) per call or per page.
 */

declare(strict_types=1);

require_once dirname(__DIR__, 2) . '/clients/php/autoload.php';

const SQL_POINT = 'SELECT id, name, score, created FROM bench_kv WHERE id = ?';
const ROWS = 10000;
const LOAD_PROCS = 4;

$quick = in_array('--quick', $argv, true);
$rounds = $quick ? 2 : 5;
$reads = $quick ? 500 : 10000;      // solo point reads per round
$pages = $quick ? 25 : 500;         // solo pages of 20 per round
$loadSeconds = $quick ? 0.5 : 3.0;  // each load run

$builds = [
    'before' => ['socket' => getenv('BEFORE_SOCKET'), 'pid' => (int) getenv('BEFORE_PID')],
    'after' => ['socket' => getenv('AFTER_SOCKET'), 'pid' => (int) getenv('AFTER_PID')],
];
foreach ($builds as $name => $b) {
    if (!$b['socket'] || $b['pid'] <= 0) {
        fwrite(STDERR, "bench/compare/bench.php: set {$name}_SOCKET and {$name}_PID (bench/compare/run.sh does)\n");
        exit(2);
    }
}

/** cpu_ns returns the on-CPU time of every thread of $pid, in ns. */
function cpu_ns(int $pid): int
{
    $ns = 0;
    foreach (glob("/proc/$pid/task/*/schedstat") ?: [] as $f) {
        $ns += (int) explode(' ', (string) @file_get_contents($f))[0];
    }
    return $ns;
}

function point_read(Tether\Client $c, int $id): void
{
    $row = $c->queryOne(SQL_POINT, [$id]);
    if ((int) ($row['id'] ?? 0) !== $id) {
        throw new RuntimeException("point read $id returned " . json_encode($row));
    }
}

/** batch reads 20 rows in one batch: one frame to tetherd, the reads run on its pool. */
function batch(Tether\Client $c): void
{
    $ids = [];
    for ($i = 0; $i < 20; $i++) {
        $ids[] = mt_rand(1, ROWS);
    }
    $ops = array_map(static fn (int $id) => Tether\Batch\Operation::query(SQL_POINT, [$id]), $ids);
    foreach ($c->batch($ops) as $i => $result) {
        if ($result instanceof Throwable) {
            throw $result;
        }
        if ((int) ($result[0]['id'] ?? 0) !== $ids[$i]) {
            throw new RuntimeException("batch read {$ids[$i]} returned " . json_encode($result));
        }
    }
}

/** page reads 20 rows, one call each, as a page of an application does. */
function page(Tether\Client $c): void
{
    for ($i = 0; $i < 20; $i++) {
        point_read($c, mt_rand(1, ROWS));
    }
}

function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n % 2 ? (float) $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2;
}

/** solo times $n calls of $fn one at a time: p50 and mean in us, tetherd CPU per call in us. */
function solo(array $b, int $n, callable $fn): array
{
    $c = new Tether\Client(['socket' => $b['socket']]);
    for ($i = 0; $i < min(200, $n); $i++) {
        $fn($c);
    }
    $lat = [];
    $cpu0 = cpu_ns($b['pid']);
    $t0 = hrtime(true);
    for ($i = 0; $i < $n; $i++) {
        $s = hrtime(true);
        $fn($c);
        $lat[] = hrtime(true) - $s;
    }
    $wall = hrtime(true) - $t0;
    $cpu = cpu_ns($b['pid']) - $cpu0;
    return ['p50' => median($lat) / 1e3, 'mean' => $wall / $n / 1e3, 'cpu' => $cpu / $n / 1e3];
}

/** load runs LOAD_PROCS forked processes calling $fn back to back for $seconds: calls/s and tetherd CPU per call. */
function load(array $b, float $seconds, callable $fn): array
{
    $tmp = tempnam(sys_get_temp_dir(), 'tether-compare');
    $cpu0 = cpu_ns($b['pid']);
    $t0 = hrtime(true);
    $kids = [];
    for ($k = 0; $k < LOAD_PROCS; $k++) {
        $pid = pcntl_fork();
        if ($pid === 0) {
            // Not persistent: a persistent socket the parent opened would be shared with it after fork.
            $c = new Tether\Client(['socket' => $b['socket'], 'persistent' => false]);
            $n = 0;
            $end = microtime(true) + $seconds;
            while (microtime(true) < $end) {
                $fn($c);
                $n++;
            }
            file_put_contents($tmp, "$n\n", FILE_APPEND | LOCK_EX);
            exit(0);
        }
        $kids[] = $pid;
    }
    foreach ($kids as $pid) {
        pcntl_waitpid($pid, $status);
        if (!pcntl_wifexited($status) || pcntl_wexitstatus($status) !== 0) {
            throw new RuntimeException("load worker $pid failed");
        }
    }
    $wall = (hrtime(true) - $t0) / 1e9;
    $cpu = cpu_ns($b['pid']) - $cpu0;
    $n = array_sum(array_map('intval', file($tmp, FILE_IGNORE_NEW_LINES)));
    unlink($tmp);
    if ($n === 0) {
        throw new RuntimeException('load: no calls made');
    }
    return ['rate' => $n / $wall, 'cpu' => $cpu / $n / 1e3];
}

$rows = [
    'read' => ['label' => 'point read', 'unit' => 'call', 'fn' => static fn (Tether\Client $c) => point_read($c, mt_rand(1, ROWS)), 'n' => $reads],
    'page' => ['label' => 'page of 20 reads, one call each', 'unit' => 'page', 'fn' => static fn (Tether\Client $c) => page($c), 'n' => $pages],
    'batch' => ['label' => 'page of 20 reads, one batch', 'unit' => 'page', 'fn' => static fn (Tether\Client $c) => batch($c), 'n' => $pages],
];
$results = [];
for ($r = 0; $r < $rounds; $r++) {
    $order = $r % 2 ? ['after', 'before'] : ['before', 'after'];
    foreach ($rows as $key => $row) {
        foreach ($order as $name) {
            fwrite(STDERR, sprintf("==> compare: round %d/%d, %s, %s\n", $r + 1, $rounds, $row['label'], $name));
            $results[$key][$name]['solo'][] = solo($builds[$name], $row['n'], $row['fn']);
            $results[$key][$name]['load'][] = load($builds[$name], $loadSeconds, $row['fn']);
        }
    }
}

$stat = static fn (array $runs, string $f): float => median(array_column($runs, $f));
echo "| row | build | solo p50 (us) | solo mean (us) | tetherd CPU, solo (us) | per second, " . LOAD_PROCS . " procs | tetherd CPU, load (us) | spread of solo mean over rounds |\n";
echo "|---|---|---:|---:|---:|---:|---:|---:|\n";
$ratios = [];
foreach ($rows as $key => $row) {
    $fig = [];
    foreach (['before', 'after'] as $name) {
        $s = $results[$key][$name]['solo'];
        $l = $results[$key][$name]['load'];
        $fig[$name] = [$stat($s, 'p50'), $stat($s, 'mean'), $stat($s, 'cpu'), $stat($l, 'rate'), $stat($l, 'cpu')];
        $means = array_column($s, 'mean');
        printf("| %s (per %s) | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.2f |\n", $row['label'], $row['unit'], $name, ...[...$fig[$name], max($means) / min($means)]);
    }
    $ratio = array_map(static fn (float $a, float $b): float => $b > 0 ? $a / $b : 0.0, $fig['after'], $fig['before']);
    printf("| %s | after / before | %.2f | %.2f | %.2f | %.2f | %.2f | |\n", $row['label'], ...$ratio);
}
printf("\nMedians over %d interleaved rounds (%d solo point reads or %d solo pages each, %.1f s under load with %d processes). ", $rounds, $reads, $pages, $loadSeconds, LOAD_PROCS);
echo "CPU and latency are per call (point read) or per page (page of 20). The spread column is a build against itself\n";
echo "(its slowest round's solo mean over its fastest): an after / before ratio inside it is within noise.\n";
