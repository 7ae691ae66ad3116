<?php

declare(strict_types=1);

/*
 * bench/replicas/bench.php: the driver of bench/replicas/run.sh (issue 21's benchmark rows). Run by run.sh:
 *
 *   php bench.php --out FILE [--quick] [--dbs mariadb,postgres] [--seconds S] [--rate R] [--rounds N]
 *   php bench.php --report FILE
 *
 * The rows, per database: the page of 20 point reads (pages/reads.php) on backend "one" (the primary alone) and on
 * backend "rep" (the same primary with replicas = [the replica]); PostgreSQL's are "pone" and "prep". First it checks
 * both pages' bodies against bench_kv and warms every php-fpm worker on both; then measures the monitor's own reads in
 * an idle interval (what each server counts per second with no page running: MariaDB Com_select; PostgreSQL the
 * page's statement in pg_stat_statements: 0). Then two phases, "idle" (nothing else runs) and "loaded" (REP_WRITERS
 * writers, writer.php, straight on the primary on its CPU, from before the phase's first run to after its last). In
 * each phase, rows alternate round after round: ab -c REP_WORKERS (php-fpm's workers all busy: the web host
 * saturated) for req/s, then vegeta at a fixed rate (--rate, default half the lower req/s of the phase's ab runs:
 * below both rows' saturation, so that the latency is the page's, not a queue's) for page p50 and p99. Around every
 * run: the read count on both servers (less the monitor's probes over the run's length) and tetherd's routed reads
 * per host (/status.json). Any failed or non-200 request, or a wrong page, fails the run. Environment (run.sh): REP_PRIMARY_SOCKET, REP_REPLICA_SOCKET, REP_DB,
 * REP_PG_PRIMARY_DSN, REP_PG_REPLICA_DSN, REP_PG_REPLICA_SOCKET_DIR,
 * REP_ADMIN_SOCKET, REP_URL, REP_WORKERS, REP_WRITERS, REP_PRIMARY_CPU; the report's BENCH_REPLICAS_*.
 */

const PAGE_READS = 20;
const CHECK_ID = 42;
/** The rows of each database: tetherd's backend => label (the first of a database is one server, the second the pair). */
const DBS = [
    'mariadb' => ['one' => 'one server (the primary alone)', 'rep' => 'primary + replica (`replicas = [...]`)'],
    'postgres' => ['pone' => 'one server (the primary alone)', 'prep' => 'primary + replica (`replicas = [...]`)'],
];

function fail(string $msg): never
{
    fwrite(STDERR, "bench/replicas/bench.php: $msg\n");
    exit(1);
}

function env(string $name): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        fail("environment variable $name is not set (run bench/replicas/run.sh)");
    }
    return $v;
}

function opt(array $argv, string $name, ?string $default = null): ?string
{
    $i = array_search("--$name", $argv, true);
    return $i === false ? $default : ($argv[$i + 1] ?? fail("--$name needs a value"));
}

function say(string $msg): void
{
    fwrite(STDERR, "replicas bench: $msg\n");
}

/** Servers: root links to the primary and the replica over their Unix sockets, and tetherd's admin socket. */
final class Servers
{
    public readonly mysqli $primary;
    public readonly mysqli $replica;
    /** @var PgSql\Connection */
    public $pgPrimary;
    /** @var PgSql\Connection */
    public $pgReplica;
    /** @var array<string, array{primary: float, replica: float}> per database, what each server counts per second with no page running (the monitor's probes) */
    public array $probeRate = [];

    public function __construct()
    {
        $this->primary = new mysqli('localhost', 'root', '', env('REP_DB'), 0, env('REP_PRIMARY_SOCKET'));
        $this->replica = new mysqli('localhost', 'root', '', env('REP_DB'), 0, env('REP_REPLICA_SOCKET'));
        $this->pgPrimary = pg_connect(env('REP_PG_PRIMARY_DSN')) ?: fail('cannot connect to the PostgreSQL primary');
        $this->pgReplica = pg_connect(env('REP_PG_REPLICA_DSN')) ?: fail('cannot connect to the PostgreSQL replica');
    }

    /**
     * status returns, for database $db, each server's read count ('count': MariaDB Com_select, which counts prepared
     * executes too; PostgreSQL the page's statement's calls in pg_stat_statements) and write statements, and tetherd's routed reads per host of the database's replicated backend, at one moment.
     */
    public function status(string $db): array
    {
        if ($db === 'mariadb') {
            $get = static function (mysqli $c): array {
                $v = [];
                $r = $c->query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_insert_select', 'Com_update')");
                foreach ($r->fetch_all() as [$k, $n]) {
                    $v[strtolower($k)] = (int) $n;
                }
                return ['count' => $v['com_select'], 'writes' => $v['com_insert'] + $v['com_insert_select'] + $v['com_update']];
            };
            $p = $get($this->primary);
            $q = $get($this->replica);
            $rep = 'rep';
            $replicaAddr = env('REP_REPLICA_SOCKET');
        } else {
            // The page's statement, matched so that this query's own text does not match it.
            $get = static function ($c): array {
                $r = pg_query($c, "SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
                        WHERE strpos(query, 'FROM bench' || '_kv WHERE id = \$1') > 0),
                    (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE strpos(query, 'INSERT INTO bench' || '_w') > 0)")
                    ?: fail('reading pg_stat_statements failed: ' . pg_last_error($c));
                [$count, $writes] = pg_fetch_row($r);
                return ['count' => (int) $count, 'writes' => (int) $writes];
            };
            $p = $get($this->pgPrimary);
            $q = $get($this->pgReplica);
            $rep = 'prep';
            $replicaAddr = env('REP_PG_REPLICA_SOCKET_DIR');
        }
        $hosts = [];
        foreach (status_json()['pools'] ?? [] as $pool) {
            if (($pool['backend'] ?? '') === $rep && empty($pool['retiring'])) {
                foreach ($pool['topology']['hosts'] ?? [] as $h) {
                    $who = str_contains($h['addr'], $replicaAddr) ? 'replica' : 'primary';
                    $hosts[$who] = ['reads' => (int) $h['reads'], 'writes' => (int) $h['writes'], 'state' => $h['state'],
                        'lag_seconds' => $h['lag_seconds'] ?? null];
                }
            }
        }
        return ['db' => $db, 't' => hrtime(true), 'primary' => $p, 'replica' => $q, 'router' => $hosts];
    }

    /**
     * served returns what happened between two status() readings: the reads each server served (its count's delta less
     * the idle probe rate over the interval), the raw deltas, tetherd's routed reads per host and the primary's writes
     * (MariaDB: Com_insert + Com_insert_select + Com_update; PostgreSQL: the writers' INSERTs in pg_stat_statements).
     */
    public function served(array $a, array $b): array
    {
        $secs = ($b['t'] - $a['t']) / 1e9;
        $out = ['seconds' => $secs];
        foreach (['primary', 'replica'] as $s) {
            $d = $b[$s]['count'] - $a[$s]['count'];
            $out[$s] = [
                'count' => $d,
                'reads' => max(0, (int) round($d - ($this->probeRate[$a['db']][$s] ?? 0.0) * $secs)),
                'routed' => isset($a['router'][$s], $b['router'][$s]) ? $b['router'][$s]['reads'] - $a['router'][$s]['reads'] : null,
                'state' => $b['router'][$s]['state'] ?? null,
            ];
        }
        $out['primary_writes'] = $b['primary']['writes'] - $a['primary']['writes'];
        return $out;
    }
}

/** status_json returns tetherd's /status.json, over its admin socket. */
function status_json(): array
{
    $ch = curl_init('http://tetherd/status.json');
    curl_setopt_array($ch, [CURLOPT_UNIX_SOCKET_PATH => env('REP_ADMIN_SOCKET'), CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
    $body = curl_exec($ch);
    if ($body === false || curl_getinfo($ch, CURLINFO_RESPONSE_CODE) !== 200) {
        fail('GET /status.json on tetherd\'s admin socket failed: ' . curl_error($ch));
    }
    return json_decode((string) $body, true, 512, JSON_THROW_ON_ERROR);
}

/** run_cmd runs $cmd to its end; returns its exit code, stdout and stderr. */
function run_cmd(array $cmd): array
{
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes)
        ?: fail("cannot start {$cmd[0]}");
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    return [proc_close($p), $out, $err];
}

/** run_ab runs ab -n N -c C on $url (keep-alive); returns req/s and counts; fails on any failed or non-2xx request. */
function run_ab(string $url, int $n, int $c): array
{
    [$rc, $out, $err] = run_cmd(['ab', '-q', '-k', '-n', (string) $n, '-c', (string) $c, '-s', '60', $url]);
    $get = static fn (string $re): ?string => preg_match($re, $out, $m) ? $m[1] : null;
    $done = $get('/^Complete requests:\s+(\d+)/m');
    $r = ['n' => $n, 'c' => $c, 'complete' => (int) $done, 'failed' => (int) $get('/^Failed requests:\s+(\d+)/m'),
        'non2xx' => (int) ($get('/^Non-2xx responses:\s+(\d+)/m') ?? 0),
        'seconds' => (float) $get('/^Time taken for tests:\s+([\d.]+)/m'),
        'rps' => (float) $get('/^Requests per second:\s+([\d.]+)/m')];
    if ($done === null || $r['complete'] !== $n || $r['failed'] !== 0 || $r['non2xx'] !== 0) {
        fail("ab -n $n -c $c $url: exit $rc, {$r['complete']} complete, {$r['failed']} failed, {$r['non2xx']} non-2xx\n$out\n$err");
    }
    return $r;
}

/**
 * run_rate sends requests to $url at $rate a second for $seconds, each on a new connection, with vegeta (an open
 * loop: a slow answer does not delay the next request; latency is timed from when each was due), as
 * bench/web/twohost.php's run_rate. Fails on any error or non-200 answer.
 */
function run_rate(string $url, int $rate, float $seconds): array
{
    $vegeta = dirname(__DIR__, 2) . '/bin/vegeta';
    $targets = tempnam(sys_get_temp_dir(), 'tether-replicas-targets.');
    $bin = tempnam(sys_get_temp_dir(), 'tether-replicas-vegeta.');
    file_put_contents($targets, "GET $url\n");
    [$rc, $out, $err] = run_cmd([$vegeta, 'attack', '-targets', $targets, '-rate', "$rate/1s",
        '-duration', sprintf('%dms', (int) ($seconds * 1000)), '-keepalive=false', '-timeout', '60s', '-output', $bin]);
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

function page_url(string $row, string $extra = ''): string
{
    return env('REP_URL') . "/reads.php?b=$row&n=" . PAGE_READS . $extra;
}

/** check_page fails unless backend $row's page answers 200 with rows CHECK_ID .. CHECK_ID+19 as bench_kv has them. */
function check_page(Servers $s, string $row): void
{
    $url = page_url($row, '&id=' . CHECK_ID);
    $ch = curl_init($url);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 30]);
    $body = (string) curl_exec($ch);
    $status = curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    $want = '';
    $r = $s->primary->query(sprintf('SELECT id, name, score, created FROM bench_kv WHERE id BETWEEN %d AND %d ORDER BY id',
        CHECK_ID, CHECK_ID + PAGE_READS - 1));
    foreach ($r->fetch_all(MYSQLI_ASSOC) as $kv) {
        $want .= sprintf("%5d %-10s %3d %s\n", $kv['id'], $kv['name'], $kv['score'], $kv['created']);
    }
    if ($status !== 200 || $body !== $want) {
        fail("$url answered $status:\n$body\nwant:\n$want");
    }
}

/** Writers: REP_WRITERS writer.php processes on the primary's CPU, straight on the primary. */
final class Writers
{
    /** @var list<array{0: resource, 1: array}> */
    private array $procs = [];

    public function start(string $db, int $n): void
    {
        $where = $db === 'mariadb' ? env('REP_PRIMARY_SOCKET') : env('REP_PG_PRIMARY_DSN');
        for ($i = 0; $i < $n; $i++) {
            $p = proc_open(['taskset', '-c', env('REP_PRIMARY_CPU'), 'php', __DIR__ . '/writer.php', $db, $where,
                env('REP_DB'), (string) $i], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes)
                ?: fail('cannot start writer.php');
            $this->procs[] = [$p, $pipes];
        }
    }

    /** stop sends SIGTERM to each writer and returns the statements each ran; fails if one died or failed. */
    public function stop(): int
    {
        $total = 0;
        foreach ($this->procs as [$p, $pipes]) {
            $st = proc_get_status($p);
            if (!$st['running']) {
                fail('a writer exited during the phase: ' . stream_get_contents($pipes[2]) . stream_get_contents($pipes[1]));
            }
            // taskset execs php: the pid is the writer's.
            posix_kill($st['pid'], SIGTERM);
        }
        foreach ($this->procs as [$p, $pipes]) {
            $out = stream_get_contents($pipes[1]);
            $err = stream_get_contents($pipes[2]);
            $rc = proc_close($p);
            $r = json_decode(trim($out), true);
            if ($rc !== 0 || !is_array($r)) {
                fail("a writer failed (exit $rc): $out $err");
            }
            $total += $r['statements'];
        }
        $this->procs = [];
        return $total;
    }

    public function __destruct()
    {
        foreach ($this->procs as [$p]) {
            $st = proc_get_status($p);
            if ($st['running']) {
                posix_kill($st['pid'], SIGTERM);
            }
            proc_close($p);
        }
    }
}

/** measure runs $fn between two status() readings and returns its result with what the servers served meanwhile. */
function measure(Servers $s, string $db, callable $fn): array
{
    $a = $s->status($db);
    $r = $fn();
    $b = $s->status($db);
    return $r + ['served' => $s->served($a, $b)];
}

function run(array $argv): int
{
    $quick = in_array('--quick', $argv, true);
    $seconds = (float) opt($argv, 'seconds', $quick ? '1' : '5');
    $rounds = (int) opt($argv, 'rounds', $quick ? '1' : '3');
    $rateOpt = opt($argv, 'rate');
    $dbs = explode(',', opt($argv, 'dbs', 'mariadb,postgres'));
    foreach ($dbs as $db) {
        isset(DBS[$db]) || fail("--dbs: unknown database $db (mariadb, postgres)");
    }
    $workers = (int) env('REP_WORKERS');
    $nWriters = (int) env('REP_WRITERS');
    $out = opt($argv, 'out') ?? fail('--out FILE needed');
    $s = new Servers();
    $result = ['quick' => $quick, 'seconds' => $seconds, 'rounds' => $rounds, 'workers' => $workers,
        'writers' => $nWriters, 'dbs' => []];

    foreach ($dbs as $db) {
        $rows = array_keys(DBS[$db]);
        foreach ($rows as $row) {
            check_page($s, $row);
        }
        say("$db: both pages answer the right rows; warming every worker on both backends");
        foreach ($rows as $row) {
            run_ab(page_url($row), $workers * 10, $workers);
        }
        // What the servers count with no page running (the monitor's probes), per second on each.
        $idle = $quick ? 2.0 : 5.0;
        $a = $s->status($db);
        usleep((int) ($idle * 1e6));
        $b = $s->status($db);
        $secs = ($b['t'] - $a['t']) / 1e9;
        foreach (['primary', 'replica'] as $who) {
            $s->probeRate[$db][$who] = ($b[$who]['count'] - $a[$who]['count']) / $secs;
        }
        say(sprintf('%s: counted idle: primary %.1f/s, replica %.1f/s (the monitor\'s probes; subtracted)', $db,
            $s->probeRate[$db]['primary'], $s->probeRate[$db]['replica']));

        // The request count of an ab run: from a short run of each row, so that a run lasts about $seconds.
        $n = [];
        foreach ($rows as $row) {
            $probe = run_ab(page_url($row), $workers * 5, $workers);
            $n[$row] = max($workers * 5, (int) ($probe['rps'] * $seconds));
        }
        $res = ['probe_rate' => $s->probeRate[$db], 'phases' => []];
        foreach (['idle', 'loaded'] as $phase) {
            $writers = new Writers();
            $ph = ['ab' => [], 'rate' => []];
            $rate = $rateOpt === null ? null : (int) $rateOpt;
            $t0 = $s->status($db);
            if ($phase === 'loaded') {
                say("$db, loaded phase: starting $nWriters writers on the primary's CPU");
                $writers->start($db, $nWriters);
                usleep(2_000_000);
            }
            for ($round = 0; $round < $rounds; $round++) {
                foreach ($rows as $row) {
                    say("$db, $phase, round " . ($round + 1) . ": $row, ab -c $workers -n {$n[$row]}");
                    $ph['ab'][$row][] = measure($s, $db, fn () => run_ab(page_url($row), $n[$row], $workers));
                }
            }
            if ($rate === null) {
                $min = min(array_map(static fn (array $runs): float => median(array_column($runs, 'rps')), $ph['ab']));
                $rate = max(5, (int) round($min / 2));
            }
            for ($round = 0; $round < $rounds; $round++) {
                foreach ($rows as $row) {
                    say("$db, $phase, round " . ($round + 1) . ": $row, vegeta at $rate/s for {$seconds}s");
                    $ph['rate'][$row][] = measure($s, $db, fn () => run_rate(page_url($row), $rate, $seconds));
                }
            }
            $t1 = $s->status($db);
            if ($phase === 'loaded') {
                $ph['writer_statements'] = $writers->stop();
            }
            $ph['whole'] = $s->served($t0, $t1);
            $ph['rate_per_s'] = $rate;
            $res['phases'][$phase] = $ph;
        }
        $result['dbs'][$db] = $res;
    }
    file_put_contents($out, json_encode($result, JSON_PRETTY_PRINT) . "\n");
    return 0;
}

function median(array $v): float
{
    sort($v);
    $c = count($v);
    return $c === 0 ? NAN : ($c % 2 ? (float) $v[intdiv($c, 2)] : ($v[$c / 2 - 1] + $v[$c / 2]) / 2);
}

function fmt(?float $v, int $dec = 1): string
{
    return $v === null || is_nan($v) ? '-' : number_format($v, $dec, '.', ',');
}

/** share prints "N (P%)" of the reads the servers served in $runs: $who's part. */
function reads_of(array $runs, string $who): array
{
    $sum = static fn (string $k): int => array_sum(array_map(static fn (array $r): int => (int) ($r['served'][$who][$k] ?? 0), $runs));
    return ['reads' => $sum('reads'), 'routed' => $sum('routed')];
}

function report(string $file): int
{
    $r = json_decode((string) file_get_contents($file), true) ?: fail("cannot read $file");
    $e = static fn (string $k): string => (string) getenv("BENCH_REPLICAS_$k");
    $dbName = ['mariadb' => 'MariaDB', 'postgres' => 'PostgreSQL'];
    $o = [];
    $o[] = '### Replicas: a page of 20 reads on one server and on primary + replica (issue 21)';
    $o[] = '';
    $o[] = "Command: `{$e('CMD')}`; " . $e('DATE') . '. MariaDB ' . $e('MARIADB_VERSION') . ' GTID pair (semi-synchronous),'
        . ' PostgreSQL ' . $e('PG_VERSION') . ' streaming pair (asynchronous), both from scripts/lib/replicas.sh;'
        . " tetherd max_conns {$e('POOL')} per host, PHP " . PHP_VERSION . ', nginx + php-fpm, the PHP client one call per read.';
    $o[] = '';
    $o[] = 'Placement: ' . $e('SETUP') . '.';
    $o[] = '';
    $o[] = "Rows of a database in the same minutes, alternating ({$r['rounds']} round(s) each, {$r['seconds']} s a run; medians over rounds):"
        . ' "one server" is a backend of the primary alone, "primary + replica" the same primary with `replicas = [the replica]`, in the same tetherd.'
        . " req/s: `ab -k -c {$r['workers']}` (php-fpm's workers all busy). p50/p99: vegeta, a new connection a request,"
        . ' at a rate below both rows\' saturation in that phase (half the lower req/s unless `--rate`), the same for both rows of a phase.'
        . ' Reads served, counted on each server during the row\'s runs: MariaDB `Com_select` deltas (which count prepared'
        . ' executes) less the monitor\'s probes measured idle; PostgreSQL the page\'s statement\'s `calls` in `pg_stat_statements`,'
        . ' which the probes never run; tetherd\'s routed reads (`/status.json` hosts[].reads) in brackets.';
    $o[] = '';
    if ($r['quick']) {
        $o[] = '**Quick run (`--quick`): proves the command works; the numbers mean nothing.**';
        $o[] = '';
    }
    $o[] = '| database | phase | backend | req/s saturated | p50 ms | p99 ms | at rate/s | p50 by round ms | reads served: primary | replica |';
    $o[] = '|---|---|---|---|---|---|---|---|---|---|';
    $med = [];
    $notes = [];
    foreach ($r['dbs'] as $db => $d) {
        foreach ($d['phases'] as $phase => $ph) {
            foreach (DBS[$db] as $row => $label) {
                $ab = $ph['ab'][$row];
                $rt = $ph['rate'][$row];
                $all = array_merge($ab, $rt);
                $p = reads_of($all, 'primary');
                $q = reads_of($all, 'replica');
                $m = ['rps' => median(array_column($ab, 'rps')), 'p50' => median(array_column($rt, 'p50_ms')),
                    'p99' => median(array_column($rt, 'p99_ms'))];
                $pages = array_sum(array_column($ab, 'complete')) + array_sum(array_column($rt, 'n'));
                $m['expected_reads'] = $pages * PAGE_READS;
                $med[$db][$phase][$row === array_key_first(DBS[$db]) ? 'one' : 'rep'] = $m;
                $routed = static fn (array $x): string => $row === array_key_last(DBS[$db]) ? sprintf(' [%s]', number_format($x['routed'])) : '';
                $tot = max(1, $p['reads'] + $q['reads']);
                $o[] = sprintf('| %s | %s | %s | %s | %s | %s | %s | %s | %s (%d%%)%s | %s (%d%%)%s |', $dbName[$db], $phase, $label,
                    fmt($m['rps']), fmt($m['p50'], 2), fmt($m['p99'], 2), fmt(median(array_column($rt, 'achieved_rate')), 1),
                    implode(', ', array_map(static fn (float $v): string => fmt($v, 1), array_column($rt, 'p50_ms'))),
                    number_format($p['reads']), round(100 * $p['reads'] / $tot), $routed($p),
                    number_format($q['reads']), round(100 * $q['reads'] / $tot), $routed($q));
            }
        }
        $notes[] = "{$dbName[$db]}: idle " . number_format($med[$db]['idle']['one']['expected_reads']) . ' and '
            . number_format($med[$db]['idle']['rep']['expected_reads']) . ', loaded ' . number_format($med[$db]['loaded']['one']['expected_reads'])
            . ' and ' . number_format($med[$db]['loaded']['rep']['expected_reads'])
            . sprintf(' (counted idle, subtracted: %.1f/s on the primary, %.1f/s on the replica)', $d['probe_rate']['primary'], $d['probe_rate']['replica']);
    }
    $o[] = '';
    $o[] = 'Reads the pages made (pages x 20), one server and primary + replica: ' . implode('; ', $notes)
        . '. The servers\' counts above match them to within the probes\' noise.';
    foreach ($r['dbs'] as $db => $d) {
        $l = $d['phases']['loaded'];
        $o[] = '';
        $o[] = sprintf('%s loaded phase: %d writers straight on the primary (bench/replicas/writer.php: an INSERT of 20 rows,'
            . ' then the writer\'s summary row recomputed from its last 2,000 rows by INSERT ... SELECT; autocommit), %s statements'
            . ' in %.0f s (%s/s; on the primary %s/s %s); router states at its end: primary %s, replica %s.', $dbName[$db],
            $r['writers'], number_format($l['writer_statements']), $l['whole']['seconds'],
            fmt($l['writer_statements'] / max(0.001, $l['whole']['seconds']), 0),
            fmt($l['whole']['primary_writes'] / max(0.001, $l['whole']['seconds']), 0),
            $db === 'mariadb' ? 'write statements (Com_insert + Com_insert_select + Com_update)' : 'write statements (pg_stat_statements)',
            $l['whole']['primary']['state'] ?? '-', $l['whole']['replica']['state'] ?? '-');
    }
    $o[] = '';
    $o[] = 'Ratios, primary + replica over one server, same database and phase; and each row loaded over idle:';
    $o[] = '';
    $o[] = '| database | phase | req/s | p50 | p99 |';
    $o[] = '|---|---|---|---|---|';
    $x = static fn (float $a, float $b): string => fmt($a / max(0.001, $b), 2) . 'x';
    foreach ($med as $db => $phases) {
        foreach ($phases as $phase => $m) {
            $o[] = sprintf('| %s | %s | %s | %s | %s |', $dbName[$db], $phase, $x($m['rep']['rps'], $m['one']['rps']),
                $x($m['rep']['p50'], $m['one']['p50']), $x($m['rep']['p99'], $m['one']['p99']));
        }
        foreach (['one' => 'one server', 'rep' => 'primary + replica'] as $k => $label) {
            $o[] = sprintf('| %s | %s, loaded over idle | %s | %s | %s |', $dbName[$db], $label,
                $x($phases['loaded'][$k]['rps'], $phases['idle'][$k]['rps']), $x($phases['loaded'][$k]['p50'], $phases['idle'][$k]['p50']),
                $x($phases['loaded'][$k]['p99'], $phases['idle'][$k]['p99']));
        }
    }
    $o[] = '';
    $o[] = 'What this 2-CPU machine can and cannot show: tetherd sends every replica-safe read to a replica that qualifies'
        . ' (backend/sqlroute: not split with the primary), and the replica shares CPU 1 with the web host (tetherd, nginx,'
        . ' php-fpm, ab, vegeta). So with the primary idle, primary + replica moves the database\'s read work onto the'
        . ' saturated web host\'s CPU, and its req/s should come out below one server\'s; when it comes out above, other'
        . ' work on the machine was loading'
        . ' CPU 0, the primary\'s, more than CPU 1 (the kernel keeps other processes off neither). A replica on a host of its own adds read capacity this machine does'
        . ' not have, and no run here measures that. What it can show is the loaded phase: the writers keep CPU 0 busy'
        . ' with the primary, and the reads the replica serves do not queue behind them (the replica applies the writes'
        . ' on CPU 1, a smaller share by the writers\' design). The latency rate of a loaded phase is lower than its idle'
        . ' one (below both rows\' saturation), so loaded-over-idle latency ratios compare pages at different rates.'
        . ' The machine is shared with other work: numbers are rough; compare rows of this run only, and round by round'
        . ' (the rows of a round ran a few seconds apart): a round where both rows took seconds was a stall of the machine.'
        . ' Load average (1 min) before: ' . $e('LOAD_BEFORE') . ', after: ' . $e('LOAD_AFTER') . '.';
    echo implode("\n", $o), "\n";
    return 0;
}

if (in_array('--report', $argv, true)) {
    exit(report(opt($argv, 'report')));
}
exit(run($argv));
