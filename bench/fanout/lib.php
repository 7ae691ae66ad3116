<?php

declare(strict_types=1);

require_once dirname(__DIR__) . '/lib/proc.php';

/*
 * bench/fanout/lib.php: what bench.php and join-worker.php share: their configuration from the environment that
 * run.sh sets, CPU readings from /proc, loading the Tether PHP client, and the variants of benchmark E4 (the join).
 */

// ---------------------------------------------------------------------------------------------------------------
// Configuration

function env(string $name, ?string $default = null): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        if ($default === null) {
            fwrite(STDERR, "bench/fanout: environment variable $name is required (run bench/fanout/run.sh)\n");
            exit(2);
        }
        return $default;
    }
    return $v;
}

/** Cfg holds the coordinates of the servers run.sh started. */
final class Cfg
{
    public static string $tetherSocket;
    public static int $tetherdPid;
    public static string $httpBackend;
    public static string $sleepdUrl;
    public static int $sleepdPid;
    public static string $dbSocket;
    public static int $mariadbPid;
    public static string $dbName;
    public static string $dbUser;
    public static string $dbPass;
    public static int $clkTck;

    public static function load(): void
    {
        self::$tetherSocket = env('TETHER_SOCKET');
        self::$tetherdPid = (int) env('TETHERD_PID');
        self::$httpBackend = env('TETHER_HTTP_BACKEND', 'sleep');
        self::$sleepdUrl = env('SLEEPD_URL');
        self::$sleepdPid = (int) env('SLEEPD_PID');
        self::$dbSocket = env('MARIADB_SOCKET');
        self::$mariadbPid = (int) env('MARIADB_PID');
        self::$dbName = env('BENCH_DB_NAME', 'tether_test');
        self::$dbUser = env('BENCH_DB_USER', 'tether');
        self::$dbPass = env('BENCH_DB_PASSWORD', 'tether');
        self::$clkTck = (int) env('CLK_TCK', '100');
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Process accounting

/**
 * thread_cpu_ns returns the CPU time of a process's live threads in ns (the first field of
 * /proc/PID/task/TID/schedstat): finer than utime+stime's 10 ms ticks, for short stretches.
 */
function thread_cpu_ns(int $pid): int
{
    $ns = 0;
    foreach (glob("/proc/$pid/task/*/schedstat") ?: [] as $f) {
        $ns += (int) @file_get_contents($f);
    }
    return $ns;
}

// ---------------------------------------------------------------------------------------------------------------
// The Tether PHP client

/** load_tether registers clients/php's autoloader (its class map, and PSR-4 from src/ for a class the map lacks). */
function load_tether(): void
{
    static $done = false;
    if ($done) {
        return;
    }
    $done = true;
    $dir = dirname(__DIR__, 2) . '/clients/php';
    require_once "$dir/autoload.php";
    spl_autoload_register(static function (string $class) use ($dir): void {
        if (strncmp($class, 'Tether\\', 7) === 0 && is_file($f = "$dir/src/" . str_replace('\\', '/', substr($class, 7)) . '.php')) {
            require $f;
        }
    });
}

function tether_client(): Tether\Client
{
    load_tether();
    return new Tether\Client(['socket' => Cfg::$tetherSocket, 'backend' => 'maria']);
}

// ---------------------------------------------------------------------------------------------------------------
// E4: the join

const USERS = 10000;
const GROUPS = 20;
const JOIN_SIZES = [1, 10, 100, 500];

/*
 * The seed's join: users left join groups on the group code, a range of ids, ordered by group name. `ORDER BY
 * g.name` alone leaves the order of the many users of one group to the server, so every variant orders by group
 * name, then user id: the SQL says so, and Tether's join sorts stably by group name rows that its left query
 * returned in id order. g.name is aliased: with two columns called `name`, PDO's FETCH_ASSOC would keep only one.
 */
const SQL_JOIN = 'SELECT u.*, g.name AS group_name FROM users u LEFT JOIN `groups` g ON g.code = u.group_code '
    . 'WHERE u.id BETWEEN ? AND ? ORDER BY g.name, u.id';
// The left side of Tether's join: the same range of users, in id order; tetherd looks their groups up by key.
const SQL_LEFT = 'SELECT * FROM users WHERE id BETWEEN ? AND ? ORDER BY id';

/**
 * join_variants lists E4's rows. Each make() connects and returns fn(int $first, int $last), which runs the join
 * for users $first..$last and returns its rows in the form that API hands a PHP program: a list of associative rows,
 * or for "used by column" the client's ColumnarResult (one decoded array per column; countable). canon(result) turns
 * a result into [id, user name, group code, group name] lists for the check that every variant returns the same
 * rows in the same order.
 *
 * @return array<string, array{label: string, tether: bool, make: callable(): callable(int, int): mixed, canon: callable(mixed): list<list<mixed>>}>
 */
function join_variants(): array
{
    $sqlCanon = static fn (array $rows): array => array_map(
        static fn (array $r): array => [(int) $r['id'], $r['name'], $r['group_code'], $r['group_name']],
        $rows,
    );
    // The Tether variants with and without the result cache differ only in their TTL.
    $tetherJoin = static fn (string $label, ?int $ttl): array => [
        'label' => $label,
        'tether' => true,
        'make' => static function () use ($ttl): Closure {
            $c = tether_client();
            return static fn (int $first, int $last): array => tether_join($c, $first, $last, $ttl)->rows();
        },
        'canon' => static fn (array $rows): array => array_map(
            static fn (array $r): array => [(int) $r['id'], $r['name'], $r['group_code'], $r['groups.name']],
            $rows,
        ),
    ];
    $tetherSql = static fn (string $label, ?int $ttl): array => [
        'label' => $label,
        'tether' => true,
        'make' => static function () use ($ttl): Closure {
            $c = tether_client();
            return static fn (int $first, int $last): array => $c->query(SQL_JOIN, [$first, $last], null, null, $ttl);
        },
        'canon' => $sqlCanon,
    ];
    return [
        'pdo-prepared' => [
            'label' => 'PDO, server-side prepared statement',
            'tether' => false,
            'make' => static function (): Closure {
                $st = pdo_open(false)->prepare(SQL_JOIN);
                return static function (int $first, int $last) use ($st): array {
                    $st->execute([$first, $last]);
                    return $st->fetchAll(PDO::FETCH_ASSOC);
                };
            },
            'canon' => $sqlCanon,
        ],
        'pdo-emulated' => [
            'label' => 'PDO, unprepared (emulated prepares: one plain query)',
            'tether' => false,
            'make' => static function (): Closure {
                $st = pdo_open(true)->prepare(SQL_JOIN);
                return static function (int $first, int $last) use ($st): array {
                    $st->execute([$first, $last]);
                    return $st->fetchAll(PDO::FETCH_ASSOC);
                };
            },
            'canon' => $sqlCanon,
        ],
        'tether-join' => $tetherJoin('Tether join (query users, groups by key, sorted in tetherd)', null),
        'tether-join-columns' => [
            'label' => 'Tether join, used by column (no rows built)',
            'tether' => true,
            'make' => static function (): Closure {
                $c = tether_client();
                return static function (int $first, int $last) use ($c): Tether\ColumnarResult {
                    return tether_join($c, $first, $last);
                };
            },
            'canon' => static fn (Tether\ColumnarResult $r): array => array_map(
                static fn ($id, $name, $code, $group): array => [(int) $id, $name, $code, $group],
                $r->column('id'), $r->column('name'), $r->column('group_code'), $r->column('groups.name'),
            ),
        ],
        'tether-join-cached' => $tetherJoin('Tether join with cache_ttl_ms 60000 (the same random ranges: hits only where a range repeats)', 60000),
        'tether-sql-cached' => $tetherSql('Tether query running the SQL join, cache_ttl_ms 60000', 60000),
        'tether-sql' => $tetherSql('Tether query running the SQL join (reference)', null),
    ];
}

/** tether_join runs the seed's join as a Tether join: the users of the range, their groups looked up by key. */
function tether_join(Tether\Client $c, int $first, int $last, ?int $cacheTtlMs = null): Tether\ColumnarResult
{
    return $c->join(Tether\Batch\Operation::query(SQL_LEFT, [$first, $last]), 'groups', on: ['group_code'],
        rightColumns: ['name'], kind: 'left', orderBy: ['groups.name'], cacheTtlMs: $cacheTtlMs);
}

function pdo_open(bool $emulate): PDO
{
    return new PDO(sprintf('mysql:unix_socket=%s;dbname=%s;charset=utf8mb4', Cfg::$dbSocket, Cfg::$dbName), Cfg::$dbUser, Cfg::$dbPass, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => $emulate,
    ]);
}

/** join_first returns the first id of a range of $size users starting at a random id (the whole range exists). */
function join_first(int $size): int
{
    // bench.php --join-hot N: the ranges start at one of N first ids, spread over the table (a listing's N pages,
    // which every client reads again and again); otherwise anywhere.
    $hot = (int) getenv('BENCH_JOIN_HOT');
    if ($hot > 0) {
        return 1 + mt_rand(0, $hot - 1) * intdiv(USERS - $size, $hot);
    }
    return mt_rand(1, USERS - $size + 1);
}
