<?php

/*
 * bench/wpqueries/driver.php: the WordPress front page's queries (captured by capture.php) replayed through wpdb,
 * natively (WordPress's own wpdb on mysqli, straight to MariaDB) and through Tether's drop-in (Tether\WordPress\Wpdb,
 * through tetherd), in one PHP process, with the CPU each spends: this process's (getrusage) and tetherd's
 * (/proc/PID/stat). Also the page of 20 prepared point reads: PDO persistent against the Tether client.
 *
 *   php bench/wpqueries/driver.php CONFIG_PHP QUERIES_JSON TETHERD_PID [--pages N] [--rounds R] [--only ROW,...]
 *       [--per-query] [--json] [--procs P]
 *   php bench/wpqueries/driver.php --summary BEFORE_JSONL AFTER_JSONL
 *
 * Each round runs, one after the other (order alternating by round): N pages of the 30 queries natively, N pages
 * through the drop-in (each on one connection opened once), N pages of 20 point reads with PDO, N pages with the Tether client one call each, N with the 20 in one batch. Each query goes through
 * $wpdb->get_results() (query() and its result building, as WordPress's own get_results()/get_var()/get_col() do).
 * It prints the median over the rounds of: PHP us per query, tetherd us per query, and their sum
 * With --only page-native,page-tether: N pages each with its own connect and close as WordPress has them per request
 * (wpdb's constructor and close(); per-query figures still divided by the 30 queries), natively and through the
 * drop-in: run apart from the other rows (run.sh does).
 * (--json: one line of JSON; --summary: the medians of two builds' --json lines, as run.sh --before writes them).
 * --procs P: P processes run each row at once (tetherd under load); the figures are per query over all of them.
 * --per-query: each of the page's queries alone instead, PHP (both ways) and tetherd us per run.
 */

declare(strict_types=1);

require __DIR__ . '/../lib/proc.php';

function median(array $v): float
{
    sort($v);
    $n = count($v);
    return $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
}

/** report prints the table and the two ratios the issue sets targets for, from each row's medians. */
function report(array $med, int $queries): void
{
    printf("%-13s %12s %14s %12s %12s\n", 'row', 'PHP us/query', 'tetherd us/q', 'sum us/q', 'wall us/q');
    foreach ($med as $name => $m) {
        printf("%-13s %12.1f %14.1f %12.1f %12.1f\n", $name, $m['php'], $m['tetherd'], $m['php'] + $m['tetherd'], $m['wall']);
    }
    if (isset($med['wp-tether'], $med['wp-native'])) {
        printf("WordPress: drop-in PHP over wpdb+mysqli: %+.1f us/query; tetherd %.1f us/query (%d queries a page)\n",
            $med['wp-tether']['php'] - $med['wp-native']['php'], $med['wp-tether']['tetherd'], $queries);
    }
    if (isset($med['page-tether'], $med['page-native'])) {
        printf("WordPress page with its connect: drop-in PHP over wpdb+mysqli: %+.1f us/query; tetherd %.1f us/query\n",
            $med['page-tether']['php'] - $med['page-native']['php'], $med['page-tether']['tetherd']);
    }
    foreach (['point-tether' => '20 point reads', 'point-batch' => '20 point reads in one batch'] as $row => $what) {
        if (isset($med[$row], $med['point-pdo'])) {
            printf("%s: (tetherd + PHP) / PDO persistent PHP = %.2fx\n", $what, ($med[$row]['php'] + $med[$row]['tetherd']) / $med['point-pdo']['php']);
        }
    }
}

if (($argv[1] ?? '') === '--summary') {
    // --summary BEFORE_JSONL AFTER_JSONL: the medians of each build's rounds (lines written with --json).
    foreach (['before' => $argv[2], 'after' => $argv[3]] as $build => $file) {
        $rounds = array_map(static fn (string $l): array => json_decode($l, true, 512, JSON_THROW_ON_ERROR), file($file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES));
        // Each line has some rows (the page-* rows run in a process of their own): the median of each row's lines.
        $byRow = [];
        foreach ($rounds as $line) {
            foreach ($line['rows'] as $name => $m) {
                $byRow[$name][] = $m;
            }
        }
        $med = [];
        foreach ($byRow as $name => $ms) {
            foreach (['php', 'tetherd', 'wall'] as $k) {
                $med[$name][$k] = median(array_column($ms, $k));
            }
        }
        echo "\n$build (median of " . count(reset($byRow)) . " rounds):\n";
        report($med, $rounds[0]['queries']);
    }
    exit(0);
}

$args = $argv;
$pages = 200;
$rounds = 5;
$only = null;
$procs = 1;
foreach ($args as $i => $a) {
    if ($a === '--only') {
        $only = explode(',', $args[$i + 1]);
    }
    if ($a === '--procs') {
        $procs = (int) $args[$i + 1];
    }
    if ($a === '--pages') {
        $pages = (int) $args[$i + 1];
    } elseif ($a === '--rounds') {
        $rounds = (int) $args[$i + 1];
    }
}
[, $configFile, $queriesFile, $tetherdPid] = $argv + [null, null, null, null];
if ($configFile === null || $queriesFile === null || $tetherdPid === null) {
    fwrite(STDERR, "usage: php driver.php CONFIG_PHP QUERIES_JSON TETHERD_PID [--pages N] [--rounds R]\n");
    exit(2);
}
$tetherdPid = (int) $tetherdPid;
$channel = null; // a worker's socket to the parent, with --procs
if ($procs > 1) {
    // --procs N: N worker processes run each row's pages at the same time (a loaded tetherd, as under a web server:
    // its loop turns serve several clients' events); this parent only starts each row in all of them and reads
    // tetherd's CPU around it. Each worker reports its own PHP CPU.
    $workers = [];
    for ($w = 0; $w < $procs; $w++) {
        [$parentEnd, $childEnd] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $pid = pcntl_fork();
        if ($pid === 0) {
            fclose($parentEnd);
            $channel = $childEnd;
            break;
        }
        fclose($childEnd);
        $workers[$pid] = $parentEnd;
    }
    if ($channel === null) {
        $names = $only ?? ['wp-native', 'wp-tether', 'point-pdo', 'point-tether', 'point-batch'];
        $tick = 1e6 / (int) (getenv('CLK_TCK') ?: 100);
        foreach ($workers as $ch) {
            if (trim((string) fgets($ch)) !== 'ready') {
                fwrite(STDERR, "driver: a worker failed to start\n");
                exit(1);
            }
        }
        $results = [];
        for ($r = 0; $r < $rounds; $r++) {
            foreach ($r % 2 === 1 ? array_reverse($names) : $names as $name) {
                $td0 = cpu_ticks($tetherdPid) * $tick;
                $t0 = hrtime(true);
                foreach ($workers as $ch) {
                    fwrite($ch, "run $name\n");
                }
                $n = 0;
                $php = 0.0;
                foreach ($workers as $ch) {
                    [, $wn, $wphp] = explode(' ', trim((string) fgets($ch)));
                    $n += (int) $wn;
                    $php += (float) $wphp;
                }
                $wall = (hrtime(true) - $t0) / 1e3;
                $td1 = cpu_ticks($tetherdPid) * $tick;
                $results[$name][] = ['php' => $php / $n, 'tetherd' => ($td1 - $td0) / $n, 'wall' => $wall / $n];
            }
            progress('round ' . ($r + 1) . "/$rounds done ($procs processes)");
        }
        foreach ($workers as $ch) {
            fwrite($ch, "quit\n");
        }
        while (pcntl_wait($status) > 0) {
        }
        $med = [];
        foreach ($results as $name => $rs) {
            foreach (['php', 'tetherd', 'wall'] as $k) {
                $med[$name][$k] = median(array_column($rs, $k));
            }
        }
        if (in_array('--json', $args, true)) {
            echo json_encode(['queries' => count(json_decode((string) file_get_contents($queriesFile))), 'rows' => $med]), "\n";
            exit(0);
        }
        report($med, count(json_decode((string) file_get_contents($queriesFile))));
        exit(0);
    }
}
$cfg = require $configFile;
$queries = json_decode((string) file_get_contents($queriesFile), true, 512, JSON_THROW_ON_ERROR);

$_SERVER['HTTP_HOST'] = '127.0.0.1:9';
$_SERVER['REQUEST_URI'] = '/wp-tether/';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
$_SERVER['REQUEST_METHOD'] = 'GET';
define('BENCH_WP_SITE', 'tether');
// Loads WordPress with the drop-in as $wpdb (wp-content/db.php), connected to tetherd once.
require dirname(realpath($configFile)) . '/wp/wp-config.php';
$tether = $GLOBALS['wpdb'];
if (!$tether instanceof Tether\WordPress\Wpdb) {
    fwrite(STDERR, "driver: \$wpdb is not the drop-in\n");
    exit(1);
}
$native = new wpdb(DB_USER, DB_PASSWORD, DB_NAME, DB_HOST);

// Both ways must return the same rows.
foreach ($queries as $q) {
    // As objects (OBJECT: by name): wpdb over mysqli builds ARRAY_N from them, losing repeated column names. As sets:
    // ORDER BY t.name leaves ties in any order.
    $a = array_map('serialize', $native->get_results($q));
    $b = array_map('serialize', $tether->get_results($q));
    sort($a);
    sort($b);
    if ($a !== $b) {
        fwrite(STDERR, "driver: the two ways differ on: $q\n");
        exit(1);
    }
}

// The point reads: bench/web's table and statement.
$pdo = new PDO("mysql:unix_socket={$cfg['mysql_socket']};dbname={$cfg['db_name']}", DB_USER, DB_PASSWORD, [
    PDO::ATTR_PERSISTENT => true,
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
]);
$pdo->exec('CREATE TABLE IF NOT EXISTS bench_kv (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, score INT NOT NULL, created DATETIME NOT NULL)');
if ((int) $pdo->query('SELECT COUNT(*) FROM bench_kv')->fetchColumn() < 10000) {
    $pdo->exec('DELETE FROM bench_kv');
    for ($i = 1; $i <= 10000; $i += 500) {
        $vals = [];
        for ($j = $i; $j < $i + 500; $j++) {
            $vals[] = sprintf("(%d, 'name-%d', %d, '2026-01-01 00:00:00' + INTERVAL %d SECOND)", $j, $j, $j % 1000, $j);
        }
        $pdo->exec('INSERT INTO bench_kv VALUES ' . implode(',', $vals));
    }
}
const SQL_POINT = 'SELECT id, name, score, created FROM bench_kv WHERE id = ?';
$client = new Tether\Client(['socket' => $cfg['tether_socket']]);

/**
 * cpu returns [this process's CPU, tetherd's CPU] in microseconds; this process's counts its children's too (the
 * page-* rows' pages), less an empty child's for each (see onePage()).
 */
function cpu(int $tetherdPid): array
{
    global $childOverhead;
    static $tick = null;
    $tick ??= 1e6 / (int) (getenv('CLK_TCK') ?: 100);
    $us = static fn (array $r): float => $r['ru_utime.tv_sec'] * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_sec'] * 1e6 + $r['ru_stime.tv_usec'];
    return [$us(getrusage()) + $us(getrusage(1)) - $childOverhead, cpu_ticks($tetherdPid) * $tick];
}

$childOverhead = 0.0;
$children = 0;

/** onePage runs $page in a child process and waits for it; it returns $queries. */
function onePage(callable $page, int $queries): int
{
    global $childOverhead, $children, $emptyChild;
    $pid = pcntl_fork();
    if ($pid === 0) {
        $page();
        posix_kill(posix_getpid(), SIGKILL); // no shutdown functions, destructors or flushes: the page's work only
    }
    pcntl_waitpid($pid, $status);
    $childOverhead += $emptyChild;
    return $queries;
}

// What an empty child costs (fork, exit, its copy-on-write faults), subtracted per page.
$emptyChild = 0.0;
$r0 = getrusage(1);
for ($i = 0; $i < 50; $i++) {
    onePage(static function (): void {
    }, 0);
}
$r1 = getrusage(1);
$emptyChild = (($r1['ru_utime.tv_sec'] - $r0['ru_utime.tv_sec']) * 1e6 + $r1['ru_utime.tv_usec'] - $r0['ru_utime.tv_usec']
    + ($r1['ru_stime.tv_sec'] - $r0['ru_stime.tv_sec']) * 1e6 + $r1['ru_stime.tv_usec'] - $r0['ru_stime.tv_usec']) / 50;

$rows = [
    'wp-native' => function () use ($native, $queries): int {
        foreach ($queries as $q) {
            $native->get_results($q);
        }
        return count($queries);
    },
    'wp-tether' => function () use ($tether, $queries): int {
        foreach ($queries as $q) {
            $tether->get_results($q);
        }
        return count($queries);
    },
    // A whole page's database work as WordPress does it per request: connect (wpdb's constructor: connect, SET
    // NAMES, sql_mode), the queries, close (mysqli: a new connection; the drop-in: a new socket to tetherd). Each
    // page in a child process of its own, as a request has its own wpdb (instances left behind in one process slow
    // WordPress down); its CPU is read from getrusage(RUSAGE_CHILDREN), less an empty child's (onePage()).
    'page-native' => fn (): int => onePage(static function () use ($queries): void {
        $db = new wpdb(DB_USER, DB_PASSWORD, DB_NAME, DB_HOST);
        foreach ($queries as $q) {
            $db->get_results($q);
        }
        $db->close();
    }, count($queries)),
    'page-tether' => fn (): int => onePage(static function () use ($queries): void {
        $db = Tether\WordPress\Wpdb::fromWordPressConfig();
        foreach ($queries as $q) {
            $db->get_results($q);
        }
        $db->close();
    }, count($queries)),
    'point-pdo' => function () use ($pdo): int {
        $st = $pdo->prepare(SQL_POINT);
        $id = random_int(1, 9980);
        for ($i = 0; $i < 20; $i++) {
            $st->execute([$id + $i]);
            $st->fetch(PDO::FETCH_ASSOC);
        }
        return 20;
    },
    'point-tether' => function () use ($client): int {
        $id = random_int(1, 9980);
        for ($i = 0; $i < 20; $i++) {
            $client->queryOne(SQL_POINT, [$id + $i]);
        }
        return 20;
    },
    // The same 20 reads in one batch: one request to tetherd for the page (the hop paid once).
    'point-batch' => function () use ($client): int {
        $id = random_int(1, 9980);
        $ops = [];
        for ($i = 0; $i < 20; $i++) {
            $ops[] = Tether\Batch\Operation::query(SQL_POINT, [$id + $i]);
        }
        foreach ($client->batch($ops) as $result) {
            if ($result instanceof Throwable) {
                throw $result;
            }
        }
        return 20;
    },
];
if (in_array('--per-query', $args, true)) {
    // Each query alone, $pages times in a row: which of the page's queries cost what.
    printf("%4s %10s %10s %10s %7s  %s\n", '#', 'native PHP', 'tether PHP', 'tetherd', 'rows', 'query');
    foreach ($queries as $k => $q) {
        $m = [];
        foreach (['native' => $native, 'tether' => $tether] as $way => $db) {
            [$php0, $td0] = cpu($tetherdPid);
            for ($p = 0; $p < $pages; $p++) {
                $db->get_results($q);
            }
            [$php1, $td1] = cpu($tetherdPid);
            $m[$way] = [($php1 - $php0) / $pages, ($td1 - $td0) / $pages];
        }
        printf("%4d %10.1f %10.1f %10.1f %7d  %s\n", $k, $m['native'][0], $m['tether'][0], $m['tether'][1], $tether->num_rows, substr(trim(preg_replace('/\s+/', ' ', $q)), 0, 70));
    }
    exit(0);
}
// The page-* rows only when asked for: their connect per page leaves WordPress state behind (wpdb's constructor
// registers a shutdown function per instance) that slows the other rows of the same process.
$rows = array_intersect_key($rows, array_flip($only ?? ['wp-native', 'wp-tether', 'point-pdo', 'point-tether', 'point-batch']));
foreach ($rows as $fn) { // warm-up
    for ($p = 0; $p < 20; $p++) {
        $fn();
    }
}
if ($channel !== null) {
    fwrite($channel, "ready\n");
    while (($line = fgets($channel)) !== false && str_starts_with($line, 'run ')) {
        $name = trim(substr($line, 4));
        [$php0] = cpu($tetherdPid);
        $n = 0;
        for ($p = 0; $p < $pages; $p++) {
            $n += $rows[$name]();
        }
        [$php1] = cpu($tetherdPid);
        fwrite($channel, sprintf("done %d %.1f\n", $n, $php1 - $php0));
    }
    exit(0);
}
$results = [];
for ($r = 0; $r < $rounds; $r++) {
    $names = array_keys($rows);
    if ($r % 2 === 1) {
        $names = array_reverse($names);
    }
    foreach ($names as $name) {
        [$php0, $td0] = cpu($tetherdPid);
        $t0 = hrtime(true);
        $n = 0;
        for ($p = 0; $p < $pages; $p++) {
            $n += $rows[$name]();
        }
        $wall = (hrtime(true) - $t0) / 1e3;
        [$php1, $td1] = cpu($tetherdPid);
        $results[$name][] = ['php' => ($php1 - $php0) / $n, 'tetherd' => ($td1 - $td0) / $n, 'wall' => $wall / $n];
    }
    progress("round " . ($r + 1) . "/$rounds done");
}

$med = [];
foreach ($results as $name => $rs) {
    foreach (['php', 'tetherd', 'wall'] as $k) {
        $med[$name][$k] = median(array_column($rs, $k));
    }
}
if (in_array('--json', $args, true)) {
    echo json_encode(['queries' => count($queries), 'rows' => $med]), "\n";
    exit(0);
}
report($med, count($queries));
