<?php

declare(strict_types=1);

/*
 * bench/web/bench.php: the driver of the web benchmark. Run it through bench/web/run.sh, which starts the servers
 * and passes their coordinates (config.php, PIDs) in the environment.
 *
 *   php bench.php phase --server NAME --url URL --web-pids "PID..." --workers N --out FILE [--fresh-url URL]
 *                       [--quick] [--rounds N] [--seconds S] [--only KEY,...] [--settings KEY,...]
 *   php bench.php report --json FILE PHASE_FILE...
 *
 * phase, against one running web server:
 *  1. check    GET every row's page once (?id=42) with curl; its body must be exactly what the row expects.
 *  2. warm-up  (not in --quick) per page file, ab -c 100 through every worker, so that persistent connections and
 *              OPcache are in place; then per row and load setting a calibration run, whose req/s sizes the
 *              measured runs (ab -n N with N = req/s x --seconds, so every run lasts about as long). A row runs only
 *              in the settings of its group's group_settings (rows.php), when it has any.
 *  3. rounds   in each round every load setting, and in it every row, gets one measured ab run (rows in reverse
 *              order every other round, settings rotated), so that a noisy minute on the shared host hits all rows
 *              of a comparison alike. Around each run: CPU of every process involved (/proc utime+stime, children
 *              included), the row's backend connections (sampled every 50 ms; MariaDB also Max_used_connections
 *              after FLUSH STATUS), the row's daemon's RSS. Every run must have 0 failed and 0 non-2xx requests
 *              (--quick: fatal; full run: reported).
 *  4. probes   (rows.php 'probes') the read latency inside the page, one request at a time: reads in the server's
 *              long-lived workers, then, at --fresh-url (the same pages served by workers that each serve one
 *              request), the first read of fresh workers. Every answer's body is checked too.
 * It writes everything it measured to --out as JSON.
 *
 * report merges the phase files, prints the markdown section of docs/benchmarks.md on stdout and writes the merged
 * results (with the medians, spreads and ratios the plots show) to --json.
 *
 * Environment (set by run.sh): BENCH_WEB_CONFIG (the pages' config.php), TETHERD_PID, GOSERVICE_PID, PGBOUNCER_PID,
 * MARIADB_PID, PG_PID, CASSANDRA_PID, BTEMULATOR_PID, BENCH_WEB_PG_ADMIN_DSN (a superuser connection string),
 * BENCH_WEB_CASSANDRA_ADMIN (user:password of a Cassandra superuser), CLK_TCK; for report also BENCH_WEB_CMD,
 * BENCH_WEB_DATE, BENCH_WEB_LOAD_BEFORE/AFTER, BENCH_WEB_WORKERS, BENCH_WEB_POOL, BENCH_WEB_{MARIADB,PG,CASSANDRA}_VERSION.
 */

const ROWS_FILE = __DIR__ . '/rows.php';
const SEED_E1_FILE = __DIR__ . '/../cli/seed-e1.php';
const CHECK_ID = 42;
const SAMPLE_EVERY_US = 50000;
const QUICK_REQUESTS = 500; // per row and load setting
const FRESH_PAUSE_US = 50000; // between two requests to fresh workers

function progress(string $msg): void
{
    fwrite(STDERR, "  .. $msg\n");
}

function fail(string $msg): never
{
    fwrite(STDERR, "==> ERROR: bench.php: $msg\n");
    exit(1);
}

function env(string $name, ?string $default = null): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        return $default ?? fail("environment variable $name is required (run bench/web/run.sh)");
    }
    return $v;
}

// ---------------------------------------------------------------------------------------------------------------
// Processes: CPU and memory from /proc

/** proc_stat returns the fields of /proc/PID/stat after the command name (index 0 = state), or null if gone. */
function proc_stat(int $pid): ?array
{
    $s = @file_get_contents("/proc/$pid/stat");
    return $s === false ? null : explode(' ', substr($s, strrpos($s, ')') + 2));
}

/** proc_ticks returns utime+stime+cutime+cstime of a process (all threads, and its children reaped), in ticks. */
function proc_ticks(int $pid): int
{
    $f = proc_stat($pid);
    return $f === null ? 0 : (int) $f[11] + (int) $f[12] + (int) $f[13] + (int) $f[14];
}

/** children_map returns parent pid => list of child pids, for every process now. */
function children_map(): array
{
    $map = [];
    foreach (glob('/proc/[0-9]*', GLOB_ONLYDIR) ?: [] as $dir) {
        $pid = (int) substr($dir, 6);
        $f = proc_stat($pid);
        if ($f !== null) {
            $map[(int) $f[1]][] = $pid;
        }
    }
    return $map;
}

/** tree_ticks returns proc_ticks summed over PID and all its live descendants. */
function tree_ticks(int $pid, array $children): int
{
    $t = proc_ticks($pid);
    foreach ($children[$pid] ?? [] as $c) {
        $t += tree_ticks($c, $children);
    }
    return $t;
}

/**
 * rss_kb returns the resident memory of a process, in KiB: all of it (VmRSS) and its private part (RssAnon; the rest
 * is mostly the mapped binary). @return array{0: int, 1: int}
 */
function rss_kb(int $pid): array
{
    $s = (string) @file_get_contents("/proc/$pid/status");
    $rss = preg_match('/^VmRSS:\s+(\d+)/m', $s, $m) ? (int) $m[1] : 0;
    $anon = preg_match('/^RssAnon:\s+(\d+)/m', $s, $m) ? (int) $m[1] : 0;
    return [$rss, $anon];
}

/**
 * machine_ticks returns the busy CPU time of the whole machine (all CPUs: user, nice, system, irq, softirq; not
 * steal), in ticks. Compared with the sum over processes it is approximate: the kernel accounts the two differently,
 * a few percent apart.
 */
function machine_ticks(): int
{
    $f = preg_split('/\s+/', trim(strtok(file_get_contents('/proc/stat'), "\n")));
    return (int) $f[1] + (int) $f[2] + (int) $f[3] + (int) $f[6] + (int) $f[7];
}

/** self_ticks returns the CPU time of this process and its reaped children (ab), in ticks. */
function self_ticks(): float
{
    $us = 0.0;
    foreach ([0, 1] as $who) {
        $r = getrusage($who);
        $us += $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
    }
    return $us * (int) env('CLK_TCK', '100') / 1e6;
}

// ---------------------------------------------------------------------------------------------------------------
// The run: configuration, processes, backend connection counters

final class Run
{
    public array $cfg;
    /** @var array<string, int> service => pid */
    public array $pids = [];
    /** @var list<int> */
    public array $webPids = [];
    public ?mysqli $my = null;
    /** @var PgSql\Connection|null */
    public $pg = null;
    public ?CqlConnection $cql = null;

    public function __construct(array $webPids)
    {
        $this->cfg = require env('BENCH_WEB_CONFIG');
        foreach (['tetherd' => 'TETHERD_PID', 'goservice' => 'GOSERVICE_PID', 'pgbouncer' => 'PGBOUNCER_PID',
            'mariadb' => 'MARIADB_PID', 'postgres' => 'PG_PID', 'cassandra' => 'CASSANDRA_PID', 'bigtable' => 'BTEMULATOR_PID'] as $svc => $var) {
            $pid = (int) getenv($var);
            if ($pid > 0) {
                $this->pids[$svc] = $pid;
            }
        }
        $this->webPids = $webPids;
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        if (isset($this->pids['mariadb'])) {
            $this->my = new mysqli('localhost', 'root', '', '', 0, $this->cfg['mysql_socket']);
        }
        if (isset($this->pids['postgres'])) {
            $this->pg = pg_connect(env('BENCH_WEB_PG_ADMIN_DSN')) ?: fail('cannot connect to PostgreSQL as its superuser');
        }
        if (isset($this->pids['cassandra'])) {
            require_once __DIR__ . '/../cli/cql.php';
            [$user, $password] = explode(':', env('BENCH_WEB_CASSANDRA_ADMIN'), 2);
            $this->cql = new CqlConnection($this->cfg['cassandra_host'], $this->cfg['cassandra_port']);
            if ($this->cql->startup()) {
                $this->cql->authenticate($user, $password);
            }
        }
    }

    /** alive fails unless every service the row needs is running. */
    public function checkNeeds(array $row): void
    {
        foreach ($row['needs'] as $svc) {
            $pid = $this->pids[$svc] ?? fail("row {$row['key']} needs $svc, which run.sh did not start");
            if (proc_stat($pid) === null) {
                fail("row {$row['key']} needs $svc (pid $pid), which is not running");
            }
        }
    }

    /** user returns the database user name of a conns spec [db, user key]. */
    public function user(array $conns): string
    {
        return $this->cfg['users'][$conns[1]] ?? fail("conns: no user '{$conns[1]}' in config.php");
    }

    /** conns returns the open connections per user of one database. @return array<string, int> */
    public function conns(string $db): array
    {
        $out = [];
        if ($db === 'mariadb') {
            // SHOW PROCESSLIST needs no temporary table (a GROUP BY over information_schema does).
            foreach ($this->my->query('SHOW PROCESSLIST')->fetch_all(MYSQLI_ASSOC) as $p) {
                $out[$p['User']] = ($out[$p['User']] ?? 0) + 1;
            }
        } elseif ($db === 'postgres') {
            $r = pg_query($this->pg, "SELECT usename, count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY usename");
            foreach (pg_fetch_all($r, PGSQL_NUM) as [$u, $n]) {
                $out[(string) $u] = (int) $n;
            }
        } elseif ($db === 'cassandra') {
            foreach ($this->cql->query('SELECT username FROM system_views.clients') as $c) {
                $out[(string) $c['username']] = ($out[(string) $c['username']] ?? 0) + 1;
            }
        }
        return $out;
    }

    /** mysqlStatus returns global status variables of MariaDB. @return array<string, int> */
    public function mysqlStatus(array $vars): array
    {
        $out = [];
        $in = "'" . implode("','", $vars) . "'";
        foreach ($this->my->query("SHOW GLOBAL STATUS WHERE Variable_name IN ($in)")->fetch_all() as [$k, $v]) {
            $out[$k] = (int) $v;
        }
        return $out;
    }

    /** cpu reads the CPU ticks of every process involved. @return array<string, float> */
    public function cpu(): array
    {
        $children = children_map();
        $out = ['machine' => machine_ticks(), 'driver' => self_ticks(), 'web' => 0];
        foreach ($this->webPids as $pid) {
            $out['web'] += tree_ticks($pid, $children);
        }
        foreach ($this->pids as $svc => $pid) {
            $out[$svc] = tree_ticks($pid, $children);
        }
        return $out;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// ab

/**
 * run_ab runs ab against $url and returns what it reported: requests, failures, req/s, mean, p50/p99 (ms, from its
 * CSV percentiles, which have microsecond resolution where its text table has whole ms). While ab runs, $sample()
 * is called every 50 ms.
 */
function run_ab(string $url, int $n, int $c, bool $k, ?callable $sample = null): array
{
    $csv = tempnam(sys_get_temp_dir(), 'tether-web-ab.');
    $cmd = ['ab', '-q', '-n', (string) $n, '-c', (string) $c, '-s', '60', '-e', $csv];
    if ($k) {
        $cmd[] = '-k';
    }
    $cmd[] = $url;
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    if ($p === false) {
        fail('cannot start ab');
    }
    stream_set_blocking($pipes[1], false);
    stream_set_blocking($pipes[2], false);
    $out = $err = '';
    while (true) {
        $out .= stream_get_contents($pipes[1]);
        $err .= stream_get_contents($pipes[2]);
        if (!proc_get_status($p)['running']) {
            break;
        }
        if ($sample !== null) {
            $sample();
        }
        usleep(SAMPLE_EVERY_US);
    }
    stream_set_blocking($pipes[1], true);
    stream_set_blocking($pipes[2], true);
    $out .= stream_get_contents($pipes[1]);
    $err .= stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    $rc = proc_close($p);
    if ($sample !== null) {
        $sample();
    }
    $get = static function (string $re) use ($out): ?string {
        return preg_match($re, $out, $m) ? $m[1] : null;
    };
    $pct = [];
    foreach (file($csv, FILE_IGNORE_NEW_LINES) ?: [] as $line) {
        if (preg_match('/^(\d+),([\d.]+)$/', $line, $m)) {
            $pct[(int) $m[1]] = (float) $m[2];
        }
    }
    unlink($csv);
    $done = $get('/^Complete requests:\s+(\d+)/m');
    if ($done === null || !isset($pct[50], $pct[99])) {
        fail("ab $url (-n $n -c $c" . ($k ? ' -k' : '') . ") failed, exit $rc:\n$out\n$err");
    }
    return [
        'n' => $n,
        'complete' => (int) $done,
        'failed' => (int) $get('/^Failed requests:\s+(\d+)/m'),
        'non2xx' => (int) ($get('/^Non-2xx responses:\s+(\d+)/m') ?? 0),
        'keepalive' => (int) ($get('/^Keep-Alive requests:\s+(\d+)/m') ?? 0),
        'seconds' => (float) $get('/^Time taken for tests:\s+([\d.]+)/m'),
        'rps' => (float) $get('/^Requests per second:\s+([\d.]+)/m'),
        'mean_ms' => (float) $get('/^Time per request:\s+([\d.]+) \[ms\] \(mean\)$/m'),
        'p50_ms' => $pct[50],
        'p99_ms' => $pct[99],
        'ab_error' => trim($err),
    ];
}

// ---------------------------------------------------------------------------------------------------------------
// The phase

/** page_url returns the URL of a row's page at $base, with $query (a=1&b=2) added to the page's own query string. */
function page_url(string $base, array $row, string $query = ''): string
{
    $url = "$base/{$row['page']}";
    return $query === '' ? $url : $url . (str_contains($url, '?') ? '&' : '?') . $query;
}

/** expected_body returns what a page of the given kind must answer for ?id=$id. */
function expected_body(string $kind, int $id = CHECK_ID): string
{
    if (preg_match('/^rows:(\d+)$/', $kind, $m)) {
        // A page of N point reads: ids $id .. $id+N-1, one line each (pages/lib.php, bench_ids).
        return implode('', array_map(static fn (int $i) => expected_body('row', $i), range($id, $id + (int) $m[1] - 1)));
    }
    return match ($kind) {
        'empty' => '',
        'pong' => "pong\n",
        'one' => "1\n",
        // The data run.sh loads: name-N, (N * 7919) % 1000, 2026-01-01 00:00:00 minus N minutes.
        'row' => sprintf("%5d %-10s %3d %s\n", $id, "name-$id", ($id * 7919) % 1000,
            (new DateTimeImmutable('2026-01-01 00:00:00', new DateTimeZone('UTC')))->modify("-$id minutes")->format('Y-m-d H:i:s')),
        // Seed E1's two reads of the data load-cassandra.php writes, as render_cells prints them.
        'cass-row', 'cass-super' => (static function () use ($kind): string {
            $seed = require SEED_E1_FILE;
            $cells = $kind === 'cass-row' ? $seed['c1'][$seed['row_key']] : $seed['s1'][$seed['row_key']][$seed['super_column']];
            $out = '';
            foreach ($cells as $name => $value) {
                $out .= sprintf("%-6s %s\n", $name, $value);
            }
            return $out;
        })(),
        default => fail("unknown expect '$kind'"),
    };
}

/** check_page fetches a row's page once with curl and fails unless it answers 200 with the expected body. */
function check_page(string $url, array $row): void
{
    $ch = curl_init(page_url($url, $row, 'id=' . CHECK_ID));
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 30]);
    $body = curl_exec($ch);
    $status = curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    $want = expected_body($row['expect']);
    if ($body === false || $status !== 200 || $body !== $want) {
        fail(sprintf("page %s answered %s %s, want 200 %s (see the web server's error log)", $row['page'], $status,
            json_encode($body === false ? curl_error($ch) : $body), json_encode($want)));
    }
}

/**
 * measure runs ab once for a row and load setting, and returns ab's figures plus what happened around it: CPU ticks
 * of every process, the row's backend connections at peak, its daemon's RSS at peak.
 */
function measure(Run $run, string $url, array $row, array $set, int $n): array
{
    $conns = $row['conns'];
    $user = $conns ? $run->user($conns) : null;
    $peak = 0;
    $baseline = null;
    if ($conns && $conns[0] === 'mariadb') {
        // Max_used_connections restarts from the connections open now; the row's peak is what it adds to the others.
        $run->my->query('FLUSH STATUS');
        $now = $run->conns('mariadb');
        $baseline = ['threads' => array_sum($now), 'user' => $now[$user] ?? 0];
    }
    $daemonPid = $row['daemon'] ? $run->pids[$row['daemon']] : null;
    $rss = $anon = 0;
    $sample = static function () use ($run, $conns, $user, $daemonPid, &$peak, &$rss, &$anon): void {
        if ($conns) {
            $peak = max($peak, $run->conns($conns[0])[$user] ?? 0);
        }
        if ($daemonPid) {
            [$r, $a] = rss_kb($daemonPid);
            $rss = max($rss, $r);
            $anon = max($anon, $a);
        }
    };
    $sample();
    $cpu0 = $run->cpu();
    $ab = run_ab(page_url($url, $row), $n, $set['c'], $set['k'], $sample);
    $cpu1 = $run->cpu();
    if ($baseline !== null) {
        $maxUsed = $run->mysqlStatus(['Max_used_connections'])['Max_used_connections'];
        $peak = max($peak, $maxUsed - ($baseline['threads'] - $baseline['user']));
    }
    $cpu = [];
    foreach ($cpu1 as $k => $v) {
        $cpu[$k] = $v - $cpu0[$k];
    }
    return $ab + ['cpu_ticks' => $cpu, 'conns_peak' => $conns ? $peak : null, 'daemon_rss_kb' => $daemonPid ? $rss : null,
        'daemon_anon_kb' => $daemonPid ? $anon : null];
}

/**
 * http_get fetches $url with the curl handle $ch and returns [status, body, headers (lower-case name => value),
 * total time in us].
 *
 * @param CurlHandle $ch
 */
function http_get($ch, string $url): array
{
    $headers = [];
    curl_setopt_array($ch, [
        CURLOPT_URL => $url,
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_TIMEOUT => 30,
        CURLOPT_HEADERFUNCTION => static function ($ch, string $line) use (&$headers): int {
            if (str_contains($line, ':')) {
                [$k, $v] = explode(':', $line, 2);
                $headers[strtolower(trim($k))] = trim($v);
            }
            return strlen($line);
        },
    ]);
    $body = curl_exec($ch);
    return [curl_getinfo($ch, CURLINFO_RESPONSE_CODE), $body === false ? curl_error($ch) : $body, $headers,
        curl_getinfo($ch, CURLINFO_TOTAL_TIME_T)];
}

/** latency_stats summarizes read times (ns) in us: mean, p50, p99. */
function latency_stats(array $ns): array
{
    if (!$ns) {
        return ['mean_us' => null, 'p50_us' => null, 'p99_us' => null];
    }
    sort($ns);
    $n = count($ns);
    return ['mean_us' => array_sum($ns) / $n / 1000, 'p50_us' => $ns[intdiv($n, 2)] / 1000,
        'p99_us' => $ns[min($n - 1, (int) floor(0.99 * $n))] / 1000];
}

/**
 * run_probe measures the read latency inside the pages of one probe (rows.php 'probes'), one request at a time, the
 * rows in turn: $steady reads per row from the long-lived workers at $url (over one keep-alive connection), then
 * $fresh first reads per row at $freshUrl (a new connection each). Every body is checked. Returns per row the
 * statistics of both, and the problems found (a wrong answer; a "fresh" worker that answered twice).
 *
 * @return array{0: array<string, array>, 1: list<string>}
 */
function run_probe(array $probe, array $rowsByKey, string $url, ?string $freshUrl, int $steady, int $fresh): array
{
    $problems = [];
    $out = [];
    $one = static function ($ch, string $base, array $row, int $t = 1) use (&$problems): ?array {
        $id = mt_rand(1, 10000);
        [$status, $body, $h, $us] = http_get($ch, page_url($base, $row, "t=$t&id=$id"));
        if ($status !== 200 || $body !== expected_body($row['expect'], $id) || !isset($h['x-read-ns'], $h['x-pid'])) {
            $problems[] = sprintf('%s?id=%d answered %s %s', $row['page'], $id, $status, json_encode(substr((string) $body, 0, 200)));
            return null;
        }
        return ['ns' => (int) $h['x-read-ns'], 'pid' => (int) $h['x-pid'], 'db_us' => isset($h['x-db-us']) ? (float) $h['x-db-us'] : null,
            'server_us' => isset($h['x-server-us']) ? (float) $h['x-server-us'] : null,
            'ns2' => isset($h['x-read2-ns']) ? (int) $h['x-read2-ns'] : null, 'page_us' => $us];
    };
    $mean = static fn (array $v): ?float => ($v = array_filter($v, static fn ($x) => $x !== null)) ? array_sum($v) / count($v) : null;
    $collect = static function (array $reads, int $leftOut, int $workers) use ($mean): array {
        $second = $mean(array_column($reads, 'ns2'));
        return ['n' => count($reads), 'left_out' => $leftOut, 'workers' => $workers]
            + latency_stats(array_column($reads, 'ns'))
            + ['db_us' => $mean(array_column($reads, 'db_us')), 'server_us' => $mean(array_column($reads, 'server_us')), 'second_mean_us' => $second === null ? null : $second / 1000,
                'page_ms' => $reads ? $mean(array_column($reads, 'page_us')) / 1000 : null];
    };

    // Steady state: a read counts once its worker has served that page before in the probe.
    $ch = curl_init();
    $reads = $seen = $leftOut = [];
    for ($i = 0; $i < $steady; $i++) {
        foreach ($probe['rows'] as $key) {
            $r = $one($ch, $url, $rowsByKey[$key]);
            if ($r === null) {
                continue;
            }
            if (isset($seen[$key][$r['pid']])) {
                $reads[$key][] = $r;
            } else {
                $leftOut[$key] = ($leftOut[$key] ?? 0) + 1;
            }
            $seen[$key][$r['pid']] = true;
        }
    }
    curl_close($ch);
    foreach ($probe['rows'] as $key) {
        $out[$key]['steady'] = $collect($reads[$key] ?? [], $leftOut[$key] ?? 0, count($seen[$key] ?? []));
    }

    // Long-lived workers again, each request after the pause the fresh ones get (FRESH_PAUSE_US), as many as those:
    // a first read in a fresh worker follows a pause in which every process involved went idle (tetherd, its
    // backend's client, the backend), and a read after a pause pays for waking them up, fresh worker or not. These
    // reads tell that cost from the fresh worker's own (its classes, its new socket).
    if ($freshUrl !== null && $fresh > 0) {
        $ch = curl_init();
        $reads = $seen = [];
        for ($i = 0; $i < $fresh; $i++) {
            foreach ($probe['rows'] as $key) {
                usleep(FRESH_PAUSE_US);
                $r = $one($ch, $url, $rowsByKey[$key]);
                if ($r !== null && isset($seen[$key][$r['pid']])) {
                    $reads[$key][] = $r;
                }
                $seen[$key][$r['pid'] ?? 0] = true;
            }
        }
        curl_close($ch);
        foreach ($probe['rows'] as $key) {
            $out[$key]['paused'] = $collect($reads[$key] ?? [], 0, count($seen[$key] ?? []));
        }
    }

    // Fresh workers: each answer must come from a pid never seen before. A pause between requests lets the server
    // start the next worker beforehand (apache2 forks at most 32 a second), so that a read does not share the CPUs
    // with a fork; each page reads twice (t=2), the second read for the diagnosis only.
    if ($freshUrl !== null && $fresh > 0) {
        $reads = [];
        $pids = [];
        for ($i = 0; $i < $fresh; $i++) {
            foreach ($probe['rows'] as $key) {
                usleep(FRESH_PAUSE_US);
                $ch = curl_init();
                curl_setopt_array($ch, [CURLOPT_FORBID_REUSE => true, CURLOPT_FRESH_CONNECT => true]);
                $r = $one($ch, $freshUrl, $rowsByKey[$key], 2);
                curl_close($ch);
                if ($r === null) {
                    continue;
                }
                if (isset($pids[$r['pid']])) {
                    $problems[] = "{$rowsByKey[$key]['page']} at $freshUrl: worker {$r['pid']} answered twice (not a fresh worker)";
                    continue;
                }
                $pids[$r['pid']] = true;
                $reads[$key][] = $r;
            }
        }
        foreach ($probe['rows'] as $key) {
            $out[$key]['fresh'] = $collect($reads[$key] ?? [], 0, count($reads[$key] ?? []));
        }
    }
    return [$out, $problems];
}

function phase(array $argv): int
{
    $opt = ['server' => null, 'url' => null, 'web-pids' => null, 'workers' => null, 'out' => null, 'quick' => false,
        'rounds' => null, 'seconds' => 1.5, 'only' => null, 'settings' => null, 'fresh-url' => null];
    for ($i = 0; $i < count($argv); $i++) {
        $a = $argv[$i];
        if ($a === '--quick') {
            $opt['quick'] = true;
        } elseif (str_starts_with($a, '--') && array_key_exists(substr($a, 2), $opt) && isset($argv[$i + 1])) {
            $opt[substr($a, 2)] = $argv[++$i];
        } else {
            fail("phase: bad argument $a");
        }
    }
    foreach (['server', 'url', 'web-pids', 'workers', 'out'] as $k) {
        $opt[$k] ?? fail("phase: --$k is required");
    }
    $rounds = (int) ($opt['rounds'] ?? ($opt['quick'] ? 1 : 3));
    $seconds = (float) $opt['seconds'];
    $workers = (int) $opt['workers'];
    if ($rounds < 1 || $seconds <= 0) {
        fail('phase: --rounds must be >= 1 and --seconds > 0');
    }
    $spec = require ROWS_FILE;
    $rows = $spec['rows'];
    if ($opt['only'] !== null) {
        $only = explode(',', $opt['only']);
        $rows = array_values(array_filter($rows, static fn ($r) => in_array($r['key'], $only, true)));
        count($rows) === count($only) || fail('--only: unknown row in ' . $opt['only']);
    }
    $settings = $spec['settings'];
    if ($opt['settings'] !== null) {
        $settings = array_intersect_key($settings, array_flip(explode(',', $opt['settings'])));
        $settings ?: fail('--settings: none of ' . $opt['settings']);
    }
    $run = new Run(array_map('intval', preg_split('/\s+/', trim($opt['web-pids']))));
    $url = rtrim($opt['url'], '/');
    $server = $opt['server'];
    $t0 = microtime(true);
    $cpu0 = $run->cpu();

    // 1. Every page answers what it should.
    foreach ($rows as $row) {
        $run->checkNeeds($row);
        check_page($url, $row);
    }
    progress(sprintf('%s: %d pages answer as expected', $server, count($rows)));

    // 2. Warm-up and calibration: N per row and setting, in the settings of its group (group_settings). A row has
    // no N in a setting it is not measured in.
    $n = [];
    $warm = [];
    foreach ($rows as $row) {
        $rowSettings = isset($spec['group_settings'][$row['group']])
            ? array_intersect_key($settings, array_flip($spec['group_settings'][$row['group']])) : $settings;
        foreach ($rowSettings as $sk => $set) {
            $n[$row['key']][$sk] = QUICK_REQUESTS;
        }
        if ($opt['quick'] || !$rowSettings) {
            continue;
        }
        // Round-robin accept (apache prefork) and fpm's queue spread these over every worker. Once per page file:
        // rows of one page with another ?n= share its persistent connections and OPcache entry.
        $file = strtok($row['page'], '?');
        if (!isset($warm[$file])) {
            run_ab(page_url($url, $row), max(500, 3 * $workers), 100, false);
            $warm[$file] = true;
        }
        foreach ($rowSettings as $sk => $set) {
            $cal = run_ab(page_url($url, $row), max(300, 20 * $set['c']), $set['c'], $set['k']);
            $want = (int) round($cal['rps'] * $seconds, -2);
            $n[$row['key']][$sk] = max(10 * $set['c'], 500, min(200000, $want));
        }
    }
    if (!$opt['quick']) {
        progress(sprintf('%s: warmed up and calibrated in %.0f s', $server, microtime(true) - $t0));
    }

    // 3. Rounds.
    $runs = [];
    $failures = [];
    $setKeys = array_keys($settings);
    for ($r = 0; $r < $rounds; $r++) {
        $tr = microtime(true);
        $order = $r % 2 ? array_reverse($rows) : $rows;
        $sets = array_merge(array_slice($setKeys, $r % count($setKeys)), array_slice($setKeys, 0, $r % count($setKeys)));
        foreach ($sets as $sk) {
            foreach ($order as $row) {
                if (!isset($n[$row['key']][$sk])) {
                    continue; // not in this setting (group_settings)
                }
                $m = measure($run, $url, $row, $settings[$sk], $n[$row['key']][$sk]);
                $m['round'] = $r;
                $runs[$sk][$row['key']][] = $m;
                if ($m['failed'] || $m['non2xx'] || $m['complete'] !== $m['n']) {
                    $msg = sprintf('%s %s %s: %d of %d complete, %d failed, %d non-2xx', $server, $settings[$sk]['label'], $row['key'],
                        $m['complete'], $m['n'], $m['failed'], $m['non2xx']);
                    $failures[] = $msg;
                    fwrite(STDERR, "==> WARNING: $msg\n");
                    if ($opt['quick']) {
                        fail("$msg (a page that fails under load; see the web server's error log)");
                    }
                }
            }
        }
        progress(sprintf('%s: round %d/%d done in %.0f s', $server, $r + 1, $rounds, microtime(true) - $tr));
    }

    // 4. Read latency inside the pages.
    $probes = [];
    $rowsByKey = array_column($rows, null, 'key');
    foreach ($spec['probes'] ?? [] as $pk => $probe) {
        if (array_diff($probe['rows'], array_keys($rowsByKey))) {
            continue; // --only left some of its rows out
        }
        $tp = microtime(true);
        $steady = $opt['quick'] ? max(10, intdiv($probe['steady'], 10)) : $probe['steady'];
        $fresh = $probe['fresh'] > 0 && $opt['quick'] ? max(10, intdiv($probe['fresh'], 10)) : $probe['fresh'];
        [$probes[$pk], $problems] = run_probe($probe, $rowsByKey, $url, $opt['fresh-url'] === null ? null : rtrim($opt['fresh-url'], '/'), $steady, $fresh);
        foreach ($problems as $msg) {
            $failures[] = "$server probe $pk: $msg";
            fwrite(STDERR, "==> WARNING: $server probe $pk: $msg\n");
            if ($opt['quick']) {
                fail("$server probe $pk: $msg");
            }
        }
        progress(sprintf('%s: probe %s (%d steady%s reads per row) done in %.0f s', $server, $pk, $steady,
            $opt['fresh-url'] !== null && $fresh > 0 ? ", $fresh fresh-worker" : '', microtime(true) - $tp));
    }

    $cpu1 = $run->cpu();
    $wall = microtime(true) - $t0;
    $ours = 0;
    foreach ($cpu1 as $k => $v) {
        $ours += $k === 'machine' ? 0 : $v - $cpu0[$k];
    }
    $foreign = max(0, ($cpu1['machine'] - $cpu0['machine']) - $ours) / (int) env('CLK_TCK', '100');
    $result = [
        'server' => $server,
        'quick' => $opt['quick'],
        'rounds' => $rounds,
        'seconds' => $seconds,
        'workers' => $workers,
        'wall_s' => $wall,
        'foreign_cpu_pct' => 100 * $foreign / $wall / (int) trim((string) shell_exec('nproc')),
        'settings' => $settings,
        'rows' => array_column($rows, 'key'),
        'n' => $n,
        'runs' => $runs,
        'probes' => $probes,
        'fresh' => $opt['fresh-url'] !== null,
        'failures' => $failures,
    ];
    file_put_contents($opt['out'], json_encode($result, JSON_PRETTY_PRINT) . "\n");
    progress(sprintf('%s: done in %.0f s', $server, $wall));
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The report

function median(array $v): float
{
    sort($v);
    $n = count($v);
    return $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
}

/**
 * summarize turns one row's runs in one setting into what the tables show: medians over rounds of req/s, mean, p50,
 * p99; the spread (min, max) of req/s; the daemon's and database's CPU per request over all its runs.
 */
function summarize(array $row, array $runs, int $clk): array
{
    $req = array_sum(array_column($runs, 'complete'));
    $ticks = static function (?string $who) use ($runs): ?int {
        return $who === null ? null : array_sum(array_map(static fn ($m) => $m['cpu_ticks'][$who] ?? 0, $runs));
    };
    $perReq = static fn (?int $t): ?float => $t === null || $req === 0 ? null : $t * 1e6 / $clk / $req;
    $rps = array_column($runs, 'rps');
    return [
        'rps' => median($rps),
        'rps_min' => min($rps),
        'rps_max' => max($rps),
        'rps_rounds' => $rps,
        'mean_ms' => median(array_column($runs, 'mean_ms')),
        'p50_ms' => median(array_column($runs, 'p50_ms')),
        'p99_ms' => median(array_column($runs, 'p99_ms')),
        'requests' => $req,
        'n' => $runs[0]['n'],
        'failed' => array_sum(array_column($runs, 'failed')) + array_sum(array_column($runs, 'non2xx')),
        'keepalive' => array_sum(array_column($runs, 'keepalive')),
        'conns_peak' => $row['conns'] ? max(array_column($runs, 'conns_peak')) : null,
        'daemon_cpu_us' => $perReq($ticks($row['daemon'])),
        'daemon_rss_mb' => $row['daemon'] ? max(array_column($runs, 'daemon_rss_kb')) / 1024 : null,
        'daemon_anon_mb' => $row['daemon'] ? max(array_column($runs, 'daemon_anon_kb')) / 1024 : null,
        'db_cpu_us' => $perReq($ticks($row['db'])),
        'web_cpu_us' => $perReq($ticks('web')),
    ];
}

/** ratio returns the median over rounds of req/s of $a over req/s of $b (runs of one setting, paired by round). */
function ratio(array $a, array $b): float
{
    $byRound = array_column($b, 'rps', 'round');
    $r = [];
    foreach ($a as $m) {
        if (isset($byRound[$m['round']]) && $byRound[$m['round']] > 0) {
            $r[] = $m['rps'] / $byRound[$m['round']];
        }
    }
    return $r ? median($r) : NAN;
}

/**
 * best_of returns the key of the fastest of $keys in one setting's runs: first by median req/s, then, if another
 * of them is faster than that one by the median of the per-round ratios, that one, so that no row measured against
 * the result shows a ratio above 1 to it because the two orders disagree. Null when none of $keys was measured.
 */
function best_of(array $keys, array $byRow): ?string
{
    $keys = array_values(array_filter($keys, static fn ($k) => isset($byRow[$k])));
    if (!$keys) {
        return null;
    }
    usort($keys, static fn ($a, $b) => median(array_column($byRow[$b], 'rps')) <=> median(array_column($byRow[$a], 'rps')));
    $best = $keys[0];
    $top = 1.0;
    foreach ($keys as $k) {
        $r = ratio($byRow[$k], $byRow[$keys[0]]);
        if ($r > $top) {
            [$best, $top] = [$k, $r];
        }
    }
    return $best;
}

function fmt(?float $v, int $dec = 1): string
{
    return $v === null || is_nan($v) ? '-' : number_format($v, $dec, '.', ',');
}

function report(array $argv): int
{
    $json = null;
    $files = [];
    for ($i = 0; $i < count($argv); $i++) {
        if ($argv[$i] === '--json' && isset($argv[$i + 1])) {
            $json = $argv[++$i];
        } else {
            $files[] = $argv[$i];
        }
    }
    $files ?: fail('report: no phase files');
    $spec = require ROWS_FILE;
    $rowsByKey = array_column($spec['rows'], null, 'key');
    $clk = (int) env('CLK_TCK', '100');
    $pool = (int) env('BENCH_WEB_POOL', '4');

    $phases = [];
    foreach ($files as $f) {
        $p = json_decode((string) file_get_contents($f), true) ?? fail("report: cannot read $f");
        $phases[$p['server']] = $p;
    }
    $quick = (bool) array_filter(array_column($phases, 'quick'));

    // Summaries and ratios to the best baseline of each group.
    $out = ['quick' => $quick, 'groups' => $spec['groups'], 'group_settings' => $spec['group_settings'] ?? [], 'rows' => [],
        'servers' => [], 'targets' => []];
    foreach ($spec['rows'] as $row) {
        $out['rows'][$row['key']] = array_intersect_key($row, array_flip(['key', 'group', 'label', 'role']));
    }
    foreach ($phases as $server => $p) {
        $srv = ['settings' => $p['settings'], 'rounds' => $p['rounds'], 'seconds' => $p['seconds'], 'workers' => $p['workers'],
            'wall_s' => $p['wall_s'], 'foreign_cpu_pct' => $p['foreign_cpu_pct'], 'failures' => $p['failures'], 'cells' => [],
            'probes' => $p['probes'] ?? []];
        foreach ($p['runs'] as $sk => $byRow) {
            $cells = [];
            foreach ($byRow as $key => $runs) {
                $cells[$key] = summarize($rowsByKey[$key], $runs, $clk);
            }
            foreach ($cells as $key => &$cell) {
                $group = $rowsByKey[$key]['group'];
                $of = static fn (string $role) => array_filter(array_keys($cells), static fn ($k) => $rowsByKey[$k]['group'] === $group && $rowsByKey[$k]['role'] === $role);
                // A group without baselines (Cassandra, Bigtable) is measured against its reference, the Go service.
                $best = best_of($of('baseline'), $byRow) ?? best_of($of('reference'), $byRow);
                $cell['best_baseline'] = $best;
                $cell['ratio'] = $best === null ? null : ratio($byRow[$key], $byRow[$best]);
            }
            unset($cell);
            $srv['cells'][$sk] = $cells;
        }
        $out['servers'][$server] = $srv;
    }

    // Targets, per server and setting.
    foreach ($spec['targets'] as $t) {
        $res = ['label' => $t['label'], 'min' => $t['min'], 'max_conns' => !empty($t['max_conns']), 'results' => []];
        foreach ($phases as $server => $p) {
            if (isset($t['servers']) && !in_array($server, $t['servers'], true)) {
                continue;
            }
            foreach ($p['runs'] as $sk => $byRow) {
                if (!isset($byRow[$t['row']])) {
                    continue;
                }
                $vs = best_of($t['vs'], $byRow);
                if ($vs === null) {
                    continue;
                }
                $r = ratio($byRow[$t['row']], $byRow[$vs]);
                $conns = $out['servers'][$server]['cells'][$sk][$t['row']]['conns_peak'];
                $met = $r >= $t['min'] && (!$res['max_conns'] || ($conns !== null && $conns <= $pool));
                $res['results'][$server][$sk] = ['ratio' => $r, 'vs' => $vs, 'conns' => $conns, 'met' => $met];
            }
        }
        $out['targets'][] = $res;
    }
    $out['probes'] = array_map(static fn ($p) => ['label' => $p['label'], 'rows' => $p['rows']], $spec['probes'] ?? []);
    foreach ($spec['probe_targets'] ?? [] as $t) {
        $res = ['label' => $t['label'], 'kind' => $t['kind'], 'max' => $t['max'], 'results' => []];
        foreach ($out['servers'] as $server => $srv) {
            $c = probe_target($t, $srv['probes']);
            if ($c !== null) {
                $res['results'][$server] = $c;
            }
        }
        $out['probe_targets'][] = $res;
    }
    if ($json !== null) {
        file_put_contents($json, json_encode($out, JSON_PRETTY_PRINT | JSON_PARTIAL_OUTPUT_ON_ERROR) . "\n");
    }
    print_report($out, $phases, $pool);
    return 0;
}

/**
 * probe_target judges one probe target (rows.php 'probe_targets') on one server's probes, from the probe that holds
 * all the rows it names (for a hop: row, held and ping, measured in the same interleaved requests). Null when no
 * probe did.
 *   fresh  ratio = fresh mean / steady mean of row (num_us, den_us); for the diagnosis also paused_ratio, over the
 *          mean of the long-lived workers' reads after the same pause (paused_us)
 *   hop    hop_us = steady mean of row (read_us) - mean database time of held, its X-Db-Us (held_us);
 *          ping_us = steady mean of ping; ratio = hop_us / ping_us. Where the hop goes, when tetherd said how long
 *          it took (X-Server-Us, server_us): in tetherd beyond the held client's call (tetherd_us = server_us -
 *          held_us: its dispatch, its own client's call against the held one's, the reply's encoding) and on the
 *          way (way_us = read_us - server_us: the PHP client's encoding and decoding, the socket both ways, the
 *          wake-ups)
 * met: ratio <= max.
 */
function probe_target(array $t, array $probes): ?array
{
    $need = $t['kind'] === 'hop' ? [$t['row'], $t['held'], $t['ping']] : [$t['row']];
    $probe = null;
    foreach ($probes as $pr) {
        if (!array_diff($need, array_keys($pr))) {
            $probe = $pr;
        }
    }
    if ($probe === null) {
        return null;
    }
    if ($t['kind'] === 'fresh') {
        $num = $probe[$t['row']]['fresh']['mean_us'] ?? null;
        $den = $probe[$t['row']]['steady']['mean_us'] ?? null;
        if ($num === null || !$den) {
            return null;
        }
        $paused = $probe[$t['row']]['paused']['mean_us'] ?? null;
        return ['ratio' => $num / $den, 'num_us' => $num, 'den_us' => $den, 'paused_us' => $paused,
            'paused_ratio' => $paused ? $num / $paused : null, 'met' => $num / $den <= $t['max']];
    }
    if ($t['kind'] !== 'hop') {
        fail("probe target {$t['label']}: unknown kind {$t['kind']}");
    }
    $read = $probe[$t['row']]['steady']['mean_us'] ?? null;
    $held = $probe[$t['held']]['steady']['db_us'] ?? null;
    $ping = $probe[$t['ping']]['steady']['mean_us'] ?? null;
    if ($read === null || $held === null || !$ping) {
        return null;
    }
    $hop = $read - $held;
    $server = $probe[$t['row']]['steady']['server_us'] ?? null;
    return ['ratio' => $hop / $ping, 'read_us' => $read, 'held_us' => $held, 'hop_us' => $hop, 'ping_us' => $ping,
        'server_us' => $server, 'tetherd_us' => $server === null ? null : $server - $held,
        'way_us' => $server === null ? null : $read - $server, 'met' => $hop / $ping <= $t['max']];
}

function print_report(array $out, array $phases, int $pool): void
{
    $serverName = ['apache' => 'apache2 prefork + mod_php', 'nginx' => 'nginx + php-fpm'];
    $facts = machine_facts();
    echo "### Web servers (bench/web)\n\n";
    printf("Run on %s with `%s`%s.\n", env('BENCH_WEB_DATE', date('r')), env('BENCH_WEB_CMD', 'bash bench/web/run.sh'),
        $out['quick'] ? ' (QUICK MODE: too few requests to quote)' : '');
    printf("Machine: %s.\n", $facts['machine']);
    printf("Software: %s.\n", $facts['software']);
    printf("PHP workers: %s. Pools of tetherd, pgbouncer and the Go service: %d connections each.\n",
        env('BENCH_WEB_WORKERS', '?'), $pool);
    printf("Load average (1 min) before the run: %s, after: %s.\n", env('BENCH_WEB_LOAD_BEFORE', '?'), env('BENCH_WEB_LOAD_AFTER', '?'));
    foreach ($out['servers'] as $server => $srv) {
        printf("%s: %d round%s, each run sized to about %.1f s, %.0f s in all; other processes used about %.0f%% of the machine's CPU meanwhile%s.\n",
            $serverName[$server] ?? $server, $srv['rounds'], $srv['rounds'] === 1 ? '' : 's', $srv['seconds'], $srv['wall_s'], $srv['foreign_cpu_pct'],
            $srv['foreign_cpu_pct'] > 10 ? ' (**a busy machine: the numbers are skewed**)' : '');
    }
    echo "\n![req/s per row, median and spread over the rounds](img/web-bench-rps.png)\n\n";
    echo "![latency per row: p50 and p99](img/web-bench-latency.png)\n\n";

    echo "#### Targets\n\n";
    echo "Each cell: the row's req/s over that of the row it is compared with (the fastest of them when there are several, "
        . "as for pgbouncer, or mysqli p: and PDO persistent), the median of the per-round ratios: both rows are measured in "
        . "the same round and load setting, within about half a minute of each other.\n\n";
    $setLabels = [];
    foreach ($out['servers'] as $srv) {
        foreach ($srv['settings'] as $sk => $s) {
            $setLabels[$sk] = $s['label'];
        }
    }
    echo '| target | server | ' . implode(' | ', $setLabels) . " |\n";
    echo '|---|---|' . str_repeat('---:|', count($setLabels)) . "\n";
    foreach ($out['targets'] as $t) {
        foreach ($t['results'] as $server => $bySet) {
            $cells = [];
            foreach (array_keys($setLabels) as $sk) {
                $c = $bySet[$sk] ?? null;
                // Three decimals where two would round a miss up to the target (1.2996 is not 1.30).
                $dec = $c !== null && !$c['met'] && round($c['ratio'], 2) >= $t['min'] ? 3 : 2;
                $cells[] = $c === null ? '-' : sprintf('%s%s %s', fmt($c['ratio'], $dec),
                    $t['max_conns'] ? sprintf(', %s conns', $c['conns'] ?? '?') : '', $c['met'] ? 'met' : '**not met**');
            }
            printf("| %s%s | %s | %s |\n", $t['label'], $t['max_conns'] ? " (and <= $pool backend conns)" : '',
                $serverName[$server] ?? $server, implode(' | ', $cells));
        }
    }
    echo "\n";
    print_probe_targets($out, $serverName);
    print_probes($out, $serverName);

    echo "#### Results\n\n";
    echo "req/s: median over the rounds, and its spread (slowest and fastest round). \"x best baseline\": the row's req/s over that of the "
        . "fastest baseline row of its group (the remedies in use today; the Go service is a reference, never the baseline, "
        . "except in the Cassandra and Bigtable groups, which have no baseline: there it is the yardstick), "
        . "median of the per-round ratios. Latency (ms) from ab: mean (its \"Time per request\"), p50 and p99 (its percentiles), "
        . "medians over the rounds. Backend conns: the most connections the row's database user held at once "
        . "(sampled every 50 ms; on MariaDB also from Max_used_connections after FLUSH STATUS). "
        . "CPU per request, over all the row's runs (utime+stime from /proc, children included): the daemon between PHP and "
        . "the database (tetherd, pgbouncer or the Go service), the database, and the web server with its PHP workers. "
        . "Daemon RSS: at peak, all of it and (after the slash) its private part; the rest is mostly its binary, mapped.\n\n";
    // A group measured in only some settings (rows.php group_settings) is missing from the others' tables: say so.
    $only = [];
    foreach ($out['group_settings'] as $g => $sks) {
        $only[implode(' and ', array_map(static fn ($sk) => '`ab ' . ($setLabels[$sk] ?? $sk) . '`', $sks))][] = $out['groups'][$g];
    }
    foreach ($only as $sets => $groups) {
        printf("Measured only with %s, to keep the run short: %s.\n\n", $sets, implode('; ', $groups));
    }
    foreach ($out['servers'] as $server => $srv) {
        foreach ($srv['cells'] as $sk => $cells) {
            printf("##### %s, `ab %s`\n\n", $serverName[$server] ?? $server, $srv['settings'][$sk]['label']);
            echo "| row | req/s | spread | x best baseline | mean ms | p50 ms | p99 ms | backend conns | daemon CPU us/req | daemon RSS MB | DB CPU us/req | web+PHP CPU us/req |\n";
            echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
            $group = null;
            foreach ($out['rows'] as $key => $row) {
                if (!isset($cells[$key])) {
                    continue;
                }
                $c = $cells[$key];
                if ($row['group'] !== $group) {
                    $group = $row['group'];
                    printf("| *%s* |||||||||||| \n", $out['groups'][$group]);
                }
                $label = $row['role'] === 'tether' ? "**{$row['label']}**" : $row['label'];
                if ($row['role'] === 'reference') {
                    $label .= ' (reference)';
                }
                if ($c['failed']) {
                    $label .= " (**{$c['failed']} failed requests**)";
                }
                printf("| %s | %s | %s..%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    $label, fmt($c['rps'], 0), fmt($c['rps_min'], 0), fmt($c['rps_max'], 0),
                    $c['best_baseline'] === $key ? ($row['role'] === 'reference' ? '1.00 (yardstick)' : '1.00 (best)') : fmt($c['ratio'], 2),
                    fmt($c['mean_ms'], 2), fmt($c['p50_ms'], 2), fmt($c['p99_ms'], 2),
                    $c['conns_peak'] ?? '-', fmt($c['daemon_cpu_us']),
                    $c['daemon_rss_mb'] === null ? '-' : fmt($c['daemon_rss_mb']) . ' / ' . fmt($c['daemon_anon_mb']),
                    fmt($c['db_cpu_us']), fmt($c['web_cpu_us']));
            }
            echo "\n";
        }
    }
    $fails = array_merge(...array_values(array_column($out['servers'], 'failures')));
    if ($fails) {
        echo "Runs with failed requests:\n\n";
        foreach ($fails as $f) {
            echo "- $f\n";
        }
        echo "\n";
    }
}

/**
 * print_probe_targets prints the targets judged on the probes (probe_target): the hop's own cost of each Tether
 * read, in pings, and a fresh worker's first read over the steady one.
 */
function print_probe_targets(array $out, array $serverName): void
{
    $byKind = [];
    foreach ($out['probe_targets'] ?? [] as $t) {
        if ($t['results']) {
            $byKind[$t['kind'] ?? 'fresh'][] = $t;
        }
    }
    if (isset($byKind['hop'])) {
        echo "The hop's own cost (from the probes below, steady means inside the page): a Tether read less the same read by "
            . "a client held in a process (the Go service's own database call, from its Server-Timing header, made with the "
            . "Go library tetherd uses for that backend), in Tether pings timed the same way in the same probe (the PHP "
            . "client's ping). The hop is what Tether adds to the backend call: the PHP client's encoding and decoding, the "
            . "round trip over the Unix socket, tetherd's dispatch and its encoding of the reply. Where it goes: tetherd's "
            . "own time for the read (from reading the request to its reply, as its reply says: Client::lastServerMicros()) "
            . "less the held client's call is spent in tetherd; the Tether read less tetherd's time is the way, in PHP and "
            . "on the socket.\n\n";
        echo "| target | server | hop / ping | hop, us | Tether read, us | held client's read, us | ping, us | hop in tetherd, us | hop on the way (PHP client, socket), us |\n";
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
        foreach ($byKind['hop'] as $t) {
            foreach ($t['results'] as $server => $c) {
                // Three decimals where two would round a miss down to the target (2.004 is not 2.00).
                printf("| %s | %s | %s %s | %s | %s | %s | %s | %s | %s |\n", $t['label'], $serverName[$server] ?? $server,
                    fmt($c['ratio'], !$c['met'] && round($c['ratio'], 2) <= $t['max'] ? 3 : 2), $c['met'] ? 'met' : '**not met**', fmt($c['hop_us'], 0), fmt($c['read_us'], 0),
                    fmt($c['held_us'], 0), fmt($c['ping_us'], 0), fmt($c['tetherd_us'] ?? null, 0), fmt($c['way_us'] ?? null, 0));
            }
        }
        echo "\n";
    }
    if (isset($byKind['fresh'])) {
        echo "A fresh worker's first read (from the probes below): the mean first read of fresh workers over the steady "
            . "mean, and the two means. For the diagnosis, the same first read over the mean read of long-lived workers "
            . "asked after the same 50 ms pause as the fresh ones (every process involved idle before the request, as "
            . "before a fresh worker's first read): what is left is the fresh worker's own cost (its classes, its new "
            . "socket).\n\n";
        echo "| target | server | ratio | means, us | for the diagnosis: first / steady read after the same pause | means, us |\n";
        echo "|---|---|---:|---:|---:|---:|\n";
        foreach ($byKind['fresh'] as $t) {
            foreach ($t['results'] as $server => $c) {
                printf("| %s | %s | %s %s | %s / %s | %s | %s |\n", $t['label'], $serverName[$server] ?? $server, fmt($c['ratio'], 2),
                    $c['met'] ? 'met' : '**not met**', fmt($c['num_us'], 0), fmt($c['den_us'], 0), fmt($c['paused_ratio'] ?? null, 2),
                    ($c['paused_us'] ?? null) === null ? '-' : fmt($c['num_us'], 0) . ' / ' . fmt($c['paused_us'], 0));
            }
        }
        echo "\n";
    }
}

/**
 * print_probes prints the read-latency probes: per server, each probed row's read time inside the page in its
 * long-lived workers and in fresh ones.
 */
function print_probes(array $out, array $serverName): void
{
    $any = false;
    foreach ($out['servers'] as $srv) {
        $any = $any || !empty($srv['probes']);
    }
    if (!$any) {
        return;
    }
    echo "#### Read latency inside the page (seeds E1, E2)\n\n";
    echo "![read time inside the page: long-lived and fresh workers](img/web-bench-reads.png)\n\n";
    echo "One request at a time, the rows in turn, random ids; each page times its own data access with hrtime, from "
        . "getting the client to holding the decoded row, and sends the time in a header (pages/lib.php, timed()). "
        . "**Steady**: the server's long-lived workers, over one keep-alive connection; a worker's first read of a page in "
        . "the probe is left out. **Fresh worker**: the same pages at a copy of the server whose workers each serve one "
        . "request (php-fpm pool with pm.max_requests = 1; apache2 with MaxConnectionsPerChild 1, a new connection per "
        . "request, 50 ms apart); every answer came from a different worker, so every read is the first of its worker: it "
        . "opens the worker's socket to tetherd or its keep-alive connection to the Go service. The page then reads once "
        . "more, timed apart (\"then a second read\": the same read with the connection open, in the same young process). "
        . "**Steady after a pause**: as many reads from the long-lived workers, each request after the same 50 ms pause "
        . "(every process involved idle before it, as before a fresh worker's first read). "
        . "Go service db: the time of its database call, from its Server-Timing header: the same read by a client held in "
        . "a process. tetherd: its own time for the read, from its reply (Client::lastServerMicros()). Tether ping: the PHP client's ping, timed the same way in the same probe (the unit of the hop "
        . "targets above). Page: the whole request as curl saw it.\n\n";
    foreach ($out['servers'] as $server => $srv) {
        foreach ($srv['probes'] as $pk => $rows) {
            printf("##### %s: %s\n\n", $serverName[$server] ?? $server, $out['probes'][$pk]['label'] ?? $pk);
            echo "| row | steady reads | mean us | p50 us | p99 us | of which Go service db, us | of which tetherd, us | page ms | steady after a 50 ms pause, mean us | fresh-worker first reads | mean us | p50 us | p99 us | first / steady (means) | then a second read, mean us |\n";
            echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
            foreach ($rows as $key => $r) {
                $row = $out['rows'][$key];
                $st = $r['steady'];
                $fr = $r['fresh'] ?? null;
                printf("| %s | %d%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    ($row['role'] === 'tether' ? "**{$row['label']}**" : $row['label']) . ', ' . strtok($out['groups'][$row['group']], ':'),
                    $st['n'], $st['left_out'] ? " ({$st['left_out']} first reads left out)" : '',
                    fmt($st['mean_us'], 0), fmt($st['p50_us'], 0), fmt($st['p99_us'], 0), fmt($st['db_us'], 0), fmt($st['server_us'] ?? null, 0), fmt($st['page_ms'], 2), fmt($r['paused']['mean_us'] ?? null, 0),
                    $fr === null ? '-' : $fr['n'], fmt($fr['mean_us'] ?? null, 0), fmt($fr['p50_us'] ?? null, 0), fmt($fr['p99_us'] ?? null, 0),
                    $fr === null || !$st['mean_us'] || $fr['mean_us'] === null ? '-' : fmt($fr['mean_us'] / $st['mean_us'], 2),
                    fmt($fr['second_mean_us'] ?? null, 0));
            }
            echo "\n";
        }
    }
}

/** machine_facts describes the machine and the versions of everything measured. */
function machine_facts(): array
{
    $first = static fn (string $cmd): string => trim(strtok((string) shell_exec("$cmd 2>&1"), "\n") ?: '?');
    $cpu = preg_match('/^model name\s*:\s*(.+)$/m', (string) file_get_contents('/proc/cpuinfo'), $m) ? $m[1] : '?';
    $mem = preg_match('/^MemTotal:\s+(\d+)/m', (string) file_get_contents('/proc/meminfo'), $m2) ? sprintf('%.1f GiB', $m2[1] / 1048576) : '?';
    return [
        'machine' => sprintf('%s vCPU (%s), %s RAM, Linux %s', trim((string) shell_exec('nproc')), $cpu, $mem, php_uname('r')),
        'software' => implode(', ', [
            'PHP ' . PHP_VERSION . ' (' . preg_replace('/^PHP (\S+) \((\S+)\).*/', '$2 $1', $first('php-fpm8.2 -v')) . ', mod_php)',
            preg_replace('/^Server version: /', '', $first('apache2 -v')),
            preg_replace('/^nginx version: /', '', $first('nginx -v')),
            'MariaDB ' . env('BENCH_WEB_MARIADB_VERSION', '?'),
            'PostgreSQL ' . env('BENCH_WEB_PG_VERSION', '?'),
            'Cassandra ' . env('BENCH_WEB_CASSANDRA_VERSION', '?'),
            'the Go Bigtable emulator (cloud.google.com/go/bigtable ' . env('BENCH_WEB_BIGTABLE_VERSION', '?') . ')',
            $first('pgbouncer --version'),
            preg_replace('/^go version (\S+).*/', '$1', $first('go version')),
            preg_replace('/^This is ApacheBench, Version (\S+).*/', 'ab $1', $first('ab -V')),
        ]),
    ];
}

// ---------------------------------------------------------------------------------------------------------------

$cmd = $argv[1] ?? '';
exit(match ($cmd) {
    'phase' => phase(array_slice($argv, 2)),
    'report' => report(array_slice($argv, 2)),
    default => fail("usage: bench.php phase|report ... (see its header)"),
});
