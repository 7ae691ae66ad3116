<?php

declare(strict_types=1);

require_once dirname(__DIR__) . '/lib/proc.php';

/*
 * bench/cli/bench.php: per-call latency of Tether and of mysqli and pgsql from the PHP CLI, tetherd's CPU per request,
 * the backend connections tetherd uses, and the targets tetherd's SQL layer is held to.
 *
 * Run it through bench/cli/run.sh, which starts a throwaway MariaDB, PostgreSQL and tetherd (backends `maria`, the
 * default, and `pg`) and passes their coordinates in the environment. It prints markdown on stdout (progress on
 * stderr) and, with --json FILE, the raw numbers and the targets' verdicts as JSON.
 *
 *   php bench/cli/bench.php [--quick] [--iterations N] [--warmup N] [--rounds N] [--newconn-iterations N]
 *                           [--load-procs N] [--load-pings N] [--load-reads N] [--json FILE]
 *
 * Latency rows are measured in --rounds rounds (5): each round runs every row for its share of the iterations, so
 * that a noisy minute on the shared machine hits every row alike and the ratios between rows stay fair.
 *
 * Then the rows of PINNED_ROWS run again pinned to one CPU (PIN_CPU): tetherd and mariadbd with all their threads,
 * the postmaster and all its children (taskset; CpuPin in bench/lib/proc.php), and a PHP process started under
 * `taskset -c PIN_CPU` that makes the calls; every process's earlier affinity is put back before the runs under load.
 * Unpinned, a lone call on this 2-vCPU VM mostly measures how fast an idle vCPU wakes up (40-70 us), and a Tether
 * read wakes more processes than a ping or a direct read; on one CPU each hand-off costs a context switch, not a
 * wake-up (a pipe ping-pong here: ~53 us across the two vCPUs, ~6 us on one). The solo targets (switches per read,
 * read p50 against ping p50 + open-connection read p50) are judged from the pinned rows; the unpinned ratios are
 * printed for comparison.
 *
 * Environment (all set by run.sh):
 *   TETHER_SOCKET    tetherd's Unix socket                 TETHERD_PID   tetherd's pid (for /proc CPU readings)
 *   MARIADB_SOCKET   MariaDB's Unix socket                 MARIADB_PID   mariadbd's pid
 *   BENCH_DB_NAME    the database (tether_test)
 *   BENCH_TETHER_DB_USER                                    the MariaDB user tetherd connects as (tether)
 *   BENCH_MYSQLI_USER / BENCH_MYSQLI_PASSWORD               the user of the mysqli rows (bench / bench): another
 *                                                           user, so that tetherd's connections can be counted
 *   BENCH_ADMIN_USER / BENCH_ADMIN_PASSWORD                 a user that may FLUSH STATUS (root / empty)
 *   PG_PID           the postmaster's pid (its backends are its children)
 *   BENCH_PG_DSN     pg_connect string of the pgsql row's user (bench, not tetherd's, as for mysqli)
 *   BENCH_PG_ADMIN_DSN                                      pg_connect string of a user that may read pg_stat_activity
 *   CLK_TCK          clock ticks per second of /proc/<pid>/stat (getconf CLK_TCK; 100)
 *   BENCH_TMPDIR     where the load workers leave their latencies (the system's temp dir)
 *   BENCH_NO_CLIENT=1  skip the Tether PHP client (raw frames only), as when it is not usable
 *
 * Pinned mode (started by the main process under taskset, once the servers are pinned):
 *   php bench.php --pinned KEY,KEY,... ITERATIONS WARMUP ROUNDS
 * checks that it runs on PIN_CPU alone, measures those rows as the unpinned ones are and prints them as JSON.
 *
 * Worker mode (the loaded runs start these with proc_open):
 *   php bench.php --worker OP VIA COUNT LATFILE
 * sets up, warms up, prints "ready", waits for a line on stdin, makes COUNT calls, writes their latencies (ns,
 * packed uint32) to LATFILE and prints one JSON line with its start/end hrtime and its own CPU time.
 */

const SQL_POINT = 'SELECT id, name, score, created FROM bench_kv WHERE id = ?';
const SQL_POINT_PG = 'SELECT id, name, score, created FROM bench_kv WHERE id = $1';
const TABLE_ROWS = 10000;
const REFERENCE = 'mysqli-p-prepared';
/** The CPU the pinned rows run on, and those rows (the ones the solo targets need; the p: and new-connection rows not). */
const PIN_CPU = 0;
/** CACHED_IDS is how many rows the cache-hit rows read: few enough for the warm-up to cache every one. */
const CACHED_IDS = 50;
const PINNED_ROWS = ['tether-ping-raw', 'tether-ping-client', 'tether-read-raw', 'tether-read-client', 'tether-read-cached', 'mysqli-open-prepared',
    'tether-pg-read-raw', 'tether-pg-read-client', 'pg-open-prepared'];

// ---------------------------------------------------------------------------------------------------------------
// Configuration

function env(string $name, ?string $default = null): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        if ($default === null) {
            fwrite(STDERR, "bench.php: environment variable $name is required (run bench/cli/run.sh)\n");
            exit(2);
        }
        return $default;
    }
    return $v;
}

final class Cfg
{
    public static string $tetherSocket;
    public static int $tetherdPid;
    public static string $dbSocket;
    public static int $mariadbPid;
    public static string $dbName;
    public static string $tetherDbUser;
    public static string $user;
    public static string $pass;
    public static string $adminUser;
    public static string $adminPass;
    public static int $clkTck;
    public static int $pgPid;
    public static string $pgDsn;
    public static string $pgAdminDsn;

    public static function load(): void
    {
        self::$tetherSocket = env('TETHER_SOCKET');
        self::$tetherdPid = (int) env('TETHERD_PID');
        self::$dbSocket = env('MARIADB_SOCKET');
        self::$mariadbPid = (int) env('MARIADB_PID');
        self::$dbName = env('BENCH_DB_NAME', 'tether_test');
        self::$tetherDbUser = env('BENCH_TETHER_DB_USER', 'tether');
        self::$user = env('BENCH_MYSQLI_USER', 'bench');
        self::$pass = env('BENCH_MYSQLI_PASSWORD', 'bench');
        self::$adminUser = env('BENCH_ADMIN_USER', 'root');
        self::$adminPass = getenv('BENCH_ADMIN_PASSWORD') ?: '';
        self::$clkTck = (int) env('CLK_TCK', '100');
        self::$pgPid = (int) env('PG_PID');
        self::$pgDsn = env('BENCH_PG_DSN');
        self::$pgAdminDsn = env('BENCH_PG_ADMIN_DSN');
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Process accounting from /proc

/**
 * thread_stats returns, summed over the process's live threads, the CPU time in ns (/proc/PID/task/TID/schedstat,
 * first field: ns resolution where utime+stime has 10 ms ticks) and the context switches (voluntary + not).
 *
 * @return array{0: int, 1: int}
 */
function thread_stats(int $pid): array
{
    $ns = 0;
    $ctx = 0;
    foreach (glob("/proc/$pid/task/*", GLOB_ONLYDIR) ?: [] as $task) {
        $s = @file_get_contents("$task/schedstat");
        if ($s !== false) {
            $ns += (int) $s;
        }
        $st = @file_get_contents("$task/status");
        if ($st !== false && preg_match_all('/^(?:nonvoluntary_|voluntary_)ctxt_switches:\s+(\d+)/m', $st, $m)) {
            $ctx += array_sum(array_map('intval', $m[1]));
        }
    }
    return [$ns, $ctx];
}

/** own_cpu_ticks returns this process's CPU time plus that of its waited-for children (the load workers), in ticks. */
function own_cpu_ticks(): float
{
    $us = 0.0;
    foreach ([0, 1] as $who) {
        $r = getrusage($who);
        $us += $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
    }
    return $us * Cfg::$clkTck / 1e6;
}

/** @return array{wall: float, machine: int, ours: float} */
function busy_snapshot(): array
{
    return ['wall' => microtime(true), 'machine' => machine_busy_ticks(),
        'ours' => own_cpu_ticks() + cpu_ticks(Cfg::$tetherdPid) + cpu_ticks(Cfg::$mariadbPid) + tree_cpu_ticks(Cfg::$pgPid)];
}

const STATUS_VARS = ['Connections', 'Questions', 'Com_select', 'Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close'];

/** @return array<string, int> */
function db_status(mysqli $admin, array $vars = STATUS_VARS): array
{
    $in = "'" . implode("','", $vars) . "'";
    $out = [];
    foreach ($admin->query("SHOW GLOBAL STATUS WHERE Variable_name IN ($in)")->fetch_all() as [$k, $v]) {
        $out[$k] = (int) $v;
    }
    return $out;
}

/** tether_conns counts the MariaDB connections of tetherd's user. */
function tether_conns(mysqli $admin): int
{
    $u = $admin->real_escape_string(Cfg::$tetherDbUser);
    return (int) $admin->query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '$u'")->fetch_row()[0];
}

/** tether_pg_conns counts the PostgreSQL connections of tetherd's user. */
function tether_pg_conns(PgSql\Connection $pgAdmin): int
{
    $r = pg_query_params($pgAdmin, 'SELECT count(*) FROM pg_stat_activity WHERE usename = $1', [Cfg::$tetherDbUser]);
    if ($r === false) {
        throw new RuntimeException('pg_stat_activity: ' . pg_last_error($pgAdmin));
    }
    return (int) pg_fetch_result($r, 0, 0);
}

/** snapshot reads every counter a Meter compares. @return array<string, int> */
function snapshot(mysqli $admin): array
{
    [$tns, $tctx] = thread_stats(Cfg::$tetherdPid);
    $s = [
        'tetherd_ticks' => cpu_ticks(Cfg::$tetherdPid),
        'tetherd_ns' => $tns,
        'tetherd_ctx' => $tctx,
        'mariadb_ticks' => cpu_ticks(Cfg::$mariadbPid),
        'pg_ticks' => tree_cpu_ticks(Cfg::$pgPid),
    ];
    foreach (db_status($admin) as $k => $v) {
        $s["db_$k"] = $v;
    }
    return $s;
}

/** Counters accumulates snapshot differences over one or more measured windows. */
final class Counters
{
    /** @var array<string, int> */
    public array $sum = [];
    private array $start;

    public function __construct(private mysqli $admin)
    {
    }

    public function start(): void
    {
        $this->start = snapshot($this->admin);
    }

    public function stop(): void
    {
        foreach (snapshot($this->admin) as $k => $v) {
            // Our own SHOW GLOBAL STATUS is counted in Questions; take it out.
            $this->sum[$k] = ($this->sum[$k] ?? 0) + $v - $this->start[$k] - ($k === 'db_Questions' ? 1 : 0);
        }
    }

    /** @return array<string, float> per-call figures */
    public function per(int $calls): array
    {
        $tick = 1e6 / Cfg::$clkTck;
        $out = [
            'tetherd_cpu_us' => $this->sum['tetherd_ticks'] * $tick / $calls,      // utime+stime
            'tetherd_cpu_us_ns' => $this->sum['tetherd_ns'] / 1000 / $calls,      // schedstat
            'tetherd_ctx' => $this->sum['tetherd_ctx'] / $calls,
            'mariadb_cpu_us' => $this->sum['mariadb_ticks'] * $tick / $calls,
            'pg_cpu_us' => $this->sum['pg_ticks'] * $tick / $calls,           // postmaster and backends
            'tetherd_ticks' => $this->sum['tetherd_ticks'],
        ];
        foreach ($this->sum as $k => $v) {
            if (str_starts_with($k, 'db_')) {
                $out[$k] = $v / $calls;
            }
        }
        return $out;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Tether over raw frames

final class RawTether
{
    /** @var resource */
    private $s;
    private int $id = 0;

    public function __construct(string $socket)
    {
        $s = stream_socket_client('unix://' . $socket, $errno, $errstr, 5, STREAM_CLIENT_CONNECT | STREAM_CLIENT_PERSISTENT);
        if ($s === false) {
            throw new RuntimeException("connect $socket: $errstr ($errno)");
        }
        stream_set_timeout($s, 30);
        $this->s = $s;
    }

    public function call(array $req): array
    {
        $p = msgpack_pack(['id' => ++$this->id] + $req);
        $frame = pack('N', strlen($p)) . $p;
        if (fwrite($this->s, $frame) !== strlen($frame)) {
            throw new RuntimeException('write to tetherd failed');
        }
        $reply = msgpack_unpack($this->readN(unpack('N', $this->readN(4))[1]));
        if (!is_array($reply) || ($reply['id'] ?? null) !== $this->id) {
            throw new RuntimeException('unexpected reply: ' . json_encode($reply));
        }
        if (isset($reply['error'])) {
            throw new RuntimeException('tetherd error: ' . json_encode($reply['error']));
        }
        return $reply;
    }

    private function readN(int $n): string
    {
        $buf = fread($this->s, $n);
        while ($buf !== false && strlen($buf) < $n) {
            $more = fread($this->s, $n - strlen($buf));
            if ($more === false || ($more === '' && (feof($this->s) || stream_get_meta_data($this->s)['timed_out']))) {
                $buf = false;
                break;
            }
            $buf .= $more;
        }
        if ($buf === false) {
            throw new RuntimeException('read from tetherd failed');
        }
        return $buf;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Tether PHP client

/** client_unusable loads clients/php (its autoload.php, else PSR-4 from src/) and returns null, or why Tether\Client cannot be used. */
function client_unusable(): ?string
{
    static $why = false;
    if ($why !== false) {
        return $why;
    }
    if (getenv('BENCH_NO_CLIENT') === '1') {
        return $why = 'disabled with BENCH_NO_CLIENT=1';
    }
    $dir = dirname(__DIR__, 2) . '/clients/php';
    if (is_file("$dir/autoload.php")) {
        require_once "$dir/autoload.php";
    } else {
        spl_autoload_register(static function (string $class) use ($dir): void {
            if (strncmp($class, 'Tether\\', 7) === 0) {
                $file = "$dir/src/" . str_replace('\\', '/', substr($class, 7)) . '.php';
                if (is_file($file)) {
                    require $file;
                }
            }
        });
    }
    try {
        if (!class_exists('Tether\\Client')) {
            return $why = 'clients/php/src/Client.php not found';
        }
        $c = new Tether\Client(['socket' => Cfg::$tetherSocket]);
        $c->ping();
        $row = $c->queryOne(SQL_POINT, [1]);
        if (($row['id'] ?? null) != 1) {
            return $why = 'Tether\\Client::queryOne returned ' . json_encode($row);
        }
    } catch (Throwable $e) {
        return $why = get_class($e) . ': ' . $e->getMessage();
    }
    return $why = null;
}

// ---------------------------------------------------------------------------------------------------------------
// The calls being measured. Each make() sets up and returns fn(int $id): void, which makes one call and checks it.

function mysqli_open(bool $persistent = false): mysqli
{
    return new mysqli(($persistent ? 'p:' : '') . 'localhost', Cfg::$user, Cfg::$pass, Cfg::$dbName, 0, Cfg::$dbSocket);
}

/** pg_open connects to PostgreSQL as the pgsql row's user; a new connection, never one pg_connect kept. */
function pg_open(): PgSql\Connection
{
    $c = pg_connect(Cfg::$pgDsn, PGSQL_CONNECT_FORCE_NEW);
    if ($c === false) {
        throw new RuntimeException('pg_connect failed (see the warning above)');
    }
    return $c;
}

function check_row(mixed $got, int $id): void
{
    if ($got != $id) {
        throw new RuntimeException("point read of id $id returned id " . var_export($got, true));
    }
}

/**
 * calls lists the latency rows, in the order they are printed; db is the database a row reads (null: none), so that
 * the MariaDB tables leave out the PostgreSQL rows.
 *
 * @return array<string, array{label: string, group: string, tether: bool, db: ?string, client?: bool, newconn?: bool, make: callable}>
 */
function calls(): array
{
    return [
        'tether-ping-raw' => ['label' => 'Tether ping, raw frames', 'group' => 'ping', 'tether' => true, 'db' => null, 'make' => static function () {
            $t = new RawTether(Cfg::$tetherSocket);
            return static function (int $id) use ($t): void {
                $t->call(['op' => 'ping']);
            };
        }],
        'tether-ping-client' => ['label' => 'Tether ping, PHP client', 'group' => 'ping', 'tether' => true, 'db' => null, 'client' => true, 'make' => static function () {
            $c = new Tether\Client(['socket' => Cfg::$tetherSocket]);
            return static function (int $id) use ($c): void {
                $c->ping();
            };
        }],
        'mysqli-ping-open' => ['label' => 'mysqli ping, open connection', 'group' => 'ping', 'tether' => false, 'db' => null, 'make' => static function () {
            $m = mysqli_open();
            return static function (int $id) use ($m): void {
                $m->ping();
            };
        }],
        'tether-read-raw' => ['label' => 'Tether point read, raw frames', 'group' => 'read', 'tether' => true, 'db' => 'mariadb', 'make' => static function () {
            $t = new RawTether(Cfg::$tetherSocket);
            return static function (int $id) use ($t): void {
                $r = $t->call(['op' => 'query', 'sql' => SQL_POINT, 'params' => [$id]]);
                check_row($r['rows'][0][0] ?? null, $id);
            };
        }],
        'tether-read-client' => ['label' => 'Tether point read, PHP client', 'group' => 'read', 'tether' => true, 'db' => 'mariadb', 'client' => true, 'make' => static function () {
            $c = new Tether\Client(['socket' => Cfg::$tetherSocket]);
            return static function (int $id) use ($c): void {
                check_row($c->queryOne(SQL_POINT, [$id])['id'] ?? null, $id);
            };
        }],
        // A read answered from tetherd's result cache (cacheTtlMs): the ids cycle through CACHED_IDS rows, which the
        // warm-up puts in the cache, so every measured call is a hit (issue 12: a hit should cost about a ping).
        'tether-read-cached' => ['label' => 'Tether point read, cache hit, PHP client', 'group' => 'read', 'tether' => true, 'db' => 'mariadb', 'client' => true, 'make' => static function () {
            $c = new Tether\Client(['socket' => Cfg::$tetherSocket]);
            return static function (int $id) use ($c): void {
                $hot = $id % CACHED_IDS + 1;
                check_row($c->queryOne(SQL_POINT, [$hot], null, null, 600000)['id'] ?? null, $hot);
            };
        }],
        'mysqli-new' => ['label' => 'mysqli new connection per call, prepared', 'group' => 'read', 'tether' => false, 'db' => 'mariadb', 'newconn' => true, 'make' => static function () {
            return static function (int $id): void {
                $m = mysqli_open();
                $st = $m->prepare(SQL_POINT);
                $st->bind_param('i', $id);
                $st->execute();
                check_row($st->get_result()->fetch_assoc()['id'] ?? null, $id);
                $st->close();
                $m->close();
            };
        }],
        'mysqli-p-prepared' => ['label' => 'mysqli p: per call, prepared', 'group' => 'read', 'tether' => false, 'db' => 'mariadb', 'make' => static function () {
            return static function (int $id): void {
                // Reusing a persistent link, mysqli sends COM_CHANGE_USER (a session reset with re-authentication).
                $m = mysqli_open(true);
                $st = $m->prepare(SQL_POINT);
                $st->bind_param('i', $id);
                $st->execute();
                check_row($st->get_result()->fetch_assoc()['id'] ?? null, $id);
                $st->close();
                $m->close(); // the link goes back to the process's pool, as at the end of a php-fpm request
            };
        }],
        'mysqli-p-query' => ['label' => 'mysqli p: per call, query (int-cast)', 'group' => 'read', 'tether' => false, 'db' => 'mariadb', 'make' => static function () {
            return static function (int $id): void {
                $m = mysqli_open(true);
                $r = $m->query('SELECT id, name, score, created FROM bench_kv WHERE id = ' . (int) $id);
                check_row($r->fetch_assoc()['id'] ?? null, $id);
                $r->free();
                $m->close();
            };
        }],
        'mysqli-open-prepared' => ['label' => 'mysqli open connection, prepared once', 'group' => 'read', 'tether' => false, 'db' => 'mariadb', 'make' => static function () {
            $m = mysqli_open();
            $st = $m->prepare(SQL_POINT);
            return static function (int $id) use ($m, $st): void {
                $st->bind_param('i', $id);
                $st->execute();
                check_row($st->get_result()->fetch_assoc()['id'] ?? null, $id);
            };
        }],
        'mysqli-open-query' => ['label' => 'mysqli open connection, query (int-cast)', 'group' => 'read', 'tether' => false, 'db' => 'mariadb', 'make' => static function () {
            $m = mysqli_open();
            return static function (int $id) use ($m): void {
                $r = $m->query('SELECT id, name, score, created FROM bench_kv WHERE id = ' . (int) $id);
                check_row($r->fetch_assoc()['id'] ?? null, $id);
                $r->free();
            };
        }],
        'tether-pg-read-raw' => ['label' => 'Tether point read, raw frames (PostgreSQL)', 'group' => 'read', 'tether' => true, 'db' => 'postgres', 'make' => static function () {
            $t = new RawTether(Cfg::$tetherSocket);
            return static function (int $id) use ($t): void {
                $r = $t->call(['op' => 'query', 'backend' => 'pg', 'sql' => SQL_POINT_PG, 'params' => [$id]]);
                check_row($r['rows'][0][0] ?? null, $id);
            };
        }],
        'tether-pg-read-client' => ['label' => 'Tether point read, PHP client (PostgreSQL)', 'group' => 'read', 'tether' => true, 'db' => 'postgres', 'client' => true, 'make' => static function () {
            $c = new Tether\Client(['socket' => Cfg::$tetherSocket]);
            return static function (int $id) use ($c): void {
                check_row($c->queryOne(SQL_POINT_PG, [$id], 'pg')['id'] ?? null, $id);
            };
        }],
        'pg-open-prepared' => ['label' => 'pg open connection, prepared once', 'group' => 'read', 'tether' => false, 'db' => 'postgres', 'make' => static function () {
            $c = pg_open();
            if (pg_prepare($c, 'point', SQL_POINT_PG) === false) {
                throw new RuntimeException('pg_prepare: ' . pg_last_error($c));
            }
            return static function (int $id) use ($c): void {
                $r = pg_execute($c, 'point', [$id]);
                if ($r === false) {
                    throw new RuntimeException('pg_execute: ' . pg_last_error($c));
                }
                check_row(pg_fetch_assoc($r)['id'] ?? null, $id);
                pg_free_result($r);
            };
        }],
    ];
}

/** random_ids returns $n primary keys, the same sequence for the same seed. */
function random_ids(int $n, int $seed): array
{
    mt_srand($seed);
    $ids = [];
    for ($i = 0; $i < $n; $i++) {
        $ids[] = mt_rand(1, TABLE_ROWS);
    }
    return $ids;
}

/** @param list<int> $lat latencies in ns @return array{p50: float, p99: float, mean: float} in us */
function summarize(array $lat): array
{
    sort($lat);
    $n = count($lat);
    $pct = static fn (float $p): float => $lat[min($n - 1, (int) floor($p * $n))] / 1000;
    return ['p50' => $pct(0.50), 'p99' => $pct(0.99), 'mean' => array_sum($lat) / $n / 1000];
}

// ---------------------------------------------------------------------------------------------------------------
// Solo latency rows, in rounds

/**
 * run_rows measures every row in $selected: a full warm-up each, then $rounds rounds in which every row makes its
 * share of the calls (after a short re-warm-up), each call timed alone.
 *
 * @param array<string, int> $selected key => iterations
 */
function run_rows(array $calls, array $selected, int $warmup, int $rounds, mysqli $admin): array
{
    $state = [];
    foreach ($selected as $key => $n) {
        $fn = ($calls[$key]['make'])();
        $w = min($warmup, $n);
        foreach (random_ids($w, crc32("warm $key")) as $id) {
            $fn($id);
        }
        $state[$key] = ['fn' => $fn, 'ids' => random_ids($n, crc32($key)), 'lat' => [], 'ctr' => new Counters($admin), 'done' => 0];
    }
    for ($r = 0; $r < $rounds; $r++) {
        foreach ($selected as $key => $n) {
            $st = &$state[$key];
            $share = intdiv($n * ($r + 1), $rounds) - intdiv($n * $r, $rounds);
            $fn = $st['fn'];
            foreach (random_ids(min(200, $warmup, $share), crc32("rewarm $key $r")) as $id) {
                $fn($id);
            }
            $ids = $st['ids'];
            $lat = &$st['lat'];
            $from = $st['done'];
            $to = $from + $share;
            $st['ctr']->start();
            for ($i = $from; $i < $to; $i++) {
                $id = $ids[$i];
                $t = hrtime(true);
                $fn($id);
                $lat[] = hrtime(true) - $t;
            }
            $st['ctr']->stop();
            $st['done'] = $to;
            unset($lat, $st);
        }
        progress(sprintf('round %d/%d done', $r + 1, $rounds));
    }
    $rows = [];
    foreach ($selected as $key => $n) {
        $call = $calls[$key];
        $rows[] = ['key' => $key, 'label' => $call['label'], 'group' => $call['group'], 'tether' => $call['tether'],
            'db' => $call['db'], 'iterations' => $n] + summarize($state[$key]['lat']) + $state[$key]['ctr']->per($n);
    }
    return $rows; // the closures die with $state: open connections close, the p: link stays cached
}

/**
 * run_pinned pins tetherd (all threads), mariadbd (all threads) and the postmaster with all its children to PIN_CPU,
 * measures the rows $keys ($iterations calls each) in a PHP process started under taskset -c PIN_CPU (pinned_main),
 * and puts every process's earlier affinity back, whatever happens; it fails if it cannot. Returns the rows, how
 * many server processes were pinned and the affinity they had before.
 *
 * @param list<string> $keys
 * @return array{rows: list<array>, processes: int, affinity_before: array<string, ?string>}
 */
function run_pinned(array $keys, int $iterations, int $warmup, int $rounds): array
{
    $pin = new CpuPin(PIN_CPU, [Cfg::$tetherdPid, Cfg::$mariadbPid], [Cfg::$pgPid]);
    try {
        $procs = $pin->pin();
        $cmd = ['taskset', '-c', (string) PIN_CPU, PHP_BINARY, '-d', 'memory_limit=512M', __FILE__, '--pinned',
            implode(',', $keys), (string) $iterations, (string) $warmup, (string) $rounds];
        $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        if ($p === false) {
            throw new RuntimeException('proc_open failed');
        }
        $out = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        if (($rc = proc_close($p)) !== 0) {
            throw new RuntimeException("the pinned rows failed (exit $rc)");
        }
        $rows = json_decode((string) $out, true);
        if (!is_array($rows)) {
            throw new RuntimeException('the pinned rows printed no JSON: ' . var_export(substr((string) $out, 0, 200), true));
        }
    } finally {
        $problems = $pin->restore();
    }
    if ($problems) {
        throw new RuntimeException('cannot put back the CPU affinity of the servers: ' . implode('; ', $problems));
    }
    $before = $pin->affinityBefore();
    $children = array_diff_key($before, array_flip([Cfg::$tetherdPid, Cfg::$mariadbPid, Cfg::$pgPid]));
    return ['rows' => $rows, 'processes' => $procs, 'affinity_before' => ['tetherd' => $before[Cfg::$tetherdPid] ?? null,
        'mariadbd' => $before[Cfg::$mariadbPid] ?? null, 'postmaster' => $before[Cfg::$pgPid] ?? null,
        'postmaster children' => implode(' ', array_unique($children))]];
}

/** pinned_main is the process run_pinned starts: it measures the rows named in $argv on PIN_CPU and prints them as JSON. */
function pinned_main(array $argv): int
{
    [, , $keys, $iterations, $warmup, $rounds] = $argv + array_fill(0, 6, '');
    $cpus = cpus_allowed(getmypid());
    if ($cpus !== (string) PIN_CPU) {
        throw new RuntimeException('pinned rows: running on CPUs ' . var_export($cpus, true) . ', want ' . PIN_CPU . ' alone');
    }
    $calls = calls();
    $selected = [];
    foreach (explode(',', $keys) as $key) {
        if (!isset($calls[$key])) {
            throw new RuntimeException("pinned rows: unknown row $key");
        }
        if (!empty($calls[$key]['client']) && ($why = client_unusable()) !== null) {
            throw new RuntimeException("pinned rows: PHP client unusable: $why");
        }
        $selected[$key] = (int) $iterations;
    }
    $admin = new mysqli('localhost', Cfg::$adminUser, Cfg::$adminPass, '', 0, Cfg::$dbSocket);
    $rows = run_rows($calls, $selected, (int) $warmup, max(1, (int) $rounds), $admin);
    echo json_encode($rows), "\n";
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Loaded runs: N worker processes at once, COUNT calls each

/**
 * run_load starts $procs workers making $count calls each (op ping, read or pgread; via raw, client or mysqli-p), lets
 * them go at once and returns the calls/s, latencies and per-call CPU of the run, and the most backend connections
 * of tetherd's user seen on MariaDB and PostgreSQL meanwhile.
 */
function run_load(string $label, string $op, string $via, int $procs, int $count, mysqli $admin, PgSql\Connection $pgAdmin): array
{
    $workers = [];
    for ($w = 0; $w < $procs; $w++) {
        $latFile = tempnam(getenv('BENCH_TMPDIR') ?: sys_get_temp_dir(), 'tether-bench-lat.');
        $cmd = [PHP_BINARY, '-d', 'memory_limit=512M', __FILE__, '--worker', $op, $via, (string) $count, $latFile];
        $p = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        if ($p === false) {
            throw new RuntimeException('proc_open failed');
        }
        $workers[] = ['proc' => $p, 'in' => $pipes[0], 'out' => $pipes[1], 'lat' => $latFile];
    }
    foreach ($workers as $w) {
        $line = fgets($w['out']);
        if (trim((string) $line) !== 'ready') {
            throw new RuntimeException("load worker ($op/$via) failed to start: " . var_export($line, true));
        }
    }
    $ctr = new Counters($admin);
    $ctr->start();
    $maxConns = tether_conns($admin);
    $maxPgConns = tether_pg_conns($pgAdmin);
    foreach ($workers as $w) {
        fwrite($w['in'], "go\n");
        fflush($w['in']);
    }
    // Wait for every worker's report, counting tetherd's backend connections every 20 ms meanwhile.
    $results = [];
    $pending = array_keys($workers);
    while ($pending) {
        $read = array_map(static fn ($i) => $workers[$i]['out'], $pending);
        $w = $e = null;
        if (stream_select($read, $w, $e, 0, 20000) === 0) {
            $maxConns = max($maxConns, tether_conns($admin));
            $maxPgConns = max($maxPgConns, tether_pg_conns($pgAdmin));
            continue;
        }
        foreach ($pending as $j => $i) {
            if (in_array($workers[$i]['out'], $read, true)) {
                $line = fgets($workers[$i]['out']);
                $r = json_decode((string) $line, true);
                if (!is_array($r)) {
                    throw new RuntimeException("load worker ($op/$via) failed: " . var_export($line, true));
                }
                $results[] = $r;
                unset($pending[$j]);
            }
        }
    }
    $ctr->stop();
    $maxConns = max($maxConns, tether_conns($admin));
    $maxPgConns = max($maxPgConns, tether_pg_conns($pgAdmin));
    $total = $procs * $count;
    $lat = [];
    foreach ($workers as $w) {
        fclose($w['in']);
        fclose($w['out']);
        if (($rc = proc_close($w['proc'])) !== 0) {
            throw new RuntimeException("load worker ($op/$via) exited with $rc");
        }
        $lat = array_merge($lat, array_values(unpack('V*', file_get_contents($w['lat']))));
        unlink($w['lat']);
    }
    $wall = (max(array_column($results, 'end')) - min(array_column($results, 'start'))) / 1e9;
    return ['label' => $label, 'op' => $op, 'via' => $via, 'procs' => $procs, 'requests' => $total, 'wall_s' => $wall,
        'rps' => $total / $wall, 'php_cpu_us' => array_sum(array_column($results, 'cpu_us')) / $total,
        'tether_conns_max' => $maxConns, 'tether_pg_conns_max' => $maxPgConns] + summarize($lat) + $ctr->per($total);
}

function worker_main(array $argv): int
{
    [, , $op, $via, $count, $latFile] = $argv;
    $count = (int) $count;
    $key = match ([$op, $via]) {
        ['ping', 'raw'] => 'tether-ping-raw',
        ['ping', 'client'] => 'tether-ping-client',
        ['read', 'raw'] => 'tether-read-raw',
        ['read', 'client'] => 'tether-read-client',
        ['cached', 'client'], ['cached', 'raw'] => 'tether-read-cached',
        ['pgread', 'raw'] => 'tether-pg-read-raw',
        ['pgread', 'client'] => 'tether-pg-read-client',
        ['read', 'mysqli-p'] => 'mysqli-p-prepared',
        default => throw new RuntimeException("unknown worker $op/$via"),
    };
    if ($via === 'client' && ($why = client_unusable()) !== null) {
        throw new RuntimeException("PHP client unusable: $why");
    }
    $fn = (calls()[$key]['make'])();
    $ids = random_ids($count + 500, getmypid());
    for ($i = 0; $i < 500; $i++) {
        $fn($ids[$count + $i]);
    }
    echo "ready\n";
    fgets(STDIN);
    $lat = array_fill(0, $count, 0);
    $cpu0 = rusage_us();
    $start = hrtime(true);
    for ($i = 0; $i < $count; $i++) {
        $id = $ids[$i];
        $t = hrtime(true);
        $fn($id);
        $lat[$i] = hrtime(true) - $t;
    }
    $end = hrtime(true);
    $cpu = rusage_us() - $cpu0;
    file_put_contents($latFile, pack('V*', ...$lat));
    echo json_encode(['start' => $start, 'end' => $end, 'cpu_us' => $cpu]), "\n";
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Output

function f(float $v, int $dec = 1): string
{
    return number_format($v, $dec, '.', '');
}

/** fv formats $v with $dec decimals, or more (up to 4) where rounding would show $limit for a value that is not. */
function fv(float $v, float $limit, int $dec): string
{
    while ($dec < 4 && $v != $limit && (float) f($v, $dec) == $limit) {
        $dec++;
    }
    return f($v, $dec);
}

/**
 * solo_checks computes, from the solo rows in $byKey, for MariaDB and PostgreSQL (through the PHP client, else raw
 * frames): 2. tetherd's context switches per point read, each a hand-off between tetherd's threads or a wait on the
 * backend (limit 2); 3. the read's p50 over the p50 of its two hops, PHP to tetherd (a ping) and tetherd to the
 * database over an open connection with the statement prepared (what the open-connection row pays) (limit 1.3x).
 * Rows that were skipped give no entry.
 *
 * @return list<array{0: string, 1: string, 2: float, 3: float, 4: string}> what, value shown, value, limit, limit shown
 */
function solo_checks(array $byKey): array
{
    $via = isset($byKey['tether-read-client']) ? 'client' : 'raw';
    // [solo read row, ping row of its path, open-connection row]
    $sql = [
        ["tether-read-$via", "tether-ping-$via", 'mysqli-open-prepared'],
        ["tether-pg-read-$via", "tether-ping-$via", 'pg-open-prepared'],
    ];
    $out = [];
    foreach ($sql as [$read]) {
        if (isset($byKey[$read])) {
            $v = $byKey[$read]['tetherd_ctx'];
            $out[] = ["tetherd context switches per solo call, {$byKey[$read]['label']}", fv($v, 2.0, 2), $v, 2.0, '2'];
        }
    }
    foreach ($sql as [$read, $ping, $open]) {
        if (isset($byKey[$read], $byKey[$ping], $byKey[$open])) {
            $r = $byKey[$read]['p50'];
            $base = $byKey[$ping]['p50'] + $byKey[$open]['p50'];
            $v = $r / $base;
            $out[] = ["{$byKey[$read]['label']} p50 / ({$byKey[$ping]['label']} p50 + {$byKey[$open]['label']} p50)",
                sprintf('%s / (%s + %s) us = %sx', f($r), f($byKey[$ping]['p50']), f($byKey[$open]['p50']), fv($v, 1.3, 2)), $v, 1.3, '1.3x'];
        }
    }
    return $out;
}

/**
 * targets judges one run against the goals set for tetherd, each from rows of that same run, and returns one entry
 * per goal: the markdown line, and value, limit and met for the JSON (value and met null when the run cannot tell,
 * e.g. no clock tick of tetherd CPU during the pings of a --quick run). Rows that were skipped give no entry. The
 * solo targets of tetherd's SQL layer (context switches, read p50 against its two hops) are judged from the rows
 * pinned to one CPU ($pinnedRows); the comparison with mysqli p: from the unpinned rows, as mysqli p: is not pinned.
 *
 * @return list<array{line: string, target: string, value: ?float, limit: float, met: ?bool}>
 */
function targets(array $rows, array $pinnedRows, array $loads): array
{
    $byKey = array_column($rows, null, 'key');
    $out = [];
    $add = static function (string $what, string $shown, ?float $v, float $limit, string $limitShown, string $why = '') use (&$out): void {
        $verdict = $v === null ? "cannot tell ($why)" : ($v <= $limit ? 'met' : '**not met**');
        $out[] = ['line' => "- $what: **$shown** (target <= $limitShown): $verdict", 'target' => $what, 'value' => $v,
            'limit' => $limit, 'met' => $v === null ? null : $v <= $limit];
    };
    $load = [];
    foreach ($loads as $l) {
        if ($l['via'] !== 'mysqli-p') {
            $load[$l['op']] = $l;
        }
    }

    if (isset($load['ping'])) {
        $v = $load['ping']['tetherd_cpu_us'];
        $add('tetherd CPU per ping under load', f($v) . ' us', $v, 20, '20 us');
    }
    $ref = $byKey[REFERENCE] ?? null;
    foreach (['tether-read-client', 'tether-read-raw'] as $k) {
        if (isset($byKey[$k]) && $ref) {
            $ratio = $byKey[$k]['p50'] / $ref['p50'];
            $add("{$byKey[$k]['label']} p50 / {$ref['label']} p50", fv($ratio, 1.0, 2), $ratio, 1.0, '1.00');
        }
    }

    // The same read on both SQL backends. 1. What a read costs tetherd beyond a ping: its SQL layer, under load
    // (utime+stime, as in the table).
    foreach (['MariaDB' => 'read', 'PostgreSQL' => 'pgread'] as $db => $op) {
        if (isset($load['ping'], $load[$op])) {
            $r = $load[$op]['tetherd_cpu_us'];
            $p = $load['ping']['tetherd_cpu_us'];
            $v = $load['ping']['tetherd_ticks'] > 0 ? $r / $p : null;
            $add("tetherd CPU per $db point read / per ping, under load", sprintf('%s / %s us = %sx', f($r), f($p), $v === null ? '-' : fv($v, 2.0, 2)),
                $v, 2.0, '2x', 'no clock tick of tetherd CPU during the pings: too few calls');
        }
    }
    // The result cache (issue 12): a hit should cost tetherd about what a ping does, and take about as long.
    if (isset($load['ping'], $load['cached']) && $load['ping']['tetherd_ticks'] > 0) {
        $h = $load['cached']['tetherd_cpu_us'];
        $p = $load['ping']['tetherd_cpu_us'];
        $add('tetherd CPU per cache hit / per ping, under load', sprintf('%s / %s us = %sx', f($h), f($p), fv($h / $p, 1.2, 2)), $h / $p, 1.2, '1.2x');
    }
    // Latency from the rows pinned to one CPU: unpinned, a solo call's p50 on this VM mostly measures vCPU
    // wake-ups (see the CLI section of docs/benchmarks.md). Both through the PHP client.
    $pinnedByKey = array_column($pinnedRows, null, 'key');
    if (isset($pinnedByKey['tether-read-cached'], $pinnedByKey['tether-ping-client'])) {
        $h = $pinnedByKey['tether-read-cached']['p50'];
        $p = $pinnedByKey['tether-ping-client']['p50'];
        $add("{$pinnedByKey['tether-read-cached']['label']} p50 / {$pinnedByKey['tether-ping-client']['label']} p50, pinned to one CPU",
            sprintf('%s / %s us = %sx', f($h), f($p), fv($h / $p, 1.2, 2)), $h / $p, 1.2, '1.2x');
    }
    // 2 and 3, from the rows pinned to one CPU.
    foreach (solo_checks(array_column($pinnedRows, null, 'key')) as [$what, $shown, $v, $limit, $limitShown]) {
        $add($what . ', pinned to one CPU', $shown, $v, $limit, $limitShown);
    }
    return $out;
}

/** @param list<array> $compare solo_checks() of the unpinned rows */
function print_report(array $rows, array $pinned, array $loads, array $conns, array $targets, array $compare, array $opt, ?string $clientWhy): void
{
    $byKey = array_column($rows, null, 'key');
    $ref = $byKey[REFERENCE]['p50'] ?? null;
    $refLabel = $byKey[REFERENCE]['label'] ?? REFERENCE;

    printf("Other processes used %.1f%% of the machine's CPU time during the %.0f s of measurement%s.\n\n", $opt['foreign_cpu_pct'], $opt['wall_s'],
        $opt['foreign_cpu_pct'] > 5 ? ' (**a busy machine: these numbers are skewed; run again when it is quiet**)' : '');
    echo "#### Latency: one PHP CLI process, one call at a time\n\n";
    printf("Wall time of each call (hrtime), measured in %d interleaved rounds after %d warm-up calls per row. "
        . "Point reads fetch one random row of %s by primary key, from MariaDB unless the row says PostgreSQL. Ratio: p50 / p50 of \"%s\". "
        . "Per call: tetherd's CPU (sum of /proc/PID/task/*/schedstat, ns resolution) and context switches (all threads), "
        . "mariadbd's CPU (utime+stime), postgres' CPU (utime+stime of the postmaster and its backends, exited ones included).\n\n",
        $opt['rounds'], $opt['warmup'], number_format(TABLE_ROWS), $refLabel);
    echo "| row | calls | p50 us | p99 us | mean us | p50 ratio to mysqli p: | tetherd CPU us/call | tetherd ctx sw/call | mariadbd CPU us/call | postgres CPU us/call |\n";
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    foreach ($rows as $r) {
        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", $r['label'], $r['iterations'], f($r['p50']), f($r['p99']), f($r['mean']),
            $ref ? f($r['p50'] / $ref, 2) : '-', $r['tether'] ? f($r['tetherd_cpu_us_ns']) : '-', $r['tether'] ? f($r['tetherd_ctx'], 2) : '-',
            f($r['mariadb_cpu_us']), f($r['pg_cpu_us']));
    }
    if ($clientWhy !== null) {
        echo "\nThe Tether PHP client rows were skipped: $clientWhy\n";
    }

    echo "\n#### Latency, pinned to one CPU\n\n";
    printf("Rows of the table above measured again, with every process involved pinned to CPU %d (taskset): tetherd and mariadbd with all their threads, "
        . "the PostgreSQL postmaster and its backends (%d server processes), and the PHP process making the calls; each one's "
        . "earlier CPU affinity is put back afterwards, before the runs under load. %d interleaved rounds after %d warm-up calls per row; "
        . "per call figures as above; unpinned p50: the same row in the table above. Unpinned, a lone call on this machine mostly measures how fast an idle vCPU wakes up, and "
        . "a Tether read wakes more processes than a ping or a direct read; on one CPU each hand-off costs a context switch "
        . "instead, so these rows show what a round trip costs, and the solo targets are judged from them.\n\n",
        PIN_CPU, $pinned['processes'], $opt['rounds'], $opt['warmup']);
    echo "| row | calls | p50 us | p99 us | mean us | unpinned p50 us | tetherd CPU us/call | tetherd ctx sw/call | mariadbd CPU us/call | postgres CPU us/call |\n";
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    foreach ($pinned['rows'] as $r) {
        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", $r['label'], $r['iterations'], f($r['p50']), f($r['p99']), f($r['mean']),
            isset($byKey[$r['key']]) ? f($byKey[$r['key']]['p50']) : '-', $r['tether'] ? f($r['tetherd_cpu_us_ns']) : '-',
            $r['tether'] ? f($r['tetherd_ctx'], 2) : '-', f($r['mariadb_cpu_us']), f($r['pg_cpu_us']));
    }

    echo "\n#### MariaDB work per call (SHOW GLOBAL STATUS deltas over each row)\n\n";
    echo "MariaDB counts no COM_CHANGE_USER: each reuse of a mysqli `p:` link sends one (session reset and "
        . "re-authentication, one more round trip), visible in the general log only.\n\n";
    echo "| row | Connections | Questions | Com_select | Com_stmt_prepare | Com_stmt_execute | Com_stmt_close |\n";
    echo "|---|---:|---:|---:|---:|---:|---:|\n";
    foreach ($rows as $r) {
        if ($r['db'] === 'postgres') {
            continue;
        }
        printf("| %s | %s | %s | %s | %s | %s | %s |\n", $r['label'], f($r['db_Connections'], 2), f($r['db_Questions'], 2),
            f($r['db_Com_select'], 2), f($r['db_Com_stmt_prepare'], 2), f($r['db_Com_stmt_execute'], 2), f($r['db_Com_stmt_close'], 2));
    }

    echo "\n#### Under load: {$opt['procs']} PHP CLI processes at once\n\n";
    echo "Each process makes its calls back to back. calls/s: all calls over the wall time of the run. Per call: "
        . "tetherd, mariadbd and postgres CPU from utime+stime (/proc/PID/stat; postgres: the postmaster and its backends), "
        . "tetherd's context switches (all threads), the PHP workers' own CPU (getrusage).\n\n";
    echo "| run | calls | wall s | calls/s | p50 us | p99 us | tetherd CPU us/call | tetherd ctx sw/call | mariadbd CPU us/call | postgres CPU us/call | PHP CPU us/call |\n";
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    foreach ($loads as $l) {
        $t = $l['via'] !== 'mysqli-p';
        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $l['label'], $l['requests'], f($l['wall_s'], 2), f($l['rps'], 0),
            f($l['p50']), f($l['p99']), $t ? f($l['tetherd_cpu_us']) : '-', $t ? f($l['tetherd_ctx'], 2) : '-',
            f($l['mariadb_cpu_us']), f($l['pg_cpu_us']), f($l['php_cpu_us']));
    }

    echo "\n#### Backend connections\n\n";
    printf("tetherd's pools: min_conns = max_conns = 4 on each database, user `%s` (the mysqli and pgsql rows use another user). "
        . "`FLUSH STATUS` before the loaded Tether MariaDB runs, then:\n\n", Cfg::$tetherDbUser);
    printf("- tetherd's connections (PROCESSLIST): %d before, at most %d during (sampled every 20 ms), %d after the loaded Tether runs; %d at the end of the benchmark\n",
        $conns['tether_before'], $conns['tether_max'], $conns['tether_after'], $conns['tether_end']);
    printf("- Max_used_connections over the loaded Tether runs: %d, with %d open when they began (tetherd's %d + the benchmark's own %d); Threads_connected after: %d\n",
        $conns['max_used'], $conns['threads_before'], $conns['tether_before'], $conns['threads_before'] - $conns['tether_before'], $conns['threads_after']);
    printf("- new MariaDB connections during the loaded Tether runs (%s calls): %d\n", number_format($conns['tether_calls']), $conns['new_conns']);
    printf("- tetherd's PostgreSQL connections (pg_stat_activity): %d before, at most %d during (sampled every 20 ms), %d after the loaded Tether PostgreSQL run\n",
        $conns['tether_pg_before'], $conns['tether_pg_max'], $conns['tether_pg_after']);

    echo "\n#### Targets\n\n";
    echo "Each judged from rows of this run; tetherd's CPU under load is utime+stime, as in the table above; the solo "
        . "context switches and read p50 against ping + open-connection read from the rows pinned to one CPU.\n\n";
    foreach ($targets as $t) {
        echo $t['line'], "\n";
    }
    foreach ($compare as [$what, $shown]) {
        echo "- for comparison, unpinned: $what: $shown\n";
    }
    $tr = $byKey['tether-read-client'] ?? $byKey['tether-read-raw'] ?? null;
    if ($tr && isset($byKey['mysqli-p-query'])) {
        printf("- for comparison, %s p50 / %s p50: %s\n", $tr['label'], $byKey['mysqli-p-query']['label'], f($tr['p50'] / $byKey['mysqli-p-query']['p50'], 2));
    }
    echo "\n"; // run.sh appends the Cassandra part's heading
}

// ---------------------------------------------------------------------------------------------------------------
// Main

function main(array $argv): int
{
    mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
    if (!function_exists('pg_connect')) {
        fwrite(STDERR, "bench.php: PHP's pgsql extension is not loaded (php8.2-pgsql; run.sh installs it)\n");
        return 2;
    }
    Cfg::load();
    if (($argv[1] ?? '') === '--worker') {
        return worker_main($argv);
    }
    if (($argv[1] ?? '') === '--pinned') {
        return pinned_main($argv);
    }

    $quick = getenv('BENCH_QUICK') === '1';
    $opt = [];
    $json = null;
    $args = array_slice($argv, 1);
    $intOpts = ['--iterations' => 'iterations', '--warmup' => 'warmup', '--rounds' => 'rounds', '--newconn-iterations' => 'newconn',
        '--load-procs' => 'procs', '--load-pings' => 'load_pings', '--load-reads' => 'load_reads'];
    while ($args) {
        $a = array_shift($args);
        if ($a === '--quick') {
            $quick = true;
        } elseif ($a === '--json') {
            $json = array_shift($args);
        } elseif (isset($intOpts[$a]) && $args && ctype_digit($args[0])) {
            $opt[$intOpts[$a]] = (int) array_shift($args);
        } else {
            fwrite(STDERR, "bench.php: bad argument $a\n");
            return 2;
        }
    }
    $opt += $quick
        ? ['iterations' => 1000, 'warmup' => 100, 'rounds' => 2, 'newconn' => 200, 'procs' => 4, 'load_pings' => 1000, 'load_reads' => 1000]
        : ['iterations' => 20000, 'warmup' => 1000, 'rounds' => 5, 'newconn' => 2000, 'procs' => 4, 'load_pings' => 50000, 'load_reads' => 20000];
    foreach ($opt as $k => $v) {
        if ($v < ($k === 'warmup' ? 0 : 1)) {
            fwrite(STDERR, "bench.php: $k must be at least 1\n");
            return 2;
        }
    }

    $busy0 = busy_snapshot();
    $admin = new mysqli('localhost', Cfg::$adminUser, Cfg::$adminPass, '', 0, Cfg::$dbSocket);
    $pgAdmin = pg_connect(Cfg::$pgAdminDsn, PGSQL_CONNECT_FORCE_NEW) ?: throw new RuntimeException('cannot connect to PostgreSQL as its admin');
    $clientWhy = client_unusable();
    if ($clientWhy !== null) {
        progress("the Tether PHP client is not usable, measuring raw frames only: $clientWhy");
    }
    $via = $clientWhy === null ? 'client' : 'raw';
    $viaLabel = $via === 'client' ? 'PHP client' : 'raw frames';
    $calls = calls();

    $selected = [];
    foreach ($calls as $key => $call) {
        if (!empty($call['client']) && $clientWhy !== null) {
            continue;
        }
        $selected[$key] = !empty($call['newconn']) ? min($opt['newconn'], $opt['iterations']) : $opt['iterations'];
    }
    $total = array_sum($selected);
    progress(sprintf('latency: %d rows, %s calls in %d rounds', count($selected), number_format($total), $opt['rounds']));
    $rows = run_rows($calls, $selected, $opt['warmup'], $opt['rounds'], $admin);

    // The solo rows again, every process involved pinned to one CPU; affinities are put back before the loaded runs.
    $pinKeys = array_values(array_intersect(array_keys($selected), PINNED_ROWS)); // in the order of calls()
    progress(sprintf('latency pinned to CPU %d: %d rows, %s calls in %d rounds', PIN_CPU, count($pinKeys),
        number_format(count($pinKeys) * $opt['iterations']), $opt['rounds']));
    $pinned = run_pinned($pinKeys, $opt['iterations'], $opt['warmup'], $opt['rounds']);
    progress(sprintf('pinned rows done; CPU affinity of the %d server processes put back', $pinned['processes']));

    // Loaded Tether runs, with nothing else talking to MariaDB: count tetherd's connections. First let the server
    // finish closing the connections of the rows above (a client's COM_QUIT does not wait for it), so that they
    // are not in the Max_used_connections that FLUSH STATUS starts from.
    $links = mysqli_get_links_stats();
    $ours = 1 + $links['active_plinks'] + $links['cached_plinks']; // this status connection and the p: link
    for ($deadline = microtime(true) + 3; microtime(true) < $deadline; usleep(20000)) {
        if (db_status($admin, ['Threads_connected'])['Threads_connected'] <= tether_conns($admin) + $ours) {
            break;
        }
    }
    $admin->query('FLUSH STATUS'); // Max_used_connections := connections open now
    $before = db_status($admin, ['Threads_connected', 'Connections']);
    $tetherBefore = tether_conns($admin);
    $loads = [];
    progress("load: {$opt['procs']} x {$opt['load_pings']} Tether pings ($viaLabel)");
    $loads[] = run_load("Tether ping ($viaLabel)", 'ping', $via, $opt['procs'], $opt['load_pings'], $admin, $pgAdmin);
    progress("load: {$opt['procs']} x {$opt['load_reads']} Tether point reads ($viaLabel)");
    $loads[] = run_load("Tether point read ($viaLabel)", 'read', $via, $opt['procs'], $opt['load_reads'], $admin, $pgAdmin);
    $after = db_status($admin, ['Threads_connected', 'Connections', 'Max_used_connections']);
    $conns = [
        'tether_before' => $tetherBefore,
        'tether_max' => max(array_column($loads, 'tether_conns_max')),
        'tether_after' => tether_conns($admin),
        'threads_before' => $before['Threads_connected'],
        'threads_after' => $after['Threads_connected'],
        'max_used' => $after['Max_used_connections'],
        'new_conns' => $after['Connections'] - $before['Connections'],
        'tether_calls' => $opt['procs'] * ($opt['load_pings'] + $opt['load_reads']),
    ];
    // After the MariaDB counters are read, so that they cover the MariaDB runs alone.
    $conns['tether_pg_before'] = tether_pg_conns($pgAdmin);
    progress("load: {$opt['procs']} x {$opt['load_reads']} Tether PostgreSQL point reads ($viaLabel)");
    $loads[] = run_load("Tether PostgreSQL point read ($viaLabel)", 'pgread', $via, $opt['procs'], $opt['load_reads'], $admin, $pgAdmin);
    $conns['tether_pg_max'] = end($loads)['tether_pg_conns_max'];
    $conns['tether_pg_after'] = tether_pg_conns($pgAdmin);
    progress("load: {$opt['procs']} x {$opt['load_pings']} Tether point reads answered from the cache");
    $loads[] = run_load('Tether point read, cache hit (PHP client)', 'cached', 'client', $opt['procs'], $opt['load_pings'], $admin, $pgAdmin);
    progress("load: {$opt['procs']} x {$opt['load_reads']} mysqli p: prepared point reads");
    $loads[] = run_load('mysqli p: point read, prepared', 'read', 'mysqli-p', $opt['procs'], $opt['load_reads'], $admin, $pgAdmin);
    $conns['tether_end'] = tether_conns($admin);
    $busy1 = busy_snapshot();
    $wall = $busy1['wall'] - $busy0['wall'];
    $foreign = max(0, ($busy1['machine'] - $busy0['machine']) - ($busy1['ours'] - $busy0['ours'])) / Cfg::$clkTck;
    $opt['foreign_cpu_pct'] = 100 * $foreign / $wall / (int) shell_exec('nproc');
    $opt['wall_s'] = $wall;

    $targets = targets($rows, $pinned['rows'], $loads);
    $compare = solo_checks(array_column($rows, null, 'key'));
    print_report($rows, $pinned, $loads, $conns, $targets, $compare, $opt + ['via' => $via], $clientWhy);
    if ($json !== null) {
        $targets = array_map(static fn ($t) => array_diff_key($t, ['line' => 0]), $targets);
        $compare = array_map(static fn ($c) => ['what' => $c[0], 'value' => $c[2], 'limit' => $c[3]], $compare);
        file_put_contents($json, json_encode(['options' => $opt, 'rows' => $rows,
            'pinned' => ['cpu' => PIN_CPU, 'processes' => $pinned['processes'], 'affinity_before' => $pinned['affinity_before'],
                'rows' => $pinned['rows']],
            'loads' => $loads, 'connections' => $conns, 'targets' => $targets, 'unpinned_comparison' => $compare,
            'client_unusable' => $clientWhy], JSON_PRETTY_PRINT) . "\n");
    }
    return 0;
}

exit(main($argv));
