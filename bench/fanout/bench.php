<?php

declare(strict_types=1);

/*
 * bench/fanout/bench.php: benchmarks E5 (parallel calls to a slow upstream) and E4 (a join returning 1..500 rows
 * under 5 concurrent clients) of the seed experiments, Tether against what a PHP program does without it.
 *
 * Run it through bench/fanout/run.sh, which starts sleepd, a throwaway MariaDB with the join's tables and tetherd,
 * and passes their coordinates in the environment (see lib.php, Cfg). It prints markdown on stdout (progress on
 * stderr) and, with --json FILE, the raw numbers as JSON.
 *
 *   php bench/fanout/bench.php [--quick] [--only e4|e5] [--e5-rounds N] [--sleep-ms N] [--calls N]
 *                              [--e5-variants a,b] [--join-iterations N] [--join-rounds N] [--join-procs N]
 *                              [--join-variants a,b] [--join-sizes 1,10] [--no-profile] [--json FILE]
 *
 * E5 (defaults: 5 rounds, sleep 1000 ms, 10 calls): every measurement is a fresh PHP process (caller.php) making the
 * calls one way; one warm-up round of every variant is run and dropped first (it fills tetherd's keep-alive pool to
 * the upstream, as a running site's traffic keeps it filled); then each round runs every variant once, the order
 * rotating from round to round.
 * E4 (defaults: 2000 iterations per client and size, in 4 rounds, 5 clients): the variants are checked to return the
 * same rows first; then each round runs, for each size, every variant (order rotating) with the 5 clients at once.
 * Then, unless --no-profile or perf is missing, one more untimed run of the 500-row Tether join with `perf record`
 * on tetherd says where its CPU goes.
 * --quick: E5 one round of 100 ms sleeps, E4 50 iterations per client in one round: it proves that everything
 * works and returns the right results, its numbers are not worth quoting and no target is judged.
 */

require __DIR__ . '/lib.php';

const E5_VARIANTS = [
    'tether-batch' => 'Tether batch of 10 http ops (Client::batch)',
    'tether-async' => 'Tether batch, non-blocking (sendBatch, then wait)',
    'curl-multi' => 'curl_multi, 10 handles',
    'fork' => 'pcntl_fork, 10 children with one curl call each',
];
const E5_TARGET_S = 1.02;       // at a sleep of 1000 ms
const E4_TARGET_RATIO = 3.4;    // Tether join / PDO joins per second at 500 rows
const E4_TARGET_SIZE = 500;
const CHECK_RANGES = 6;         // ranges of users on which E4's variants are compared, per size

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

function f(float $v, int $dec = 1): string
{
    return number_format($v, $dec, '.', ',');
}

/** @param list<float> $xs */
function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n === 0 ? NAN : ($n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2);
}

/** n_of returns "1 round", "2 rounds". */
function n_of(int $n, string $what): string
{
    return "$n $what" . ($n === 1 ? '' : 's');
}

/** rotate returns $xs rotated left by $k. */
function rotate(array $xs, int $k): array
{
    $k %= max(1, count($xs));
    return array_merge(array_slice($xs, $k), array_slice($xs, 0, $k));
}

/** sleepd_stats reads (and with $reset, zeroes) sleepd's request counters. */
function sleepd_stats(bool $reset = false): array
{
    $s = file_get_contents(Cfg::$sleepdUrl . '/stats' . ($reset ? '?reset=1' : ''));
    $j = json_decode((string) $s, true);
    if (!is_array($j)) {
        throw new RuntimeException('sleepd /stats: ' . var_export($s, true));
    }
    return $j;
}

// ---------------------------------------------------------------------------------------------------------------
// E5: 10 parallel calls to an upstream that sleeps

/** e5_call runs one caller process and returns its report, with tetherd's CPU and sleepd's counts around it. */
function e5_call(string $variant, int $ms, int $calls): array
{
    sleepd_stats(true);
    $t0 = thread_cpu_ns(Cfg::$tetherdPid);
    $cmd = [PHP_BINARY, __DIR__ . '/caller.php', $variant, Cfg::$sleepdUrl, (string) $ms, (string) $calls];
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
    if ($p === false) {
        throw new RuntimeException('proc_open caller.php failed');
    }
    $out = stream_get_contents($pipes[1]);
    fclose($pipes[1]);
    $rc = proc_close($p);
    $tetherdNs = thread_cpu_ns(Cfg::$tetherdPid) - $t0;
    $st = sleepd_stats();
    $r = json_decode((string) $out, true);
    if ($rc !== 0 || !is_array($r)) {
        throw new RuntimeException("E5 $variant: caller.php exited with $rc: " . trim((string) $out));
    }
    if ($r['errors'] !== [] || $r['ok'] !== $calls) {
        throw new RuntimeException("E5 $variant: {$r['ok']} of $calls calls succeeded: " . implode('; ', $r['errors']));
    }
    if ($st['requests'] !== $calls) {
        throw new RuntimeException("E5 $variant: sleepd served {$st['requests']} requests, want $calls");
    }
    $r['tetherd_cpu_ms'] = $tetherdNs / 1e6;
    $r['max_in_flight'] = $st['max_in_flight'];
    // The caller's resident memory: the seed counted a forking caller as parent + children.
    $r['caller_kb'] = $r['hwm_kb'] + $r['children_hwm_kb'];
    return $r;
}

/** run_e5 returns, per variant, the list of its measured calls. */
function run_e5(array $variants, int $rounds, int $ms, int $calls): array
{
    progress(sprintf('E5: warm-up round (%s)', implode(', ', $variants)));
    foreach ($variants as $v) {
        e5_call($v, $ms, $calls);
    }
    $runs = array_fill_keys($variants, []);
    for ($r = 0; $r < $rounds; $r++) {
        $order = rotate($variants, $r);
        progress(sprintf('E5: round %d/%d (%s)', $r + 1, $rounds, implode(', ', $order)));
        foreach ($order as $v) {
            $runs[$v][] = e5_call($v, $ms, $calls);
        }
    }
    return $runs;
}

function e5_summary(array $runs): array
{
    $out = [];
    foreach ($runs as $v => $rs) {
        $walls = array_map(static fn ($r) => $r['wall_ns'] / 1e9, $rs);
        $col = static fn (string $k) => median(array_column($rs, $k));
        $out[$v] = [
            'variant' => $v, 'label' => E5_VARIANTS[$v], 'runs' => count($rs),
            'wall_med' => median($walls), 'wall_min' => min($walls), 'wall_max' => max($walls),
            'caller_mb' => $col('caller_kb') / 1024, 'caller_min_mb' => min(array_column($rs, 'caller_kb')) / 1024,
            'caller_max_mb' => max(array_column($rs, 'caller_kb')) / 1024,
            'growth_mb' => median(array_map(static fn ($r) => $r['caller_kb'] - $r['rss_start_kb'], $rs)) / 1024, 'hwm_mb' => $col('hwm_kb') / 1024,
            'start_mb' => $col('rss_start_kb') / 1024, 'children_hwm_mb' => $col('children_hwm_kb') / 1024,
            'children_private_mb' => $col('children_private_kb') / 1024, 'php_peak_mb' => $col('php_peak_bytes') / 1048576,
            'cpu_ms' => $col('cpu_us') / 1000, 'tetherd_cpu_ms' => $col('tetherd_cpu_ms'),
            'max_in_flight' => min(array_column($rs, 'max_in_flight')),
            'send_ms' => isset($rs[0]['send_ns']) ? median(array_column($rs, 'send_ns')) / 1e6 : null,
        ];
    }
    return $out;
}

// ---------------------------------------------------------------------------------------------------------------
// E4: the join

/**
 * check_join runs every variant on the same ranges of users and fails unless all return the same rows in the same
 * order: ordered by group name (users without a group first, as both SQL and tetherd put nulls first), then id.
 * The ranges cover both ends of the table and the users whose group is null (every 50th) or names no group
 * (every 97th), so the left join's unmatched rows are compared too.
 *
 * @return int the number of ranges compared per size
 */
function check_join(array $variants, array $sizes): int
{
    $all = join_variants();
    $fns = [];
    foreach ($variants as $v) {
        $fns[$v] = ($all[$v]['make'])();
    }
    $ranges = 0;
    foreach ($sizes as $size) {
        // Fixed ranges around users 1, 50 and 97 and at the end of the table, then random ones up to 6 in all.
        $firsts = array_values(array_unique([1, max(1, 50 - intdiv($size, 2)), max(1, 97 - intdiv($size, 2)), USERS - $size + 1]));
        mt_srand($size);
        while (count($firsts) < CHECK_RANGES) {
            $firsts[] = join_first($size);
        }
        $ranges = count($firsts);
        foreach ($firsts as $first) {
            $last = $first + $size - 1;
            $want = null;
            foreach ($variants as $v) {
                $got = ($all[$v]['canon'])($fns[$v]($first, $last));
                if (count($got) !== $size) {
                    throw new RuntimeException(sprintf('E4 check: %s, users %d..%d: %d rows, want %d', $v, $first, $last, count($got), $size));
                }
                $ids = array_column($got, 0);
                sort($ids);
                if ($ids !== range($first, $last)) {
                    throw new RuntimeException(sprintf('E4 check: %s, users %d..%d: not the users of the range', $v, $first, $last));
                }
                $sorted = $got;
                usort($sorted, static fn ($a, $b) => [$a[3] !== null, (string) $a[3], $a[0]] <=> [$b[3] !== null, (string) $b[3], $b[0]]);
                if ($sorted !== $got) {
                    throw new RuntimeException(sprintf('E4 check: %s, users %d..%d: not ordered by group name, then id', $v, $first, $last));
                }
                if ($want === null) {
                    $want = [$v, $got];
                } elseif ($got !== $want[1]) {
                    foreach ($got as $i => $row) {
                        if ($row !== ($want[1][$i] ?? null)) {
                            throw new RuntimeException(sprintf('E4 check: users %d..%d: row %d is %s from %s but %s from %s', $first, $last, $i,
                                json_encode($row), $v, json_encode($want[1][$i] ?? null), $want[0]));
                        }
                    }
                }
            }
        }
    }
    return $ranges;
}

/** run_join runs $procs workers of one variant and size at once and returns the run's totals. */
function run_join(string $variant, int $size, int $iterations, int $procs, int $seed): array
{
    $workers = [];
    for ($w = 0; $w < $procs; $w++) {
        $cmd = [PHP_BINARY, '-d', 'memory_limit=512M', __DIR__ . '/join-worker.php', $variant, (string) $size, (string) $iterations, (string) ($seed * 100 + $w)];
        $p = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        if ($p === false) {
            throw new RuntimeException('proc_open join-worker.php failed');
        }
        $workers[] = ['proc' => $p, 'in' => $pipes[0], 'out' => $pipes[1]];
    }
    foreach ($workers as $w) {
        $line = fgets($w['out']);
        if (trim((string) $line) !== 'ready') {
            throw new RuntimeException("E4 $variant/$size: a worker failed to start: " . var_export($line, true));
        }
    }
    $t = [cpu_ticks(Cfg::$tetherdPid), cpu_ticks(Cfg::$mariadbPid), machine_busy_ticks()];
    foreach ($workers as $w) {
        fwrite($w['in'], "go\n");
        fflush($w['in']);
    }
    $results = [];
    foreach ($workers as $w) {
        $r = json_decode((string) fgets($w['out']), true);
        if (!is_array($r)) {
            throw new RuntimeException("E4 $variant/$size: a worker failed (see its error above)");
        }
        $results[] = $r;
    }
    $t = [cpu_ticks(Cfg::$tetherdPid) - $t[0], cpu_ticks(Cfg::$mariadbPid) - $t[1], machine_busy_ticks() - $t[2]];
    foreach ($workers as $w) {
        fclose($w['in']);
        fclose($w['out']);
        if (($rc = proc_close($w['proc'])) !== 0) {
            throw new RuntimeException("E4 $variant/$size: a worker exited with $rc");
        }
    }
    $tick = 1.0 / Cfg::$clkTck;
    return [
        'joins' => $procs * $iterations,
        'rows' => array_sum(array_column($results, 'rows')),
        'wall_s' => (max(array_column($results, 'end')) - min(array_column($results, 'start'))) / 1e9,
        'tetherd_cpu_s' => $t[0] * $tick, 'mariadb_cpu_s' => $t[1] * $tick, 'machine_cpu_s' => $t[2] * $tick,
        'php_cpu_s' => array_sum(array_column($results, 'cpu_us')) / 1e6,
    ];
}

/**
 * run_e4 returns, per size and variant, the totals over the rounds (joins, rows, wall and CPU seconds), the joins/s
 * of each round (`rates`) and their median (`rate`), and `x`: for each PDO variant measured, the median over the
 * rounds of this variant's joins/s over that PDO variant's in the same round.
 */
function run_e4(array $variants, array $sizes, int $iterations, int $rounds, int $procs): array
{
    $tot = [];
    $perRound = intdiv($iterations, $rounds);
    for ($r = 0; $r < $rounds; $r++) {
        foreach ($sizes as $si => $size) {
            $order = rotate($variants, $r + $si);
            progress(sprintf('E4: round %d/%d, %d rows, %d clients x %d joins (%s)', $r + 1, $rounds, $size, $procs, $perRound, implode(', ', $order)));
            foreach ($order as $v) {
                $run = run_join($v, $size, $perRound, $procs, $r * 1000 + $size);
                foreach ($run as $k => $x) {
                    $tot[$size][$v][$k] = ($tot[$size][$v][$k] ?? 0) + $x;
                }
                $tot[$size][$v]['rates'][$r] = $run['joins'] / $run['wall_s'];
            }
        }
    }
    foreach ($tot as $size => $vs) {
        // Rows in the order of the variant list, whatever order they ran in.
        $vs = array_merge(array_intersect_key(array_flip($variants), $vs), $vs);
        foreach ($vs as $v => $t) {
            $vs[$v]['rate'] = median($t['rates']);
            $vs[$v]['x'] = [];
            foreach (['pdo-prepared', 'pdo-emulated'] as $base) {
                if (isset($vs[$base])) {
                    $vs[$v]['x'][$base] = median(array_map(static fn ($a, $b) => $a / $b, $t['rates'], $vs[$base]['rates']));
                }
            }
        }
        $tot[$size] = $vs;
    }
    return $tot;
}

/** Functions of tetherd whose share of its CPU samples the profile reports (inclusive: with what they call). */
const PROFILE_FUNCS = [
    'github.com/tether-php/tether.(*Server).join' => 'the join operation, all of it',
    'github.com/tether-php/tether/backend/sqldb.(*DB).readRows' => 'reading rows from MariaDB through database/sql (the left query\'s rows and the groups)',
    'github.com/tether-php/tether/backend/sqldb.(*DB).MultiGet' => 'the groups lookup (multi_get), all of it',
    'github.com/tether-php/tether.sortRows' => 'sorting by group name (order_by)',
    'github.com/tether-php/tether/wire.AppendColumns' => 'encoding the column-oriented reply',
    'runtime.gcBgMarkWorker' => 'the garbage collector\'s background marking',
    'github.com/tether-php/tether/internal/evloop.(*Loop).Run' => 'the event loop (socket reads, request decoding)',
];

/**
 * profile_tetherd runs $variant at $size once more, untimed, with `perf record -g` sampling tetherd, and returns the
 * share of tetherd's samples spent in each function of PROFILE_FUNCS (with its callees), or why it could not.
 *
 * @return array<string, float>|string
 */
function profile_tetherd(string $variant, int $size, int $iterations, int $procs): array|string
{
    $perf = trim((string) shell_exec('command -v perf 2>/dev/null'));
    if ($perf === '') {
        return 'perf is not installed';
    }
    $dir = getenv('BENCH_TMPDIR') ?: sys_get_temp_dir();
    $data = "$dir/perf-tetherd.data";
    $log = "$dir/perf-tetherd.log";
    @unlink($data);
    $p = proc_open([$perf, 'record', '-q', '-F', '999', '-g', '-p', (string) Cfg::$tetherdPid, '-o', $data],
        [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'a']], $pipes);
    if ($p === false) {
        return 'perf could not be started';
    }
    usleep(300000); // perf attaching
    if (!proc_get_status($p)['running']) {
        proc_close($p);
        return 'perf record failed: ' . trim((string) @file_get_contents($log));
    }
    try {
        run_join($variant, $size, $iterations, $procs, 999);
    } finally {
        proc_terminate($p, 2); // SIGINT: perf writes its data and exits
        proc_close($p);
    }
    $out = shell_exec(escapeshellarg($perf) . ' report -i ' . escapeshellarg($data) . ' --children --sort symbol --stdio 2>/dev/null');
    $shares = [];
    foreach (explode("\n", (string) $out) as $line) {
        if (preg_match('/^\s+([\d.]+)%\s+[\d.]+%\s+\[[.k]\]\s+(\S+)/', $line, $m) && isset(PROFILE_FUNCS[$m[2]])) {
            $shares[$m[2]] ??= (float) $m[1];
        }
    }
    return $shares ?: 'perf report found none of the functions it looks for (' . trim((string) @file_get_contents($log)) . ')';
}

// ---------------------------------------------------------------------------------------------------------------
// Report

function print_e5(array $s, array $opt): void
{
    $ms = $opt['sleep_ms'];
    echo "#### E5: {$opt['calls']} parallel calls to an upstream that sleeps " . f($ms / 1000, 1) . " s (seed 004)\n\n";
    printf("Each measurement is a fresh PHP CLI process (`bench/fanout/caller.php`) making %d calls to sleepd's "
        . "`GET /sleep?ms=%d` and checking every reply (status 200, the body that names its call); %s, the order "
        . "of the variants rotating, after one warm-up round of each that is not counted (it fills tetherd's keep-alive pool "
        . "to the upstream, as a running site's traffic keeps it filled). Wall: from the caller's first step (loading the "
        . "client, connecting, forking) to every reply in hand. Peak RSS: the caller's VmHWM (`/proc/self/status`) at the end; "
        . "for pcntl_fork the sum over the parent and its %d children, each child's read just before it exits, as the seed "
        . "counted it. Caller CPU: the process's user+system time (with its children's for fork). PHP heap peak: "
        . "`memory_get_peak_usage()`. tetherd CPU: all its threads' (`/proc/PID/task/*/schedstat`) during the caller's run. "
        . "Upstream calls at once: the most requests sleepd had in progress at the same time (the least over the runs).\n\n",
        $opt['calls'], $ms, n_of($opt['e5_rounds'], 'round'), $opt['calls']);
    echo "| variant | runs | wall s, median | min | max | over the sleep, ms | caller peak RSS MB | RSS at start MB | PHP heap peak MB | caller CPU ms | tetherd CPU ms | upstream calls at once |\n";
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    foreach ($s as $r) {
        $t = str_starts_with($r['variant'], 'tether');
        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", $t ? "**{$r['label']}**" : $r['label'], $r['runs'],
            f($r['wall_med'], 3), f($r['wall_min'], 3), f($r['wall_max'], 3), f($r['wall_med'] * 1000 - $ms, 1),
            f($r['caller_mb'], 1), f($r['start_mb'], 1), f($r['php_peak_mb'], 1), f($r['cpu_ms'], 1),
            $t ? f($r['tetherd_cpu_ms'], 2) : '-', $r['max_in_flight']);
    }
    echo "\n";
    if (isset($s['fork'])) {
        $k = $s['fork'];
        printf("pcntl_fork's peak RSS counts every page a child shares with its parent once per child (each child's VmHWM is "
            . "%s MB, nearly all of it the parent's pages, shared copy-on-write). Counting only the pages each child made its "
            . "own (Private_Clean + Private_Dirty of `/proc/self/smaps_rollup`), the forking caller holds %s MB: its own %s MB "
            . "and %s MB for the %d children.\n", f($k['children_hwm_mb'] / $opt['calls'], 1),
            f($k['hwm_mb'] + $k['children_private_mb'], 1), f($k['hwm_mb'], 1), f($k['children_private_mb'], 1), $opt['calls']);
    }
    if (isset($s['tether-async']['send_ms'])) {
        printf("The non-blocking batch handed control back to the caller %s ms after its first step (median), the replies "
            . "then arriving at wait().\n", f($s['tether-async']['send_ms'], 1));
    }
    echo "\n";
}

function print_e4(array $tot, array $opt): void
{
    $procs = $opt['join_procs'];
    echo "#### E4: a join returning 1 to 500 rows, {$procs} concurrent clients (seed 003)\n\n";
    printf("`users` (%s rows: id, name, email, group_code, score, created) left join `groups` (%d rows: code PRIMARY KEY, "
        . "name, description) on the group code, users of a range of ids from a random first one, ordered by group name, "
        . "then id. SQL: `` %s ``. Tether's join: left = `%s` (the same range, in id order), right = `groups` looked up by key "
        . "(columns: name), on group_code, kind left, order_by the group name (a stable sort, so ties keep the id order).\n\n",
        number_format(USERS), GROUPS, SQL_JOIN, SQL_LEFT);
    printf("%d PHP CLI processes at once, each connected once (PDO) or over its Tether socket, %s joins each per row "
        . "(in %s, the variants' order rotating), every join's rows fetched into PHP arrays (`fetchAll`, the "
        . "client's `rows()`; the row used by column keeps the client's decoded column arrays) and counted. Before the timed runs, every variant's rows were compared on %d ranges per size: "
        . "the same users, group names and order. Joins/s: all joins of a run over its wall time, the median over the rounds "
        . "(spread: the slowest and fastest round); x PDO: the median over the rounds of the ratio to that PDO row's joins/s "
        . "in the same round. CPU per join, over all rounds: "
        . "tetherd's and mariadbd's (utime+stime from `/proc/PID/stat`), and the PHP clients' own (getrusage).\n\n",
        $procs, number_format($opt['join_iterations']), n_of($opt['join_rounds'], 'round'), $opt['check_ranges']);
    echo "| rows | variant | joins | wall s | joins/s | spread | x PDO prepared | x PDO unprepared | PHP CPU us/join | tetherd CPU us/join | mariadbd CPU us/join | server CPU us/join |\n";
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    $labels = array_map(static fn ($v) => $v['label'], join_variants());
    foreach ($tot as $size => $vs) {
        foreach ($vs as $v => $r) {
            $us = static fn (float $s) => f($s * 1e6 / $r['joins'], 0);
            $t = str_starts_with($v, 'tether');
            printf("| %d | %s | %s | %s | %s | %s..%s | %s | %s | %s | %s | %s | %s |\n", $size, $t ? "**{$labels[$v]}**" : $labels[$v],
                number_format($r['joins']), f($r['wall_s'], 2), f($r['rate'], 0), f(min($r['rates']), 0), f(max($r['rates']), 0),
                isset($r['x']['pdo-prepared']) ? f($r['x']['pdo-prepared'], 2) : '-', isset($r['x']['pdo-emulated']) ? f($r['x']['pdo-emulated'], 2) : '-',
                $us($r['php_cpu_s']), $t ? $us($r['tetherd_cpu_s']) : '-', $us($r['mariadb_cpu_s']),
                $us($r['mariadb_cpu_s'] + $r['tetherd_cpu_s']));
        }
    }
    $machine = $own = 0.0;
    foreach ($tot as $vs) {
        foreach ($vs as $r) {
            $machine += $r['machine_cpu_s'];
            $own += $r['tetherd_cpu_s'] + $r['mariadb_cpu_s'] + $r['php_cpu_s'];
        }
    }
    $wall = array_sum(array_map(static fn ($vs) => array_sum(array_column($vs, 'wall_s')), $tot));
    $foreign = $wall > 0 ? max(0, $machine - $own) / ($wall * (int) shell_exec('nproc')) * 100 : 0;
    printf("\nServer CPU: tetherd's + mariadbd's. Other processes used about %s%% of the machine's CPU during the %s s of "
        . "timed E4 runs%s.\n\n", f($foreign, 0), f($wall, 1), $foreign > 5 ? ' (**a busy machine: the numbers are skewed**)' : '');
}

function print_targets(?array $e5, ?array $e4, array $opt): void
{
    echo "#### Targets\n\n";
    if ($opt['quick']) {
        echo "Not judged: this was a --quick run (too few and too short measurements); it checked only that every variant works and returns the same results.\n\n";
        return;
    }
    if ($e5 !== null) {
        $scale = $opt['sleep_ms'] / 1000;
        foreach (['tether-batch', 'tether-async'] as $v) {
            if (isset($e5[$v])) {
                $w = $e5[$v]['wall_med'];
                printf("- E5, %s: wall **%s s** median (target <= %s s): %s; %s ms over the sleep, where curl_multi took %s ms over it.\n",
                    $e5[$v]['label'], f($w, 3), f(E5_TARGET_S * $scale, 2), $w <= E5_TARGET_S * $scale ? 'met' : '**not met**',
                    f($w * 1000 - $opt['sleep_ms'], 1), isset($e5['curl-multi']) ? f($e5['curl-multi']['wall_med'] * 1000 - $opt['sleep_ms'], 1) : '-');
            }
        }
        if (isset($e5['tether-batch'], $e5['curl-multi'])) {
            $t = $e5['tether-batch'];
            $c = $e5['curl-multi'];
            $diff = $c['caller_mb'] - $t['caller_mb'];
            $spread = max($t['caller_max_mb'] - $t['caller_min_mb'], $c['caller_max_mb'] - $c['caller_min_mb']);
            printf("- E5, caller peak RSS: Tether batch **%s MB** vs curl_multi %s MB (median; target: less): %s%s. Both callers "
                . "are the same PHP process before the fan-out (%s and %s MB resident at the first line, nearly all of it the PHP "
                . "binary and its extensions); the fan-out raised the peak by %s MB in Tether's caller and %s MB in curl_multi's "
                . "(medians of each run's own growth); PHP's own heap peaked at %s and %s MB.\n", f($t['caller_mb'], 1),
                f($c['caller_mb'], 1), $diff > 0 ? 'met' : '**not met**',
                abs($diff) < $spread ? sprintf(', but by %s MB, less than the %s MB that one run differs from another', f(abs($diff), 2), f($spread, 1)) : '',
                f($t['start_mb'], 1), f($c['start_mb'], 1), f($t['growth_mb'], 2), f($c['growth_mb'], 2),
                f($t['php_peak_mb'], 2), f($c['php_peak_mb'], 2));
        }
    }
    if ($e4 !== null && isset($e4[E4_TARGET_SIZE]['tether-join'])) {
        $vs = $e4[E4_TARGET_SIZE];
        $per = static fn (array $r, string $k) => $r[$k] * 1e6 / $r['joins'];
        $tj = $vs['tether-join'];
        foreach (['pdo-prepared' => 'PDO prepared', 'pdo-emulated' => 'PDO unprepared'] as $k => $name) {
            if (isset($tj['x'][$k])) {
                $x = $tj['x'][$k];
                printf("- E4, %d rows: Tether join **%sx** the joins/s of %s (target >= %sx): %s.\n", E4_TARGET_SIZE, f($x, 2), $name,
                    f(E4_TARGET_RATIO, 1), $x >= E4_TARGET_RATIO ? 'met' : '**not met**');
            }
        }
        if (isset($vs['pdo-prepared'])) {
            $pp = $vs['pdo-prepared'];
            $tServer = $per($tj, 'tetherd_cpu_s') + $per($tj, 'mariadb_cpu_s');
            $pServer = $per($pp, 'mariadb_cpu_s');
            $tAll = $tServer + $per($tj, 'php_cpu_s');
            $pAll = $pServer + $per($pp, 'php_cpu_s');
            printf("- E4, %d rows, server CPU per join (the seed saw about 1/3 of SQL's): Tether join %s us (tetherd %s + mariadbd %s) "
                . "against PDO prepared's mariadbd %s us: **%s** of it; MariaDB alone does %s of the work it does for the SQL join "
                . "(a range read and one lookup of at most %d keys instead of a join and a sort). With the PHP clients' own CPU, a join costs %s us "
                . "in all through Tether (PHP %s) and %s us through PDO prepared (PHP %s).\n",
                E4_TARGET_SIZE, f($tServer, 0), f($per($tj, 'tetherd_cpu_s'), 0), f($per($tj, 'mariadb_cpu_s'), 0), f($pServer, 0),
                f($tServer / $pServer, 2), f($per($tj, 'mariadb_cpu_s') / $pServer, 2), GROUPS + 1, f($tAll, 0), f($per($tj, 'php_cpu_s'), 0),
                f($pAll, 0), f($per($pp, 'php_cpu_s'), 0));
            if (isset($vs['tether-join-columns'])) {
                $tc = $vs['tether-join-columns'];
                printf("- E4, %d rows, used by column (the client's decoded column arrays, no rows built): %sx PDO prepared's joins/s, "
                    . "PHP %s us per join against %s us when it builds rows.\n", E4_TARGET_SIZE, f($tc['x']['pdo-prepared'], 2),
                    f($per($tc, 'php_cpu_s'), 0), f($per($tj, 'php_cpu_s'), 0));
            }
        }
        $busy = $tj['tetherd_cpu_s'] / $tj['wall_s'];
        $machine = $tj['machine_cpu_s'] / $tj['wall_s'];
        $nproc = (int) shell_exec('nproc');
        printf("- E4, %d rows: tetherd was busy %s%% of one CPU during the Tether join runs, and the whole machine %s%% of its %d "
            . "(max_procs = %d: tetherd runs its Go code on %s).%s\n", E4_TARGET_SIZE, f($busy * 100, 0), f($machine / $nproc * 100, 0),
            $nproc, $opt['max_procs'], $opt['max_procs'] === 1 ? 'one thread at a time' : "up to {$opt['max_procs']} threads at once",
            $busy >= 0.85 * $opt['max_procs'] ? ' Its thread' . ($opt['max_procs'] === 1 ? ' was' : 's were') . ' the bottleneck of this row, not the machine.' : '');
        if (isset($vs['pdo-prepared'])) {
            // What the CPU per join allows when nothing else limits: every vCPU busy.
            $ceilT = $nproc / ($tAll / 1e6);
            $ceilP = $nproc / ($pAll / 1e6);
            printf("- E4, %d rows, the most the CPU allows: %d vCPUs over the CPU a join costs everyone gives %s joins/s through "
                . "Tether and %s through PDO prepared, **%sx**. That is the most this CPU per join allows on this machine, "
                . "however tetherd's threads are scheduled; 3.4x would need a join to cost everyone together less than 1/3.4 of its CPU through PDO.\n",
                E4_TARGET_SIZE, $nproc, f($ceilT, 0), f($ceilP, 0), f($ceilT / $ceilP, 2));
        }
        $prof = $opt['profile_result'] ?? null;
        if (is_array($prof)) {
            $parts = [];
            foreach (PROFILE_FUNCS as $fn => $label) {
                if (isset($prof[$fn])) {
                    $parts[] = sprintf('%s %s%%', $label, f($prof[$fn], 0));
                }
            }
            printf("- Where tetherd's CPU goes in a %d-row join (`perf record -g` on tetherd during %s more joins of the same load, "
                . "untimed; the share of its samples in each function and what it calls, so the lines overlap): %s.\n",
                E4_TARGET_SIZE, number_format($opt['join_procs'] * intdiv($opt['join_iterations'], 2)), implode('; ', $parts));
        } elseif (is_string($prof)) {
            printf("- No profile of tetherd: %s.\n", $prof);
        }
    }
    echo "\n";
}

// ---------------------------------------------------------------------------------------------------------------
// Main

function main(array $argv): int
{
    Cfg::load();
    $opt = ['quick' => false, 'only' => null, 'e5_rounds' => 5, 'sleep_ms' => 1000, 'calls' => 10,
        'e5_variants' => array_keys(E5_VARIANTS), 'join_iterations' => 2000, 'join_rounds' => 4, 'join_procs' => 5,
        'join_variants' => array_keys(join_variants()), 'join_sizes' => JOIN_SIZES, 'profile' => true,
        'max_procs' => (int) env('TETHERD_MAX_PROCS', '1')];
    $json = null;
    $set = [];
    $args = array_slice($argv, 1);
    $ints = ['--e5-rounds' => 'e5_rounds', '--sleep-ms' => 'sleep_ms', '--calls' => 'calls', '--join-iterations' => 'join_iterations',
        '--join-rounds' => 'join_rounds', '--join-procs' => 'join_procs', '--join-hot' => 'join_hot'];
    $lists = ['--e5-variants' => 'e5_variants', '--join-variants' => 'join_variants', '--join-sizes' => 'join_sizes'];
    while ($args) {
        $a = array_shift($args);
        if ($a === '--quick') {
            $opt['quick'] = true;
        } elseif ($a === '--no-profile') {
            $opt['profile'] = $set['profile'] = false;
        } elseif ($a === '--json') {
            $json = array_shift($args);
        } elseif ($a === '--only') {
            $opt['only'] = array_shift($args);
            in_array($opt['only'], ['e4', 'e5'], true) || throw new RuntimeException('--only: want e4 or e5');
        } elseif (isset($ints[$a])) {
            $v = (int) array_shift($args);
            $v > 0 || throw new RuntimeException("$a: want a positive integer");
            $opt[$ints[$a]] = $set[$ints[$a]] = $v;
        } elseif (isset($lists[$a])) {
            $opt[$lists[$a]] = $set[$lists[$a]] = explode(',', (string) array_shift($args));
        } else {
            fwrite(STDERR, "bench.php: unknown argument $a\n");
            return 2;
        }
    }
    if ($opt['quick']) {
        // Explicit options still win.
        $opt = array_merge($opt, ['e5_rounds' => 1, 'sleep_ms' => 100, 'join_iterations' => 50, 'join_rounds' => 1, 'profile' => false], $set);
    }
    $opt['join_sizes'] = array_map('intval', $opt['join_sizes']);
    if (($opt['join_hot'] ?? 0) > 0) {
        // The workers' ranges come from that many first ids (join_first), as a listing's pages do.
        putenv('BENCH_JOIN_HOT=' . $opt['join_hot']);
    }
    foreach ($opt['e5_variants'] as $v) {
        isset(E5_VARIANTS[$v]) || throw new RuntimeException("--e5-variants: unknown variant $v");
    }
    foreach ($opt['join_variants'] as $v) {
        isset(join_variants()[$v]) || throw new RuntimeException("--join-variants: unknown variant $v");
    }
    $opt['join_rounds'] = min($opt['join_rounds'], $opt['join_iterations']);
    $opt['join_iterations'] -= $opt['join_iterations'] % $opt['join_rounds'];

    $e5 = $e4 = null;
    $raw = [];
    $t0 = hrtime(true);
    if ($opt['only'] !== 'e4') {
        $raw['e5'] = run_e5($opt['e5_variants'], $opt['e5_rounds'], $opt['sleep_ms'], $opt['calls']);
        $e5 = e5_summary($raw['e5']);
    }
    if ($opt['only'] !== 'e5') {
        progress('E4: checking that every variant returns the same rows');
        $opt['check_ranges'] = check_join($opt['join_variants'], $opt['join_sizes']);
        $e4 = $raw['e4'] = run_e4($opt['join_variants'], $opt['join_sizes'], $opt['join_iterations'], $opt['join_rounds'], $opt['join_procs']);
        if ($opt['profile'] && in_array('tether-join', $opt['join_variants'], true) && in_array(E4_TARGET_SIZE, $opt['join_sizes'], true)) {
            progress(sprintf('E4: profiling tetherd with perf during %d more Tether joins of %d rows (untimed)', $opt['join_procs'] * intdiv($opt['join_iterations'], 2), E4_TARGET_SIZE));
            $opt['profile_result'] = profile_tetherd('tether-join', E4_TARGET_SIZE, intdiv($opt['join_iterations'], 2), $opt['join_procs']);
        }
    }
    $opt['wall_s'] = (hrtime(true) - $t0) / 1e9;

    if ($e5 !== null) {
        print_e5($e5, $opt);
    }
    if ($e4 !== null) {
        print_e4($e4, $opt);
    }
    print_targets($e5, $e4, $opt);
    if ($json !== null) {
        file_put_contents($json, json_encode(['options' => $opt, 'e5' => $e5, 'e4' => $e4, 'raw' => $raw], JSON_PRETTY_PRINT) . "\n");
    }
    return 0;
}

try {
    exit(main($argv));
} catch (Throwable $e) {
    fwrite(STDERR, sprintf("bench/fanout/bench.php: %s: %s\n  at %s:%d\n", get_class($e), $e->getMessage(), $e->getFile(), $e->getLine()));
    exit(1);
}
