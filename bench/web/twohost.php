<?php

declare(strict_types=1);

/*
 * bench/web/twohost.php: the driver of the two-host model (bench/web/twohost.sh, issue 20). Run by twohost.sh:
 *
 *   php twohost.php phase --delay D --url URL --out FILE [--quick] [--seconds S] [--only KEY,KEY]
 *   php twohost.php report PHASE_JSON...
 *   php twohost.php rtt                      (run by phase on the web host's CPU: round trips through the relay)
 *
 * phase, per row of twohost-rows.php: checks the page's body (bench/web's pages against bench_kv read here over the
 * Unix socket, the WordPress front page's 10 newest posts, the Laravel page against one SQL join), warms it up
 * through every worker, then two ab runs: -c WORKERS (php-fpm's workers all busy: the web host's CPU saturated, or
 * the row bound by something else, which the web host's busy share says) for req/s, and -c 10 for the CPU per page;
 * then vegeta at the group's fixed rate (twohost-rows.php's rates, below every row's saturation) for p50 and p99. A
 * closed loop such as ab -c 10 on a row that saturates a host measures its queue (Little's law: p50 ~ 10 / req/s),
 * not the page's latency; an open loop at a fixed rate below saturation measures the page. CPU: utime+stime of the web host's processes (nginx, php-fpm and its workers, tetherd, pgbouncer)
 * and of the database host's (mariadbd, postgres and its backends) from /proc/PID/stat, apart; the relays' apart
 * too. Connections: the row's database user's, counted on the server every 50 ms during both runs (peak). Any
 * failed or non-2xx request, or a wrong page, fails the phase.
 * Environment (twohost.sh): TWOHOST_CONFIG, TETHERD_PID, PGBOUNCER_PID, MARIADB_PID, PG_PID, RELAY_PIDS, WEB_PIDS,
 * WEB_CPU, WORKERS, TETHER_TLS, CLK_TCK.
 */

require __DIR__ . '/../lib/proc.php';

const SAMPLE_EVERY_US = 50_000;
const CHECK_ID = 42;
const WP_POSTS = 40;
const WP_PER_PAGE = 10;
const LARAVEL_POSTS = 20;
const MODERATE_C = 10;

function fail(string $msg): never
{
    fwrite(STDERR, "twohost.php: $msg\n");
    exit(1);
}

function env(string $name): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        fail("environment variable $name is not set (run bench/web/twohost.sh)");
    }
    return $v;
}

/** opt returns the value of --$name in $argv, or $default. */
function opt(array $argv, string $name, ?string $default = null): ?string
{
    $i = array_search("--$name", $argv, true);
    return $i === false ? $default : ($argv[$i + 1] ?? fail("--$name needs a value"));
}

/** Servers: the run's config, admin links to both databases over their Unix sockets (never through the relays). */
final class Servers
{
    public readonly array $cfg;
    public readonly mysqli $my;
    /** @var PgSql\Connection */
    public $pg;

    public function __construct()
    {
        $this->cfg = require env('TWOHOST_CONFIG');
        $this->my = new mysqli('localhost', 'root', '', $this->cfg['db_name'], 0, $this->cfg['mysql_socket']);
        $this->pg = pg_connect(sprintf('host=%s port=%d user=postgres dbname=%s', $this->cfg['pg_socket_dir'],
            $this->pgAdminPort(), $this->cfg['db_name'])) ?: fail('cannot connect to PostgreSQL as postgres');
    }

    private function pgAdminPort(): int
    {
        // The server's own port (its socket file is named after it), not the relay's.
        foreach (glob($this->cfg['pg_socket_dir'] . '/.s.PGSQL.*') ?: [] as $f) {
            if (preg_match('/\.s\.PGSQL\.(\d+)$/', $f, $m)) {
                return (int) $m[1];
            }
        }
        fail('no PostgreSQL socket in ' . $this->cfg['pg_socket_dir']);
    }

    /** conns returns a database's client connections by user name, as the server counts them. */
    public function conns(string $db): array
    {
        $out = [];
        if ($db === 'mariadb') {
            foreach ($this->my->query('SELECT USER, COUNT(*) FROM information_schema.PROCESSLIST GROUP BY USER')->fetch_all() as [$u, $n]) {
                $out[$u] = (int) $n;
            }
        } else {
            // Connections without TLS are counted under "USER (no TLS)": the driver fails a row that has any.
            $r = pg_query($this->pg, "SELECT usename, count(*), count(*) FILTER (WHERE NOT s.ssl) FROM pg_stat_activity a
                JOIN pg_stat_ssl s USING (pid) WHERE a.backend_type = 'client backend' GROUP BY usename");
            foreach (pg_fetch_all($r, PGSQL_NUM) ?: [] as [$u, $n, $plain]) {
                $out[(string) $u] = (int) $n;
                if ((int) $plain > 0) {
                    $out["$u (no TLS)"] = (int) $plain;
                }
            }
        }
        return $out;
    }
}

/** cpu returns CPU ticks of the web host's, the database host's and the relays' processes (whole process trees). */
function cpu(): array
{
    $sum = static function (array $pids): int {
        $t = 0;
        foreach ($pids as $pid) {
            $t += tree_cpu_ticks((int) $pid);
        }
        return $t;
    };
    $web = array_merge(preg_split('/\s+/', trim(env('WEB_PIDS'))), [env('TETHERD_PID'), env('PGBOUNCER_PID')]);
    return [
        'web' => $sum($web),
        'tetherd' => $sum([env('TETHERD_PID')]),
        'db' => $sum([env('MARIADB_PID'), env('PG_PID')]),
        'relay' => $sum(preg_split('/\s+/', trim(env('RELAY_PIDS')))),
        't' => hrtime(true),
    ];
}

/** run_sampled runs $cmd to its end, calling $sample every 50 ms meanwhile; returns its exit code, stdout, stderr. */
function run_sampled(array $cmd, ?callable $sample = null): array
{
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes)
        ?: fail("cannot start {$cmd[0]}");
    stream_set_blocking($pipes[1], false);
    stream_set_blocking($pipes[2], false);
    $out = $err = '';
    // The exit code comes from the proc_get_status that saw the end: proc_close answers -1 once that has reaped it.
    while (($st = proc_get_status($p))['running']) {
        $out .= stream_get_contents($pipes[1]);
        $err .= stream_get_contents($pipes[2]);
        if ($sample !== null) {
            $sample();
        }
        usleep(SAMPLE_EVERY_US);
    }
    stream_set_blocking($pipes[1], true);
    stream_set_blocking($pipes[2], true);
    $out .= stream_get_contents($pipes[1]);
    $err .= stream_get_contents($pipes[2]);
    proc_close($p);
    return [$st['exitcode'], $out, $err];
}

/** run_ab runs ab -n N -c C on $url, calling $sample every 50 ms meanwhile; returns ab's figures. */
function run_ab(string $url, int $n, int $c, ?callable $sample = null): array
{
    $csv = tempnam(sys_get_temp_dir(), 'tether-twohost-ab.');
    [$rc, $out, $err] = run_sampled(['ab', '-q', '-n', (string) $n, '-c', (string) $c, '-s', '60', '-e', $csv, $url], $sample);
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
        fail("ab -n $n -c $c $url failed, exit $rc:\n$out\n$err");
    }
    $r = [
        'n' => $n, 'c' => $c, 'complete' => (int) $done,
        'failed' => (int) $get('/^Failed requests:\s+(\d+)/m'),
        'non2xx' => (int) ($get('/^Non-2xx responses:\s+(\d+)/m') ?? 0),
        'seconds' => (float) $get('/^Time taken for tests:\s+([\d.]+)/m'),
        'rps' => (float) $get('/^Requests per second:\s+([\d.]+)/m'),
        'p50_ms' => $pct[50], 'p99_ms' => $pct[99],
    ];
    if ($r['complete'] !== $n || $r['failed'] !== 0 || $r['non2xx'] !== 0) {
        fail("ab -n $n -c $c $url: {$r['complete']} complete, {$r['failed']} failed, {$r['non2xx']} non-2xx\n$out\n$err");
    }
    return $r;
}

/**
 * run_rate sends $n requests to $url at $rate a second, each on a new connection (as ab without -k), with vegeta: an
 * open loop, so a slow answer does not delay the next request and latency is timed from when each was due. Calls
 * $sample every 50 ms meanwhile; returns the latencies (ms) and counts. Fails on any error or non-200 answer.
 */
function run_rate(string $url, float $rate, int $n, ?callable $sample = null): array
{
    $vegeta = dirname(__DIR__, 2) . '/bin/vegeta';
    $targets = tempnam(sys_get_temp_dir(), 'tether-twohost-targets.');
    $bin = tempnam(sys_get_temp_dir(), 'tether-twohost-vegeta.');
    file_put_contents($targets, "GET $url\n");
    $duration = sprintf('%dms', (int) ceil($n / $rate * 1000));
    [$rc, $out, $err] = run_sampled([$vegeta, 'attack', '-targets', $targets, '-rate', sprintf('%d/1s', (int) round($rate)),
        '-duration', $duration, '-keepalive=false', '-timeout', '60s', '-output', $bin], $sample);
    unlink($targets);
    if ($rc !== 0) {
        unlink($bin);
        fail("vegeta attack $url at $rate/s failed, exit $rc:\n$out\n$err");
    }
    $json = (string) shell_exec(escapeshellarg($vegeta) . ' report -type=json ' . escapeshellarg($bin));
    unlink($bin);
    $r = json_decode($json, true) ?: fail("vegeta report: $json");
    $codes = $r['status_codes'] ?? [];
    if (($codes['200'] ?? 0) !== $r['requests'] || ($r['errors'] ?? []) !== []) {
        fail("vegeta $url at $rate/s: " . json_encode(['status_codes' => $codes, 'errors' => $r['errors'] ?? []]));
    }
    return ['rate' => $rate, 'n' => $r['requests'], 'p50_ms' => $r['latencies']['50th'] / 1e6,
        'p99_ms' => $r['latencies']['99th'] / 1e6, 'mean_ms' => $r['latencies']['mean'] / 1e6,
        'achieved_rate' => $r['rate']];
}

function http_get(string $url): array
{
    $ch = curl_init($url);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 60]);
    $body = curl_exec($ch);
    return [curl_getinfo($ch, CURLINFO_RESPONSE_CODE), $body === false ? 'curl: ' . curl_error($ch) : $body];
}

/** check_page fails unless the row's page answers 200 with what it must (see the file comment). */
function check_page(Servers $s, string $url, array $row): void
{
    $expect = $row['expect'];
    $q = str_starts_with($expect, 'rows:') ? 'id=' . CHECK_ID : 'bench_queries=1';
    $full = "$url/{$row['page']}" . (str_contains($row['page'], '?') ? '&' : '?') . $q;
    [$status, $body] = http_get($full);
    $show = static fn (string $why) => fail(sprintf("%s (%s) %s; it answered %s: %s", $full, $row['key'], $why, $status,
        strlen($body) > 4000 ? substr($body, 0, 2000) . "\n[...]\n" . substr($body, -2000) : $body));
    if ($status !== 200) {
        $show('did not answer 200');
    }
    if (str_starts_with($expect, 'rows:')) {
        $n = (int) substr($expect, 5);
        $want = '';
        $r = $s->my->query(sprintf('SELECT id, name, score, created FROM bench_kv WHERE id BETWEEN %d AND %d ORDER BY id', CHECK_ID, CHECK_ID + $n - 1));
        foreach ($r->fetch_all(MYSQLI_ASSOC) as $kv) {
            $want .= render_row($kv);
        }
        if ($body !== $want) {
            $show("is not rows " . CHECK_ID . '..' . (CHECK_ID + $n - 1) . ", which are:\n$want");
        }
        return;
    }
    if (!preg_match('/<!-- bench-queries: (\d+) -->\n$/', $body, $m)) {
        $show('did not end with its query count');
    }
    $page = substr($body, 0, -strlen($m[0]));
    if ($expect === 'wordpress') {
        $title = static fn (int $i): string => sprintf('Bench post %02d: notes on pooled connections', $i);
        foreach (range(WP_POSTS, WP_POSTS - WP_PER_PAGE + 1) as $i) {
            if (!str_contains($page, '>' . $title($i) . '<')) {
                $show('does not list the post "' . $title($i) . '"');
            }
        }
        if (str_contains($page, $title(WP_POSTS - WP_PER_PAGE)) || !str_contains($page, '</html>') || stripos($page, 'database error') !== false) {
            $show('is not the front page of the 10 newest posts without database errors');
        }
        return;
    }
    $rows = $s->my->query('SELECT p.id, p.title, a.name, p.created_at FROM posts p JOIN authors a ON a.id = p.author_id
        ORDER BY p.created_at DESC LIMIT ' . LARAVEL_POSTS)->fetch_all(MYSQLI_ASSOC);
    $e = static fn (string $v): string => htmlspecialchars($v, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');
    $want = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Latest posts</title></head><body>\n<h1>Latest posts</h1>\n<ul>\n";
    foreach ($rows as $r) {
        $want .= sprintf("<li><a href=\"/posts/%d\">%s</a> by %s, %s</li>\n", $r['id'], $e($r['title']), $e($r['name']), substr($r['created_at'], 0, 16));
    }
    if ($page !== $want . "</ul>\n</body></html>\n") {
        $show("is not the 20 newest posts with their authors");
    }
}

/** rtt: round trips from this process (run on the web host's CPU) to MariaDB over TLS, through the relay and direct. */
function rtt(): int
{
    $cfg = require env('TWOHOST_CONFIG');
    $direct = (int) env('MARIADB_PORT');
    $n = (int) (getenv('RTT_N') ?: 300);
    $out = [];
    foreach (['relay' => $cfg['mysql_port'], 'direct' => $direct] as $via => $port) {
        $db = mysqli_init();
        $db->ssl_set(null, null, $cfg['mysql_tls_ca'], null, null);
        $u = $cfg['users']['mysqli_pconnect_n'];
        $db->real_connect('127.0.0.1', $u, $u, $cfg['db_name'], $port, null, MYSQLI_CLIENT_SSL);
        $t = [];
        for ($i = 0; $i < $n + 20; $i++) {
            $t0 = hrtime(true);
            $db->query('DO 1');
            if ($i >= 20) {
                $t[] = (hrtime(true) - $t0) / 1000;
            }
        }
        sort($t);
        $out[$via] = ['p50_us' => $t[intdiv(count($t), 2)], 'p99_us' => $t[(int) floor(count($t) * 0.99)], 'n' => $n];
        $db->close();
    }
    echo json_encode($out), "\n";
    return 0;
}

function phase(array $argv): int
{
    $delay = opt($argv, 'delay') ?? fail('--delay required');
    $url = opt($argv, 'url') ?? fail('--url required');
    $outFile = opt($argv, 'out') ?? fail('--out required');
    $quick = in_array('--quick', $argv, true);
    $seconds = (float) opt($argv, 'seconds', '3');
    $only = opt($argv, 'only');
    $workers = (int) env('WORKERS');
    $clk = (int) env('CLK_TCK');
    $s = new Servers();
    require $s->cfg['www'] . '/htdocs/lib.php'; // render_row, as the pages print rows
    $spec = require __DIR__ . '/twohost-rows.php';
    $rows = $spec['rows'];
    if ($only !== null) {
        $keys = explode(',', $only);
        $rows = array_values(array_filter($rows, static fn (array $r): bool => in_array($r['key'], $keys, true)));
        $rows || fail("--only $only: no such row");
    }

    // The round trip the relay really gives, from the web host's CPU, over TLS; direct for comparison.
    $cmd = sprintf('taskset -c %d php %s rtt', (int) env('WEB_CPU'), escapeshellarg(__FILE__));
    $rttJson = shell_exec('MARIADB_PORT=' . (int) getenv('MARIADB_PORT') . " $cmd");
    $rtt = json_decode((string) $rttJson, true) ?: fail("rtt failed: $rttJson");
    progress(sprintf('%s each way: MariaDB round trip over TLS through the relay p50 %.0f us p99 %.0f us; direct p50 %.0f us',
        $delay, $rtt['relay']['p50_us'], $rtt['relay']['p99_us'], $rtt['direct']['p50_us']));

    $results = [];
    foreach ($rows as $row) {
        $page = "$url/{$row['page']}";
        $user = $s->cfg['users'][$row['user']];
        $peak = 0;
        // On PostgreSQL the server also says whether each connection uses TLS (pg_stat_ssl); on MariaDB every row's
        // user is REQUIRE SSL, so a connection without TLS never gets in.
        $plainOk = $row['role'] === 'tether' && env('TETHER_TLS') !== '1';
        $sample = static function () use ($s, $row, $user, $plainOk, &$peak): void {
            $c = $s->conns($row['db']);
            $peak = max($peak, $c[$user] ?? 0);
            if (!$plainOk && isset($c["$user (no TLS)"])) {
                fail("{$row['key']}: {$c["$user (no TLS)"]} of $user's connections to PostgreSQL do not use TLS");
            }
        };
        check_page($s, $url, $row);
        check_page($s, $url, $row); // the second one in another worker, or the same with its persistent link
        $sample();
        // Warm-up: every worker serves the page (persistent links, OPcache, the cache's hot rows). --quick skips it
        // and runs few requests: it proves the pages and the path, not the numbers.
        $warm = $quick ? ['rps' => 0.0] : run_ab($page, max(8 * $workers, 200), $workers, $sample);
        // At least 60 requests: ab's -e percentiles index past its results below 51 (p99 of 20 requests is garbage).
        $n = static fn (float $rps, int $c): int => $quick ? max(2 * $c, 60) : max(10 * $c, 200, (int) ($rps * $seconds));
        $c0 = cpu();
        $sat = run_ab($page, $n($warm['rps'], $workers), $workers, $sample);
        $c1 = cpu();
        $mod = run_ab($page, $n($warm['rps'] * 0.7, MODERATE_C), MODERATE_C, $sample);
        $c2 = cpu();
        $rate = (float) ($spec['rates'][$row['group']] ?? fail("twohost-rows.php: no rate for group {$row['group']}"));
        $lat = run_rate($page, $rate, $quick ? max(10, (int) $rate) : max(60, (int) ($rate * $seconds)), $sample);
        $per = static fn (string $who): float => ($c2[$who] - $c1[$who]) / $clk * 1e6 / $mod['n'];
        $wall = ($c1['t'] - $c0['t']) / 1e9;
        $results[$row['key']] = [
            'sat' => $sat, 'mod' => $mod, 'lat' => $lat, 'peak_conns' => $peak, 'user' => $user,
            'cpu_us' => ['web' => $per('web'), 'tetherd' => $per('tetherd'), 'db' => $per('db'), 'relay' => $per('relay')],
            'web_busy' => ($c1['web'] - $c0['web']) / $clk / $wall,
            // The database host's processes and the relays (which share its CPU): when this nears 100% the database
            // host, not the web host, bounds the saturated req/s.
            'db_busy' => ($c1['db'] + $c1['relay'] - $c0['db'] - $c0['relay']) / $clk / $wall,
        ];
        progress(sprintf('%-28s sat %7.1f req/s (web host %3.0f%% busy, db host %3.0f%%)  at %d/s p50 %7.2f ms p99 %7.2f ms  c10 p50 %7.2f ms  CPU/page web %6.0f us db %5.0f us  conns %d',
            $row['key'], $sat['rps'], 100 * $results[$row['key']]['web_busy'], 100 * $results[$row['key']]['db_busy'], $rate,
            $lat['p50_ms'], $lat['p99_ms'], $mod['p50_ms'], $per('web'), $per('db'), $peak));
    }
    file_put_contents($outFile, json_encode(['delay' => $delay, 'rtt' => $rtt, 'quick' => $quick, 'workers' => $workers,
        'tether_tls' => env('TETHER_TLS') === '1', 'results' => $results], JSON_PRETTY_PRINT));
    return 0;
}

function fmt(?float $v, int $dec = 1): string
{
    return $v === null ? '-' : number_format($v, $dec);
}

function report(array $files): int
{
    $spec = require __DIR__ . '/twohost-rows.php';
    $phases = array_map(static fn (string $f): array => json_decode(file_get_contents($f), true, 512, JSON_THROW_ON_ERROR), $files);
    $tls = $phases[0]['tether_tls'] ?? true;
    $o = [];
    $o[] = '### Two hosts: the database ' . implode(' and ', array_map(static fn (array $p): string => $p['delay'], $phases)) . ' away each way, over TLS (issue 20)';
    $o[] = '';
    $o[] = sprintf('`%s`, %s. %s. Load average (1 min) before: %s, after: %s. MariaDB %s, PostgreSQL %s.',
        getenv('BENCH_TWOHOST_CMD'), getenv('BENCH_TWOHOST_DATE'), getenv('BENCH_TWOHOST_SETUP'),
        getenv('BENCH_TWOHOST_LOAD_BEFORE'), getenv('BENCH_TWOHOST_LOAD_AFTER'), getenv('BENCH_TWOHOST_MARIADB_VERSION'),
        getenv('BENCH_TWOHOST_PG_VERSION'));
    $o[] = '';
    $o[] = 'Every row reaches the databases over TCP through bench/relay (a fixed delay each way) with TLS: mysqli and PDO with the'
        . ' server\'s CA (WordPress\'s wpdb with MYSQLI_CLIENT_SSL, which it cannot give a CA: not verified), pg_connect and'
        . ' pgbouncer (on the web host, reached over its Unix socket) with sslmode=verify-full, tetherd (pool: max_conns '
        . getenv('BENCH_TWOHOST_POOL') . ') with `tls=true&tls-ca=` and `sslmode=verify-full`.'
        . ' Servers refuse TCP without TLS; row users may only come from 127.0.0.1 with TLS.';
    if (!$tls) {
        $o[] = '';
        $o[] = '**BENCH_TWOHOST_TETHER_TLS=0: tetherd reached the databases through the relays WITHOUT TLS** (a trial run; every'
            . ' other row used TLS). The Tether rows below are marked "(no TLS)"; their targets do not count.';
    }
    $o[] = '';
    $o[] = 'Columns: **sat req/s**: ab -c = php-fpm\'s workers (' . $phases[0]['workers'] . '), with the share of one CPU the web host\'s'
        . ' processes used meanwhile (100% = saturated; less means the row waits on something else: round trips, a pool,'
        . ' the database host, or other work on the machine) and the database host\'s (databases and relays); a req/s marked'
        . ' "(db host)" was bound by the database host (>= 90% busy), "(neither CPU)" by round trips, a pool or other work'
        . ' on the machine, unmarked by the web host (>= 90% busy);'
        . ' **p50 / p99**: the page\'s latency at the group\'s fixed rate (in its heading; about a third of the slowest row\'s'
        . ' saturated req/s, so no row queues), an open loop (vegeta, a new connection per request, timed from when each'
        . ' request was due); **c10 p50**: ab -c 10, a closed loop, which on a row that saturates a host measures its queue'
        . ' (p50 ~ 10 / req/s) more than the page;'
        . ' **CPU/page**: utime+stime per page at -c 10 from /proc/PID/stat of the web host\'s'
        . ' processes (nginx, php-fpm, tetherd, pgbouncer; tetherd\'s share apart) and of the database host\'s (mariadbd,'
        . ' postgres), per process rather than per CPU because other work may share the machine; the relays\' CPU apart;'
        . ' **conns**: the row\'s database user\'s connections at peak, counted on the server every 50 ms.';
    foreach ($phases as $ph) {
        $o[] = '';
        $o[] = sprintf('#### %s each way%s', $ph['delay'], $ph['quick'] ? ' (--quick: numbers not worth quoting)' : '');
        $o[] = '';
        $o[] = sprintf('Round trip measured from the web host\'s CPU (MariaDB `DO 1` over TLS, %d each): through the relay p50 %.0f us,'
            . ' p99 %.0f us; directly to the server p50 %.0f us, p99 %.0f us: the relay adds %.0f us a round trip at p50.',
            $ph['rtt']['relay']['n'], $ph['rtt']['relay']['p50_us'], $ph['rtt']['relay']['p99_us'], $ph['rtt']['direct']['p50_us'],
            $ph['rtt']['direct']['p99_us'], $ph['rtt']['relay']['p50_us'] - $ph['rtt']['direct']['p50_us']);
        $o[] = '';
        $o[] = '| row | sat req/s | web host busy | db host busy | p50 ms | p99 ms | c10 p50 ms | web CPU/page us | of it tetherd | DB CPU/page us | relay CPU/page us | conns |';
        $o[] = '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
        $group = null;
        foreach ($spec['rows'] as $row) {
            $r = $ph['results'][$row['key']] ?? null;
            if ($r === null) {
                continue;
            }
            if ($row['group'] !== $group) {
                $group = $row['group'];
                $o[] = '| **' . $spec['groups'][$group] . '** (p50 / p99 at ' . $spec['rates'][$group] . ' req/s) | | | | | | | | | | | |';
            }
            $label = $row['label'] . ((!$ph['tether_tls'] && $row['role'] === 'tether') ? ' (no TLS)' : '');
            $bound = $r['web_busy'] >= 0.9 ? '' : (($r['db_busy'] ?? 0) >= 0.9 ? ' (db host)' : ' (neither CPU)');
            $o[] = sprintf('| %s | %s%s | %s%% | %s%% | %s | %s | %s | %s | %s | %s | %s | %d |', $label, fmt($r['sat']['rps']), $bound, fmt(100 * $r['web_busy'], 0),
                fmt(100 * ($r['db_busy'] ?? 0), 0),
                fmt($r['lat']['p50_ms'], 2), fmt($r['lat']['p99_ms'], 2), fmt($r['mod']['p50_ms'], 2), fmt($r['cpu_us']['web'], 0),
                $row['role'] === 'tether' ? fmt($r['cpu_us']['tetherd'], 0) : '-', fmt($r['cpu_us']['db'], 0), fmt($r['cpu_us']['relay'], 0), $r['peak_conns']);
        }
        $o[] = '';
        $o[] = 'Targets (issue 20; they apply at 0.5 ms each way with TLS; ratios from this run):';
        $o[] = '';
        $o[] = '| target | measured | wanted | |';
        $o[] = '|---|---:|---:|---|';
        foreach ($spec['targets'] as $t) {
            $a = $ph['results'][$t['row']] ?? null;
            $b = $ph['results'][$t['vs']] ?? null;
            if ($a === null || $b === null) {
                continue;
            }
            $val = match ($t['metric']) {
                'rps' => $a['sat']['rps'] / $b['sat']['rps'],
                'p50' => $a['lat']['p50_ms'] / $b['lat']['p50_ms'],
                'db_cpu' => $b['cpu_us']['db'] > 0 ? $a['cpu_us']['db'] / $b['cpu_us']['db'] : null,
            };
            $met = $val !== null && ($t['op'] === '>=' ? $val >= $t['want'] : $val <= $t['want']);
            $note = $met ? 'met' : 'not met';
            if (!$ph['tether_tls']) {
                $note .= ' (Tether without TLS: does not count)';
            }
            $o[] = sprintf('| %s | %sx | %s %sx | %s |', $t['label'], fmt($val, 2), $t['op'], $t['want'], $note);
        }
        $relay = [];
        foreach (['mariadb', 'pg'] as $name) {
            $f = getenv('BENCH_TWOHOST_RESULTS') . "/relay-$name-{$ph['delay']}.txt";
            if (is_file($f)) {
                foreach (file($f, FILE_IGNORE_NEW_LINES) as $line) {
                    if (str_contains($line, 'round trip') || str_contains($line, 'after its deadline') || str_contains($line, 'CPU')) {
                        $relay[] = preg_replace('~^(\S+) \d{4}/\d\d/\d\d \S+ ~', '$1 ', $line) ?? $line;
                    }
                }
            }
        }
        if ($relay) {
            $o[] = '';
            $o[] = 'The relays\' own figures (`-measure` against an in-process echo before serving, and at exit what they forwarded and its CPU):';
            $o[] = '';
            $o[] = '```';
            array_push($o, ...$relay);
            $o[] = '```';
        }
    }
    echo implode("\n", $o), "\n";
    return 0;
}

$cmd = $argv[1] ?? '';
exit(match ($cmd) {
    'phase' => phase(array_slice($argv, 2)),
    'report' => report(array_slice($argv, 2)),
    'rtt' => rtt(),
    default => fail('usage: twohost.php phase|report|rtt ...'),
});
