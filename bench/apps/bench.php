<?php

declare(strict_types=1);

/*
 * bench/apps/bench.php: the driver of the application page benchmark. Run it through bench/apps/run.sh, which
 * starts the servers and passes their coordinates (config.php, PIDs) in the environment.
 *
 *   php bench.php phase --server NAME --url URL --web-pids "PID..." --workers N --out FILE
 *                       [--quick] [--rounds N] [--seconds S] [--only KEY,...] [--settings KEY,...]
 *   php bench.php report --json FILE PHASE_FILE...
 *
 * phase, against one running web server:
 *  1. check    GET every row's page twice (with ?bench_queries=1, which makes the page say in an HTML comment how
 *              many queries the framework ran); the WordPress front page must list the 10 newest posts and not the
 *              11th, the Laravel page must be exactly the 20 newest posts with their authors as the database has
 *              them. Around each check, the statements of every app's database user are read (MariaDB's
 *              USER_STATISTICS): the row's own user must have sent some, the other app users none, so that a
 *              page that reached the database another way than the row says fails.
 *  2. warm-up  (not in --quick) per row, ab -c 100 through the workers (OPcache, persistent connections); then
 *              per row a calibration run at -c 10 with and without -k, whose req/s sizes the measured runs (ab -n N
 *              with N = req/s x --seconds, at least 5 x -c).
 *  3. rounds   in each round every load setting, and in it every row, gets one measured ab run (rows in reverse
 *              order every other round, settings rotated), so that a noisy minute on the shared host hits all rows
 *              of a comparison alike. Around each run: CPU of tetherd, MariaDB and the web server (/proc), the
 *              row's database user's statements and connections opened (USER_STATISTICS deltas), and its
 *              connections open at once (SHOW PROCESSLIST every 50 ms, and Max_used_connections after FLUSH
 *              STATUS). Any failed or non-2xx request fails the run.
 * It writes everything it measured to --out as JSON.
 *
 * report merges the phase files and prints the markdown section of docs/benchmarks.md on stdout (and the merged
 * results, with medians and ratios, to --json).
 *
 * Environment (set by run.sh): BENCH_APPS_CONFIG (the pages' config.php), TETHERD_PID, MARIADB_PID, CLK_TCK; for
 * report also BENCH_APPS_CMD, BENCH_APPS_DATE, BENCH_APPS_LOAD_BEFORE/AFTER, BENCH_APPS_WORKERS, BENCH_APPS_POOL,
 * BENCH_APPS_MARIADB_VERSION.
 */

require_once __DIR__ . '/../lib/proc.php';

const SAMPLE_EVERY_US = 50000;
const QUICK_REQUESTS = 200; // per row and load setting
const WP_POSTS = 40; // setup-wordpress.php's generated posts
const WP_PER_PAGE = 10; // WordPress's default posts_per_page
const LARAVEL_POSTS = 20;

const APPS = [
    'wordpress' => 'WordPress 6.1 front page',
    'laravel' => 'Laravel 8.83 page: 20 Eloquent posts with their author',
];

/**
 * The rows: one page each, per app a native one (role native: the row the others are compared with), and the one
 * through Tether. user: the database user (config.php 'users' key) whose statements and connections are the row's.
 */
const ROWS = [
    ['key' => 'wp-native', 'app' => 'wordpress', 'label' => "native: WordPress's wpdb (mysqli, connect per request)", 'page' => 'wp-native/',
        'user' => 'wp_native', 'role' => 'native'],
    ['key' => 'wp-tether', 'app' => 'wordpress', 'label' => 'Tether: db.php drop-in (its default: a socket per request)', 'page' => 'wp-tether/',
        'user' => 'tetherd', 'role' => 'tether'],
    ['key' => 'wp-tether-persistent', 'app' => 'wordpress', 'label' => 'Tether: db.php drop-in, TETHER_PERSISTENT', 'page' => 'wp-tether-persistent/',
        'user' => 'tetherd', 'role' => 'tether'],
    ['key' => 'wp-tether-cached', 'app' => 'wordpress', 'label' => 'Tether: db.php drop-in, TETHER_CACHE_TTL 5000 (result cache)', 'page' => 'wp-tether-cached/',
        'user' => 'tetherd', 'role' => 'tether', 'cached' => true],
    ['key' => 'wp-tether-local', 'app' => 'wordpress', 'label' => 'Tether: db.php drop-in, TETHER_CACHE_TTL 5000 and TETHER_LOCAL_CACHE (hits in APCu)', 'page' => 'wp-tether-local/',
        'user' => 'tetherd', 'role' => 'tether', 'cached' => true],
    ['key' => 'lv-native', 'app' => 'laravel', 'label' => 'native: PDO mysql, not persistent (Laravel default)', 'page' => 'laravel-native.php',
        'user' => 'lv_native', 'role' => 'native'],
    ['key' => 'lv-persistent', 'app' => 'laravel', 'label' => 'PDO mysql, PDO::ATTR_PERSISTENT', 'page' => 'laravel-persistent.php',
        'user' => 'lv_persistent', 'role' => 'other'],
    ['key' => 'lv-tether', 'app' => 'laravel', 'label' => 'Tether: tether driver', 'page' => 'laravel-tether.php',
        'user' => 'tetherd', 'role' => 'tether'],
];

const SETTINGS = [
    'c10' => ['c' => 10, 'k' => false, 'label' => '-c 10'],
    'c10k' => ['c' => 10, 'k' => true, 'label' => '-c 10 -k'],
    'c100' => ['c' => 100, 'k' => false, 'label' => '-c 100'],
];

const SERVER_NAMES = ['apache' => 'apache2 prefork + mod_php', 'nginx' => 'nginx + php-fpm'];

function fail(string $msg): never
{
    fwrite(STDERR, "==> ERROR: bench/apps/bench.php: $msg\n");
    exit(1);
}

function env(string $name, ?string $default = null): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        return $default ?? fail("environment variable $name is required (run bench/apps/run.sh)");
    }
    return $v;
}

// ---------------------------------------------------------------------------------------------------------------
// The run: configuration, MariaDB's counters, CPU

final class Run
{
    public array $cfg;
    public mysqli $my;
    /** @var array<string, int> tetherd, mariadb => pid */
    public array $pids;
    /** @var list<int> */
    public array $webPids;

    public function __construct(array $webPids)
    {
        $this->cfg = require env('BENCH_APPS_CONFIG');
        $this->pids = ['tetherd' => (int) env('TETHERD_PID'), 'mariadb' => (int) env('MARIADB_PID')];
        $this->webPids = $webPids;
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $this->my = new mysqli('localhost', 'root', '', $this->cfg['db_name'], 0, $this->cfg['mysql_socket']);
        $this->my->set_charset('utf8mb4');
    }

    /** user returns the database user name of a row. */
    public function user(array $row): string
    {
        return $this->cfg['users'][$row['user']] ?? fail("row {$row['key']}: no user '{$row['user']}' in config.php");
    }

    /** conns returns the connections open now per database user (SHOW PROCESSLIST). @return array<string, int> */
    public function conns(): array
    {
        $out = [];
        foreach ($this->my->query('SHOW PROCESSLIST')->fetch_all(MYSQLI_ASSOC) as $p) {
            $out[$p['User']] = ($out[$p['User']] ?? 0) + 1;
        }
        return $out;
    }

    /**
     * userStats returns per database user the statements it has sent (SELECT + UPDATE + OTHER commands) and the
     * connections it has opened, from information_schema.USER_STATISTICS (MariaDB's userstat).
     *
     * @return array<string, array{statements: int, selects: int, connections: int}>
     */
    public function userStats(): array
    {
        $out = [];
        $r = $this->my->query('SELECT USER, SELECT_COMMANDS, UPDATE_COMMANDS, OTHER_COMMANDS, TOTAL_CONNECTIONS FROM information_schema.USER_STATISTICS');
        foreach ($r->fetch_all() as [$user, $sel, $upd, $other, $conns]) {
            $out[$user] = ['statements' => (int) $sel + (int) $upd + (int) $other, 'selects' => (int) $sel, 'connections' => (int) $conns];
        }
        return $out;
    }

    /** maxUsedConnections returns MariaDB's Max_used_connections (since start or the last FLUSH STATUS). */
    public function maxUsedConnections(): int
    {
        return (int) $this->my->query("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")->fetch_row()[1];
    }

    /** cpu reads the CPU ticks of every process involved. @return array<string, int> */
    public function cpu(): array
    {
        $out = ['machine' => machine_busy_ticks(), 'web' => 0];
        foreach ($this->webPids as $pid) {
            $out['web'] += tree_cpu_ticks($pid);
        }
        foreach ($this->pids as $svc => $pid) {
            $out[$svc] = tree_cpu_ticks($pid);
        }
        return $out;
    }
}

/** stats_delta returns $after - $before for one user (zeros for a user not seen yet). */
function stats_delta(array $before, array $after, string $user): array
{
    $zero = ['statements' => 0, 'selects' => 0, 'connections' => 0];
    $b = $before[$user] ?? $zero;
    $a = $after[$user] ?? $zero;
    return ['statements' => $a['statements'] - $b['statements'], 'selects' => $a['selects'] - $b['selects'],
        'connections' => $a['connections'] - $b['connections']];
}

// ---------------------------------------------------------------------------------------------------------------
// ab

/**
 * run_ab runs ab against $url and returns what it reported: requests, failures, req/s, mean, p50/p99 (ms, from its
 * CSV percentiles). While ab runs, $sample() is called every 50 ms.
 */
function run_ab(string $url, int $n, int $c, bool $k, ?callable $sample = null): array
{
    $csv = tempnam(sys_get_temp_dir(), 'tether-apps-ab.');
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
    $get = static fn (string $re): ?string => preg_match($re, $out, $m) ? $m[1] : null;
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
        // ab counts a response of another length than the first as failed ("Length"): pages whose length varies
        // legitimately would show it; these pages do not vary.
        'failed' => (int) $get('/^Failed requests:\s+(\d+)/m'),
        'failed_detail' => trim((string) $get('/^Failed requests:.*\n(\s+\(.*\))$/m')),
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
// The checks

/** http_get fetches $url and returns [status, body]. */
function http_get(string $url): array
{
    $ch = curl_init($url);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 60]);
    $body = curl_exec($ch);
    $status = curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    return [$status, $body === false ? 'curl: ' . curl_error($ch) : $body];
}

/** wp_title returns the title of setup-wordpress.php's generated post $i. */
function wp_title(int $i): string
{
    return sprintf('Bench post %02d: notes on pooled connections', $i);
}

/**
 * laravel_expected returns the Laravel page's body as it must be: the 20 newest posts with their authors, read here
 * with one SQL join (not Eloquent), formatted as bootstrap.php does.
 */
function laravel_expected(Run $run): string
{
    $rows = $run->my->query('SELECT p.id, p.title, a.name, p.created_at FROM posts p JOIN authors a ON a.id = p.author_id
        ORDER BY p.created_at DESC LIMIT ' . LARAVEL_POSTS)->fetch_all(MYSQLI_ASSOC);
    $e = static fn (string $s): string => htmlspecialchars($s, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');
    $out = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Latest posts</title></head><body>\n<h1>Latest posts</h1>\n<ul>\n";
    foreach ($rows as $r) {
        $out .= sprintf("<li><a href=\"/posts/%d\">%s</a> by %s, %s</li>\n", $r['id'], $e($r['title']), $e($r['name']), substr($r['created_at'], 0, 16));
    }
    return $out . "</ul>\n</body></html>\n";
}

/**
 * check_page fetches a row's page once and fails unless it answers 200 with what it must, through the row's own
 * database user only. Returns the queries the framework says it ran, and the statements and connections the
 * row's user sent and opened for it.
 */
function check_page(Run $run, string $url, array $row): array
{
    $before = $run->userStats();
    [$status, $body] = http_get("$url/{$row['page']}?bench_queries=1");
    $after = $run->userStats();
    $show = static fn (string $why) => fail(sprintf("%s (%s) %s; it answered %s: %s", $row['page'], $row['key'], $why, $status,
        strlen($body) > 6000 ? substr($body, 0, 3000) . "\n[...]\n" . substr($body, -3000) : $body));
    if ($status !== 200) {
        $show('did not answer 200');
    }
    if (!preg_match('/<!-- bench-queries: (\d+) -->\n$/', $body, $m)) {
        $show('did not end with its query count');
    }
    $queries = (int) $m[1];
    $page = substr($body, 0, -strlen($m[0]));
    if ($row['app'] === 'wordpress') {
        foreach (range(WP_POSTS, WP_POSTS - WP_PER_PAGE + 1) as $i) {
            if (!str_contains($page, '>' . wp_title($i) . '<')) {
                $show('does not list the post "' . wp_title($i) . '"');
            }
        }
        if (str_contains($page, wp_title(WP_POSTS - WP_PER_PAGE))) {
            $show('lists "' . wp_title(WP_POSTS - WP_PER_PAGE) . '", which is not among the ' . WP_PER_PAGE . ' newest');
        }
        if (!str_contains($page, '</html>') || stripos($page, 'database error') !== false) {
            $show('is not a whole page without database errors');
        }
    } elseif ($page !== ($want = laravel_expected($run))) {
        $show("is not the 20 newest posts with their authors, which are:\n$want\n");
    }
    $own = stats_delta($before, $after, $run->user($row));
    // A row with the result cache may answer reads without the database, but never all of them in a page that
    // opens a transaction (WordPress's SQL_CALC_FOUND_ROWS query runs in one).
    if ($own['statements'] < (($row['cached'] ?? false) ? 1 : $queries)) {
        $show(sprintf('ran %d queries, but its database user %s sent %d statements', $queries, $run->user($row), $own['statements']));
    }
    foreach (array_unique(array_values($run->cfg['users'])) as $user) {
        $d = stats_delta($before, $after, $user);
        if ($user !== $run->user($row) && $d['statements'] !== 0) {
            $show("made database user $user (not the row's " . $run->user($row) . ") send {$d['statements']} statements");
        }
    }
    return ['queries' => $queries, 'statements' => $own['statements'], 'connections' => $own['connections']];
}

// ---------------------------------------------------------------------------------------------------------------
// The phase

/**
 * measure runs ab once for a row and load setting, and returns ab's figures plus what happened around it: CPU ticks
 * of every process, the row's user's statements and connections opened, and its connections open at once at peak.
 */
function measure(Run $run, string $url, array $row, array $set, int $n): array
{
    $user = $run->user($row);
    // Max_used_connections restarts from the connections open now; the row's peak is what it adds to the others.
    $run->my->query('FLUSH STATUS');
    $now = $run->conns();
    $others = array_sum($now) - ($now[$user] ?? 0);
    $peak = 0;
    $sample = static function () use ($run, $user, &$peak): void {
        $peak = max($peak, $run->conns()[$user] ?? 0);
    };
    $stats0 = $run->userStats();
    $cpu0 = $run->cpu();
    $ab = run_ab("$url/{$row['page']}", $n, $set['c'], $set['k'], $sample);
    $cpu1 = $run->cpu();
    $stats1 = $run->userStats();
    $peakSampled = $peak;
    $peak = max($peak, $run->maxUsedConnections() - $others);
    $cpu = [];
    foreach ($cpu1 as $k => $v) {
        $cpu[$k] = $v - $cpu0[$k];
    }
    return $ab + ['cpu_ticks' => $cpu, 'conns_peak' => $peak, 'conns_peak_sampled' => $peakSampled,
        'db' => stats_delta($stats0, $stats1, $user)];
}

function phase(array $argv): int
{
    $opt = ['server' => null, 'url' => null, 'web-pids' => null, 'workers' => null, 'out' => null, 'quick' => false,
        'rounds' => null, 'seconds' => 4.0, 'only' => null, 'settings' => null];
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
    $rows = ROWS;
    if ($opt['only'] !== null) {
        $only = explode(',', $opt['only']);
        $rows = array_values(array_filter($rows, static fn ($r) => in_array($r['key'], $only, true)));
        count($rows) === count($only) || fail('--only: unknown row in ' . $opt['only']);
    }
    $settings = SETTINGS;
    if ($opt['settings'] !== null) {
        $settings = array_intersect_key($settings, array_flip(explode(',', $opt['settings'])));
        $settings ?: fail('--settings: none of ' . $opt['settings']);
    }
    $run = new Run(array_map('intval', preg_split('/\s+/', trim($opt['web-pids']))));
    $url = rtrim($opt['url'], '/');
    $server = $opt['server'];
    $t0 = microtime(true);
    $cpu0 = $run->cpu();

    // 1. Every page answers what it should, through its own database user.
    $checks = [];
    foreach ($rows as $row) {
        // Twice: the first request of a page may do first-time work (WordPress fills its transients); the second's
        // counts are the page's own.
        check_page($run, $url, $row);
        $checks[$row['key']] = check_page($run, $url, $row);
        progress(sprintf('%s: %s answers as it should: %d queries, %d statements from %s, %d connections opened',
            $server, $row['key'], $checks[$row['key']]['queries'], $checks[$row['key']]['statements'], $run->user($row),
            $checks[$row['key']]['connections']));
    }

    // 2. Warm-up and calibration.
    $n = [];
    foreach ($rows as $row) {
        foreach ($settings as $sk => $set) {
            $n[$row['key']][$sk] = QUICK_REQUESTS;
        }
        if ($opt['quick']) {
            continue;
        }
        run_ab("$url/{$row['page']}", max(300, 2 * $workers), 100, false);
        // The page is CPU-bound from -c 10 on, so -c 100 runs are sized from the -c 10 calibration (with or without
        // keep-alive as theirs): a calibration at -c 100 would cost as long as a measured run.
        $calibrated = [];
        foreach ($settings as $sk => $set) {
            $rps = $calibrated[(int) $set['k']] ??= run_ab("$url/{$row['page']}", 100, min(10, $set['c']), $set['k'])['rps'];
            $n[$row['key']][$sk] = max(5 * $set['c'], 200, min(100000, (int) round($rps * $seconds, -1)));
        }
    }
    if (!$opt['quick']) {
        progress(sprintf('%s: warmed up and calibrated in %.0f s', $server, microtime(true) - $t0));
    }

    // 3. Rounds.
    $runs = [];
    $setKeys = array_keys($settings);
    for ($r = 0; $r < $rounds; $r++) {
        $tr = microtime(true);
        $order = $r % 2 ? array_reverse($rows) : $rows;
        $sets = array_merge(array_slice($setKeys, $r % count($setKeys)), array_slice($setKeys, 0, $r % count($setKeys)));
        foreach ($sets as $sk) {
            foreach ($order as $row) {
                $m = measure($run, $url, $row, $settings[$sk], $n[$row['key']][$sk]);
                $m['round'] = $r;
                $runs[$sk][$row['key']][] = $m;
                if ($m['failed'] || $m['non2xx'] || $m['complete'] !== $m['n']) {
                    fail(sprintf("%s %s %s: %d of %d complete, %d failed %s, %d non-2xx (see the web server's error log)", $server,
                        $settings[$sk]['label'], $row['key'], $m['complete'], $m['n'], $m['failed'], $m['failed_detail'], $m['non2xx']));
                }
            }
        }
        progress(sprintf('%s: round %d/%d done in %.0f s', $server, $r + 1, $rounds, microtime(true) - $tr));
    }

    $cpu1 = $run->cpu();
    $wall = microtime(true) - $t0;
    $ours = 0;
    foreach ($cpu1 as $k => $v) {
        $ours += $k === 'machine' ? 0 : $v - $cpu0[$k];
    }
    $driver = 0.0; // this process and ab, its children
    foreach ([0, 1] as $who) {
        $ru = getrusage($who);
        $driver += $ru['ru_utime.tv_sec'] + $ru['ru_utime.tv_usec'] / 1e6 + $ru['ru_stime.tv_sec'] + $ru['ru_stime.tv_usec'] / 1e6;
    }
    $foreign = max(0, ($cpu1['machine'] - $cpu0['machine']) / (int) env('CLK_TCK', '100') - $ours / (int) env('CLK_TCK', '100') - $driver);
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
        'checks' => $checks,
        'n' => $n,
        'runs' => $runs,
    ];
    file_put_contents($opt['out'], json_encode($result, JSON_PRETTY_PRINT) . "\n");
    progress(sprintf('%s: done in %.0f s', $server, $wall));
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The report

function median(array $v): ?float
{
    $v = array_values(array_filter($v, static fn ($x) => $x !== null));
    if (!$v) {
        return null;
    }
    sort($v);
    $n = count($v);
    return $n % 2 ? (float) $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
}

function fmt(?float $v, int $dec = 0): string
{
    return $v === null ? '-' : number_format($v, $dec);
}

/** ratio returns the median over rounds of a's req/s over b's in the same round. */
function ratio(array $a, array $b): ?float
{
    $byRound = array_column($b, 'rps', 'round');
    $r = [];
    foreach ($a as $m) {
        if (!empty($byRound[$m['round']])) {
            $r[] = $m['rps'] / $byRound[$m['round']];
        }
    }
    return median($r);
}

/** native_of returns the key of the native row of $app. */
function native_of(string $app): string
{
    foreach (ROWS as $row) {
        if ($row['app'] === $app && $row['role'] === 'native') {
            return $row['key'];
        }
    }
    fail("no native row for $app");
}

/** summarize returns the figures of one row in one setting over its rounds. */
function summarize(array $runs, int $clk): array
{
    $rps = array_column($runs, 'rps');
    $req = array_sum(array_column($runs, 'complete'));
    $ticks = static fn (string $k): float => array_sum(array_map(static fn ($m) => $m['cpu_ticks'][$k] ?? 0, $runs));
    $db = static fn (string $k): float => array_sum(array_map(static fn ($m) => $m['db'][$k], $runs));
    return [
        'rps' => median($rps), 'rps_min' => min($rps), 'rps_max' => max($rps),
        'mean_ms' => median(array_column($runs, 'mean_ms')), 'p50_ms' => median(array_column($runs, 'p50_ms')),
        'p99_ms' => median(array_column($runs, 'p99_ms')),
        'statements' => $db('statements') / $req, 'selects' => $db('selects') / $req, 'connects' => $db('connections') / $req,
        'conns_peak' => max(array_column($runs, 'conns_peak')),
        'tetherd_us' => $ticks('tetherd') / $clk * 1e6 / $req, 'mariadb_us' => $ticks('mariadb') / $clk * 1e6 / $req,
        'web_us' => $ticks('web') / $clk * 1e6 / $req,
        'requests' => $req,
    ];
}

/**
 * cpu_per_request returns the CPU (us) tetherd, MariaDB and the web server spent per request of a row, over all its
 * runs in all settings of a phase, or null when the row did not run. @return array{tetherd: float, mariadb: float, web: float}|null
 */
function cpu_per_request(array $phase, string $key, int $clk): ?array
{
    $ticks = ['tetherd' => 0, 'mariadb' => 0, 'web' => 0];
    $req = 0;
    foreach ($phase['runs'] as $byRow) {
        foreach ($byRow[$key] ?? [] as $m) {
            $req += $m['complete'];
            foreach ($ticks as $k => $v) {
                $ticks[$k] = $v + ($m['cpu_ticks'][$k] ?? 0);
            }
        }
    }
    return $req === 0 ? null : array_map(static fn ($t) => $t / $clk * 1e6 / $req, $ticks);
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
    $clk = (int) env('CLK_TCK', '100');
    $pool = (int) env('BENCH_APPS_POOL', '4');
    $rowsByKey = array_column(ROWS, null, 'key');
    $phases = [];
    foreach ($files as $f) {
        $p = json_decode((string) file_get_contents($f), true) ?? fail("report: cannot read $f");
        $phases[$p['server']] = $p;
    }
    $quick = (bool) array_filter(array_column($phases, 'quick'));

    // Cells: per server, setting and row; and the targets: Tether >= 1.0x native, backend conns <= the pool.
    $cells = [];
    $targets = [];
    foreach ($phases as $server => $p) {
        foreach ($p['runs'] as $sk => $byRow) {
            foreach ($byRow as $key => $runs) {
                $c = summarize($runs, $clk);
                $native = native_of($rowsByKey[$key]['app']);
                $c['x_native'] = isset($byRow[$native]) ? ratio($runs, $byRow[$native]) : null;
                $cells[$server][$sk][$key] = $c;
                if ($rowsByKey[$key]['role'] === 'tether' && $c['x_native'] !== null) {
                    $targets[$key][$server][$sk] = ['ratio' => $c['x_native'], 'conns' => $c['conns_peak'],
                        'met' => $c['x_native'] >= 1.0 && $c['conns_peak'] <= $pool];
                }
            }
        }
    }
    if ($json !== null) {
        file_put_contents($json, json_encode(['phases' => $phases, 'cells' => $cells, 'targets' => $targets], JSON_PRETTY_PRINT) . "\n");
    }

    $first = static fn (string $cmd): string => trim(strtok((string) shell_exec("$cmd 2>&1"), "\n") ?: '?');
    $cpu = preg_match('/^model name\s*:\s*(.+)$/m', (string) file_get_contents('/proc/cpuinfo'), $m) ? $m[1] : '?';
    $mem = preg_match('/^MemTotal:\s+(\d+)/m', (string) file_get_contents('/proc/meminfo'), $m2) ? sprintf('%.1f GiB', $m2[1] / 1048576) : '?';
    $wpVersion = preg_match("/\\\$wp_version = '([^']+)'/", (string) file_get_contents('/usr/share/wordpress/wp-includes/version.php'), $m3) ? $m3[1] : '?';
    $lvVersion = preg_match("/const VERSION = '([^']+)'/", (string) @file_get_contents('/usr/share/php/Illuminate/Foundation/Application.php'), $m4) ? $m4[1] : '?';
    $settingLabels = array_map(static fn ($s) => $s['label'], SETTINGS);

    echo "## Application pages: `bench/apps/run.sh`\n\n";
    echo "A WordPress front page and a Laravel (Eloquent) page, each served natively and through Tether, under both web "
        . "servers (issue 11). Both WordPress sites read the same tables (same prefix); only the connection differs: "
        . "WordPress's own wpdb on mysqli, or Tether's `db.php` drop-in (clients/php-wordpress). The Laravel page "
        . "(`Post::with('author')->latest()->limit(20)->get()` through Capsule\\Manager) runs on PDO's mysql driver, "
        . "as Laravel does by default (not persistent) and with `PDO::ATTR_PERSISTENT`, or on the `tether` driver "
        . "(clients/php-laravel). What they show: bench/apps/README.md.\n\n";
    printf("Run on %s with `%s`%s.\n", env('BENCH_APPS_DATE', date('r')), env('BENCH_APPS_CMD', 'bash bench/apps/run.sh'),
        $quick ? ' (QUICK MODE: too few requests to quote)' : '');
    printf("Machine: %s vCPU (%s), %s RAM, Linux %s.\n", trim((string) shell_exec('nproc')), $cpu, $mem, php_uname('r'));
    printf("Software: WordPress %s (Debian, theme twentytwentythree, %d posts), Illuminate\\Database %s (Debian), PHP %s (php-fpm, mod_php; OPcache on), %s, %s, MariaDB %s, %s.\n",
        $wpVersion, WP_POSTS + 1, $lvVersion, PHP_VERSION, preg_replace('/^Server version: /', '', $first('apache2 -v')),
        preg_replace('/^nginx version: /', '', $first('nginx -v')), env('BENCH_APPS_MARIADB_VERSION', '?'),
        preg_replace('/^This is ApacheBench, Version (\S+).*/', 'ab $1', $first('ab -V')));
    printf("PHP workers: %s. tetherd's pool: %d connections.\n", env('BENCH_APPS_WORKERS', '?'), $pool);
    printf("Load average (1 min) before the run: %s, after: %s.\n", env('BENCH_APPS_LOAD_BEFORE', '?'), env('BENCH_APPS_LOAD_AFTER', '?'));
    foreach ($phases as $server => $p) {
        printf("%s: %d round%s, each run sized to about %.0f s, %.0f s in all; other processes used about %.0f%% of the machine's CPU meanwhile%s.\n",
            SERVER_NAMES[$server] ?? $server, $p['rounds'], $p['rounds'] === 1 ? '' : 's', $p['seconds'], $p['wall_s'], $p['foreign_cpu_pct'],
            $p['foreign_cpu_pct'] > 10 ? ' (**a busy machine: the numbers are skewed**)' : '');
    }

    echo "\n### Targets\n\n";
    echo "Tether's req/s over the native page's (median of the per-round ratios, both measured in the same round and "
        . "setting), and the most backend connections tetherd held; target: >= 1.00x with at most the pool ($pool).\n\n";
    echo '| page | server | ' . implode(' | ', $settingLabels) . " |\n|---|---|" . str_repeat('---:|', count($settingLabels)) . "\n";
    foreach ($targets as $key => $byServer) {
        foreach ($byServer as $server => $bySet) {
            $out = [];
            foreach (array_keys(SETTINGS) as $sk) {
                $t = $bySet[$sk] ?? null;
                $out[] = $t === null ? '-' : sprintf('%s, %d conns %s', fmt($t['ratio'], round($t['ratio'], 2) >= 1.0 && $t['ratio'] < 1.0 ? 3 : 2),
                    $t['conns'], $t['met'] ? 'met' : '**not met**');
            }
            printf("| %s, %s | %s | %s |\n", APPS[$rowsByKey[$key]['app']], $rowsByKey[$key]['label'], SERVER_NAMES[$server] ?? $server, implode(' | ', $out));
        }
    }

    echo "\nBackend connections: the most each way in held at once, over all settings (`-c 100` sets it), per page and server.\n\n";
    $roles = ['native' => 'native (connect per request)', 'other' => 'PDO persistent', 'tether' => "Tether (pool $pool)"];
    echo '| page | server | ' . implode(' | ', $roles) . " |\n|---|---|" . str_repeat('---:|', count($roles)) . "\n";
    foreach (APPS as $app => $appLabel) {
        foreach ($cells as $server => $bySet) {
            $out = [];
            foreach (array_keys($roles) as $role) {
                $peaks = [];
                foreach (ROWS as $row) {
                    foreach ($bySet as $byRow) {
                        if ($row['app'] === $app && $row['role'] === $role && isset($byRow[$row['key']])) {
                            $peaks[] = $byRow[$row['key']]['conns_peak'];
                        }
                    }
                }
                $out[] = $peaks ? (string) max($peaks) : '-';
            }
            printf("| %s | %s | %s |\n", $appLabel, SERVER_NAMES[$server] ?? $server, implode(' | ', $out));
        }
    }

    echo "\nCPU per page, Tether against native: the CPU all three (tetherd, MariaDB, the web server with PHP) spent per "
        . "request, over every run of the row in all settings, and what Tether changes in each. On this machine the pages "
        . "are CPU-bound, so this difference is what sets the req/s ratio.\n\n";
    echo "| page | server | native, us/page | Tether, us/page | difference | tetherd | MariaDB | web+PHP |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
    foreach (APPS as $app => $appLabel) {
        foreach ($phases as $server => $p) {
            $native = cpu_per_request($p, native_of($app), $clk);
            foreach (ROWS as $row) {
                if ($row['app'] !== $app || $row['role'] !== 'tether' || $native === null || ($t = cpu_per_request($p, $row['key'], $clk)) === null) {
                    continue;
                }
                $sum = static fn (array $c): float => array_sum($c);
                $signed = static fn (float $v): string => ($v >= 0 ? '+' : '-') . number_format(abs($v));
                $d = static fn (string $k): string => $signed($t[$k] - $native[$k]);
                printf("| %s, %s | %s | %s | %s | %s (%+.1f%%) | %s | %s | %s |\n", $appLabel, $row['label'], SERVER_NAMES[$server] ?? $server,
                    fmt($sum($native)), fmt($sum($t)), $signed($sum($t) - $sum($native)), 100 * ($sum($t) / $sum($native) - 1),
                    $d('tetherd'), $d('mariadb'), $d('web'));
            }
        }
    }

    echo "\n### Results\n\n";
    echo "req/s: median over the rounds, and its spread (slowest and fastest round). x native: the row's req/s over the "
        . "native row's of its page, median of the per-round ratios. Latency (ms) from ab: mean and p99, medians over the "
        . "rounds. Queries/page: what the framework ran (its own count, from one request), then the statements the page's "
        . "database user sent to MariaDB per request under load (MariaDB's USER_STATISTICS: SELECT, UPDATE and other "
        . "commands; through Tether, tetherd's user), and the connections it opened per request. Peak conns: the most "
        . "connections the page's database user held at once (SHOW PROCESSLIST every 50 ms and Max_used_connections "
        . "after FLUSH STATUS). CPU per request, over the row's runs (utime+stime from /proc, children included): tetherd, "
        . "MariaDB, the web server with its PHP workers, and the three together; on this small machine the pages are "
        . "CPU-bound, so req/s follows the last.\n\n";
    foreach ($cells as $server => $bySet) {
        printf("#### %s\n\n", SERVER_NAMES[$server] ?? $server);
        echo "| page | variant | setting | req/s | spread | x native | mean ms | p99 ms | queries/page: framework / MariaDB | connects/page | peak backend conns | CPU us/req: tetherd | MariaDB | web+PHP | all three |\n";
        echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        foreach (APPS as $app => $appLabel) {
            foreach (array_keys(SETTINGS) as $sk) {
                foreach (ROWS as $row) {
                    $c = $bySet[$sk][$row['key']] ?? null;
                    if ($row['app'] !== $app || $c === null) {
                        continue;
                    }
                    $label = $row['role'] === 'tether' ? "**{$row['label']}**" : $row['label'];
                    printf("| %s | %s | `%s` | %s | %s..%s | %s | %s | %s | %d / %s | %s | %d | %s | %s | %s | %s |\n",
                        $appLabel, $label, SETTINGS[$sk]['label'], fmt($c['rps']), fmt($c['rps_min']), fmt($c['rps_max']),
                        $row['role'] === 'native' ? '1.00' : fmt($c['x_native'], 2), fmt($c['mean_ms'], 1), fmt($c['p99_ms'], 1),
                        $phases[$server]['checks'][$row['key']]['queries'], fmt($c['statements'], 1), fmt($c['connects'], 2),
                        $c['conns_peak'], fmt($c['tetherd_us']), fmt($c['mariadb_us']), fmt($c['web_us']),
                        fmt($c['tetherd_us'] + $c['mariadb_us'] + $c['web_us']));
                }
            }
        }
        echo "\n";
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------

$cmd = $argv[1] ?? '';
exit(match ($cmd) {
    'phase' => phase(array_slice($argv, 2)),
    'report' => report(array_slice($argv, 2)),
    default => fail('usage: bench.php phase|report ... (see its header)'),
});
