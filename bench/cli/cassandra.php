<?php

declare(strict_types=1);

require_once dirname(__DIR__) . '/lib/proc.php';

/*
 * bench/cli/cassandra.php: seed E1 from the PHP CLI. The seed's two reads (get('a') on c1, get_super_column('a', 'b1')
 * on s1; bench/cli/seed-e1.php) through Tether, and through a client that connects per read: what a PHP page pays
 * without a persistent native driver (TCP connect, STARTUP, password check, QUERY, close; cql.php, written for this
 * benchmark, since PHP has no maintained Cassandra extension). For scale, the same pure-PHP client with its
 * connection kept open: what a persistent driver would give, if PHP had one.
 *
 * Run it through bench/cli/run.sh, which starts Cassandra (with seed E1's data and a role per client) and tetherd
 * (with a Cassandra backend), after bench.php. It prints markdown on stdout (progress on stderr).
 *
 *   php bench/cli/cassandra.php [--quick] [--iterations N] [--connect-iterations N] [--rounds N] [--json FILE]
 *
 * Rows are measured in --rounds (5) interleaved rounds, one call at a time, each timed with hrtime and its answer
 * checked against the seed's data. Per read: tetherd's and Cassandra's CPU (utime+stime from /proc).
 *
 * Environment (set by run.sh): TETHER_SOCKET, TETHERD_PID, CASSANDRA_PID, BENCH_CASSANDRA_HOST (host:port),
 * BENCH_CASSANDRA_ROLE (the connect-per-read client's role; its password is the same), BENCH_CASSANDRA_BACKEND
 * (tetherd's backend name), CLK_TCK.
 */

require __DIR__ . '/cql.php';

const TARGET_CONNECT_RATIO = 15.0; // connect per request >= 15x slower than Tether (issue 4)

function env(string $name): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        fwrite(STDERR, "cassandra.php: environment variable $name is required (run bench/cli/run.sh)\n");
        exit(2);
    }
    return $v;
}

/** machine_ticks returns the busy CPU time of the whole machine (all CPUs, not idle, iowait or steal), in ticks. */
function machine_ticks(): int
{
    $f = preg_split('/\s+/', trim(strtok(file_get_contents('/proc/stat'), "\n")));
    return (int) $f[1] + (int) $f[2] + (int) $f[3] + (int) $f[6] + (int) $f[7];
}

/** own_ticks returns this process's CPU time, in ticks. */
function own_ticks(int $clk): float
{
    $r = getrusage();
    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec'] + ($r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec']) / 1e6) * $clk;
}

$opt = ['quick' => false, 'iterations' => null, 'connect-iterations' => null, 'rounds' => null, 'json' => null];
for ($i = 1; $i < $argc; $i++) {
    $a = $argv[$i];
    if ($a === '--quick') {
        $opt['quick'] = true;
    } elseif (str_starts_with($a, '--') && array_key_exists(substr($a, 2), $opt) && isset($argv[$i + 1])) {
        $opt[substr($a, 2)] = $argv[++$i];
    } else {
        fwrite(STDERR, "cassandra.php: bad argument $a\n");
        exit(2);
    }
}
$iterations = (int) ($opt['iterations'] ?? ($opt['quick'] ? 200 : 5000));
$connectIterations = (int) ($opt['connect-iterations'] ?? ($opt['quick'] ? 10 : 200));
$rounds = (int) ($opt['rounds'] ?? ($opt['quick'] ? 1 : 5));
$clk = (int) (getenv('CLK_TCK') ?: 100);
$tetherdPid = (int) env('TETHERD_PID');
$cassPid = (int) env('CASSANDRA_PID');
[$host, $port] = explode(':', env('BENCH_CASSANDRA_HOST'));
$port = (int) $port;
$role = env('BENCH_CASSANDRA_ROLE');
$backend = env('BENCH_CASSANDRA_BACKEND');

require dirname(__DIR__, 2) . '/clients/php/autoload.php';
$seed = require __DIR__ . '/seed-e1.php';
$ks = $seed['keyspace'];
$key = $seed['row_key'];
$sc = $seed['super_column'];
$reads = [
    'row' => ['label' => "get('a') on c1: a row of " . count($seed['c1'][$key]) . ' columns',
        'cql' => "SELECT column1, value FROM $ks.c1 WHERE key = ?", 'params' => [$key], 'name' => 'column1',
        'want' => $seed['c1'][$key], 'prefix' => [$key], 'table' => "$ks.c1", 'columns' => ['column1', 'value']],
    'super' => ['label' => "get_super_column('a', 'b1') on s1: a slice of " . count($seed['s1'][$key][$sc]) . ' columns',
        'cql' => "SELECT column, value FROM $ks.s1 WHERE key = ? AND super_column = ?", 'params' => [$key, $sc], 'name' => 'column',
        'want' => $seed['s1'][$key][$sc], 'prefix' => [$key, $sc], 'table' => "$ks.s1", 'columns' => ['column', 'value']],
];

/** check fails unless $rows (assoc rows with the read's name column and value) are exactly the seed's cells. */
$check = static function (array $read, iterable $rows): void {
    $got = [];
    foreach ($rows as $r) {
        $got[$r[$read['name']]] = $r['value'];
    }
    if ($got !== $read['want']) {
        throw new RuntimeException("{$read['label']}: read " . json_encode($got));
    }
};

$tether = new Tether\Client(['socket' => env('TETHER_SOCKET')]);
$open = new CqlConnection($host, $port);
if ($open->startup()) {
    $open->authenticate($role, $role);
}
$phases = []; // connect-per-read: ns per phase, summed
$rows = [];
foreach ($reads as $rk => $read) {
    $rows["tether-$rk"] = ['read' => $rk, 'label' => 'Tether, PHP client', 'tether' => true, 'n' => $iterations,
        'call' => static function () use ($tether, $read, $backend, $check): void {
            $check($read, $tether->scan($read['table'], prefix: $read['prefix'], columns: $read['columns'], backend: $backend));
        }];
    $rows["open-$rk"] = ['read' => $rk, 'label' => 'pure-PHP CQL client, connection kept open', 'tether' => false, 'n' => $iterations,
        'call' => static function () use ($open, $read, $check): void {
            $check($read, $open->query($read['cql'], $read['params']));
        }];
    $rows["connect-$rk"] = ['read' => $rk, 'label' => 'pure-PHP CQL client, connection per read', 'tether' => false, 'n' => $connectIterations,
        'call' => static function () use ($host, $port, $role, $read, $check, $rk, &$phases): void {
            $t0 = hrtime(true);
            $c = new CqlConnection($host, $port);
            $t1 = hrtime(true);
            $auth = $c->startup();
            $t2 = hrtime(true);
            if ($auth) {
                $c->authenticate($role, $role);
            }
            $t3 = hrtime(true);
            $rows = $c->query($read['cql'], $read['params']);
            $t4 = hrtime(true);
            $c->close();
            $t5 = hrtime(true);
            $check($read, $rows);
            foreach (['connect' => $t1 - $t0, 'startup' => $t2 - $t1, 'auth' => $t3 - $t2, 'query' => $t4 - $t3, 'close' => $t5 - $t4] as $k => $ns) {
                $phases[$rk][$k] = ($phases[$rk][$k] ?? 0) + $ns;
            }
        }];
}

// Warm-up: every row's code paths, tetherd's prepared statements, Cassandra's caches.
foreach ($rows as $k => $row) {
    for ($i = 0; $i < (str_starts_with($k, 'connect-') ? 3 : 200); $i++) {
        ($row['call'])();
    }
}
$phases = [];

// Rounds: every row its share, one call at a time.
$lat = $cpu = [];
$t0 = microtime(true);
$busy0 = [machine_ticks(), own_ticks($clk) + cpu_ticks($tetherdPid) + cpu_ticks($cassPid)];
for ($r = 0; $r < $rounds; $r++) {
    $order = $r % 2 ? array_reverse($rows, true) : $rows;
    foreach ($order as $k => $row) {
        $share = intdiv($row['n'] * ($r + 1), $rounds) - intdiv($row['n'] * $r, $rounds);
        $call = $row['call'];
        $c0 = [cpu_ticks($tetherdPid), cpu_ticks($cassPid)];
        for ($i = 0; $i < $share; $i++) {
            $t = hrtime(true);
            $call();
            $lat[$k][] = hrtime(true) - $t;
        }
        $c1 = [cpu_ticks($tetherdPid), cpu_ticks($cassPid)];
        $cpu[$k][0] = ($cpu[$k][0] ?? 0) + $c1[0] - $c0[0];
        $cpu[$k][1] = ($cpu[$k][1] ?? 0) + $c1[1] - $c0[1];
    }
    progress(sprintf('cassandra: round %d/%d done', $r + 1, $rounds));
}
$busy1 = [machine_ticks(), own_ticks($clk) + cpu_ticks($tetherdPid) + cpu_ticks($cassPid)];
$open->close();
$wall = microtime(true) - $t0;
// Other work on the machine meanwhile, in percent of its CPUs (the kernel accounts the two sums a few percent apart).
$foreign = max(0.0, ($busy1[0] - $busy0[0]) - ($busy1[1] - $busy0[1])) / $clk / $wall / (int) trim((string) shell_exec('nproc')) * 100;

$stats = [];
foreach ($rows as $k => $row) {
    $l = $lat[$k];
    sort($l);
    $n = count($l);
    $stats[$k] = ['read' => $row['read'], 'label' => $row['label'], 'tether' => $row['tether'], 'calls' => $n,
        'p50_us' => $l[intdiv($n, 2)] / 1000, 'p99_us' => $l[min($n - 1, (int) floor(0.99 * $n))] / 1000,
        'mean_us' => array_sum($l) / $n / 1000,
        'tetherd_cpu_us' => $row['tether'] ? $cpu[$k][0] * 1e6 / $clk / $n : null,
        'cassandra_cpu_us' => $cpu[$k][1] * 1e6 / $clk / $n];
    $stats[$k]['reads_per_s'] = 1e6 / $stats[$k]['mean_us'];
    $stats[$k]['x_tether'] = null;
}
foreach ($stats as $k => &$s) {
    $s['x_tether'] = $s['mean_us'] / $stats["tether-{$s['read']}"]['mean_us'];
}
unset($s);
$breakdown = [];
foreach ($phases as $rk => $p) {
    $n = count($lat["connect-$rk"]);
    foreach ($p as $ph => $ns) {
        $breakdown[$rk][$ph] = $ns / $n / 1000;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Markdown

$fmt = static fn (?float $v, int $d = 1): string => $v === null ? '-' : number_format($v, $d, '.', ',');
echo "#### Cassandra from the PHP CLI: connect per read against Tether (seed E1)\n\n";
printf("Cassandra %s, one node on loopback, password authentication (PasswordAuthenticator), seed E1's data (bench/cli/seed-e1.php), "
    . "consistency ONE. One PHP process, one call at a time, wall time of each call (hrtime) after a warm-up, in %d interleaved "
    . "round%s (%.0f s); every answer checked against the data. Tether: `Client::scan()` with the key prefix (tetherd's "
    . "Cassandra backend, pool of 4). Connection per read: bench/cli/cql.php, a minimal CQL native-protocol v4 client in pure PHP "
    . "(no maintained PHP extension exists): TCP connect, STARTUP, SASL PLAIN password, QUERY, close, as a page without a "
    . "persistent driver does. CPU per call: utime+stime from /proc (10 ms ticks, summed over the row's calls). "
    . "Other processes used %.1f%% of the machine's CPU time meanwhile%s.\n\n",
    getenv('BENCH_CASSANDRA_VERSION') ?: '?', $rounds, $rounds === 1 ? '' : 's', $wall, $foreign,
    $foreign > 5 ? ' (**skewed: other work shared the CPUs**)' : '');
echo "| read | row | calls | p50 us | p99 us | mean us | reads/s | mean / Tether's | tetherd CPU us/call | Cassandra CPU us/call |\n";
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
foreach ($stats as $k => $s) {
    printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", $reads[$s['read']]['label'],
        $s['tether'] ? "**{$s['label']}**" : $s['label'], $s['calls'], $fmt($s['p50_us']), $fmt($s['p99_us']), $fmt($s['mean_us']),
        $fmt($s['reads_per_s'], 0), $fmt($s['x_tether'], 2), $fmt($s['tetherd_cpu_us']), $fmt($s['cassandra_cpu_us']));
}
echo "\nWhere a read that connects per request spends its time (mean us per call):\n\n";
echo "| read | TCP connect | STARTUP | password check (SASL) | QUERY | close | total |\n|---|---:|---:|---:|---:|---:|---:|\n";
foreach ($breakdown as $rk => $b) {
    printf("| %s | %s | %s | %s | %s | %s | %s |\n", $reads[$rk]['label'], $fmt($b['connect']), $fmt($b['startup']), $fmt($b['auth']),
        $fmt($b['query']), $fmt($b['close']), $fmt(array_sum($b)));
}
echo "\nThe password check is Cassandra's bcrypt of the password at every login (PasswordAuthenticator; the hash is "
    . "cached, the check is not). A node without authentication skips it: that estimate is the total less that column.\n\n";
echo "##### Targets (E1)\n\n";
$targets = [];
foreach ($reads as $rk => $read) {
    $r = $stats["connect-$rk"]['x_tether'];
    $noAuth = isset($breakdown[$rk]) ? ($stats["connect-$rk"]['mean_us'] - $breakdown[$rk]['auth']) / $stats["tether-$rk"]['mean_us'] : null;
    $met = $r >= TARGET_CONNECT_RATIO;
    $targets[$rk] = ['ratio' => $r, 'ratio_without_auth' => $noAuth, 'met' => $met];
    printf("- %s, connection per read / Tether (mean): **%s** (target >= %s): %s; without the password check (estimate): %s\n",
        $read['label'], $fmt($r, 1), $fmt(TARGET_CONNECT_RATIO, 0), $met ? 'met' : '**not met**', $fmt($noAuth, 1));
}
foreach ($reads as $rk => $read) {
    printf("- for scale, %s, connection kept open / Tether (mean): %s\n", $read['label'], $fmt($stats["open-$rk"]['x_tether'], 2));
}
echo "\n";

if ($opt['json'] !== null) {
    file_put_contents($opt['json'], json_encode(['rows' => $stats, 'breakdown' => $breakdown, 'targets' => $targets,
        'rounds' => $rounds, 'wall_s' => $wall, 'foreign_cpu_pct' => $foreign], JSON_PRETTY_PRINT) . "\n");
}
