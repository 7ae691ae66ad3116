<?php

declare(strict_types=1);

/*
 * bench/web/pages/lib.php: what the benchmark pages share. Every page but empty.php requires it.
 *
 * bench/web/run.sh copies this folder to the web servers' document root and writes config.php beside it (socket
 * paths, ports, one database user per row, so that each row's backend connections can be counted apart).
 *
 * A point-read page prints the row it read in one fixed-width line (render_row), so every point-read page, whatever
 * its backend, answers the same bytes for the same id, and ab's length check catches a page that answers anything
 * else. The id is ?id=N when given (the driver's body check), otherwise random in 1..10,000. A page of N point reads
 * (?n=N) prints N such lines: ids K, K+1, ... with ?id=K, otherwise N random distinct ones (bench_ids).
 *
 * It only declares, so that including it costs the pages next to nothing (the floor rows measure microseconds).
 * Errors need no handler: mysqli throws by default (PHP >= 8.1), and an uncaught exception under Debian's
 * production php.ini (display_errors off, output buffered) answers 500, which ab counts as non-2xx, and leaves the
 * trace in the server's error log.
 */

const SQL_POINT = 'SELECT id, name, score, created FROM bench_kv WHERE id = ?';
const SQL_POINT_PG = 'SELECT id, name, score, created FROM bench_kv WHERE id = $1';
// Plain text, the id appended as an int: what most PHP code does with mysqli (no prepare, one round trip).
const SQL_POINT_BY_ID = 'SELECT id, name, score, created FROM bench_kv WHERE id = ';
const TABLE_ROWS = 10000;
// Seed E1's reads (bench/cli/seed-e1.php): get('a') on c1, get_super_column('a', 'b1') on s1, keyspace test.
const CASS_KEY = 'a';
const CASS_SUPER = 'b1';
// Seed E2's table: 10,000 rows keyed by the id as decimal text, columns f:name, f:score, f:created (bench_kv's values).
const BT_TABLE = 'bench_bt';

/** cfg returns the run's configuration (config.php, written by run.sh). */
function cfg(): array
{
    static $cfg = null;
    return $cfg ??= require __DIR__ . '/config.php';
}

/** bench_id returns the primary key to read: ?id=N, else a random one. */
function bench_id(): int
{
    return isset($_GET['id']) ? (int) $_GET['id'] : mt_rand(1, TABLE_ROWS);
}

/**
 * bench_ids returns the primary keys of a page of N point reads, N = ?n (1..100): with ?id=K, K .. K+N-1, so that the
 * body check is deterministic; otherwise N distinct ones, each drawn by $pick (default: uniformly from the table).
 *
 * @param (callable(): int)|null $pick
 * @return list<int>
 */
function bench_ids(?callable $pick = null): array
{
    $n = (int) ($_GET['n'] ?? 0);
    if ($n < 1 || $n > 100) {
        throw new RuntimeException('want ?n=1..100');
    }
    if (isset($_GET['id'])) {
        return range((int) $_GET['id'], (int) $_GET['id'] + $n - 1);
    }
    $pick ??= static fn (): int => mt_rand(1, TABLE_ROWS);
    $ids = [];
    while (count($ids) < $n) {
        $ids[$pick()] = true;
    }
    return array_keys($ids);
}

/** Ids the cached pages read 95% of the time (bench_hot_ids): after the first pages, each is in tetherd's cache. */
const HOT_ROWS = 200;

/**
 * bench_hot_ids is bench_ids for the pages of cached reads: each id from the HOT_ROWS first ids with probability 0.95
 * (answered from the cache once read) and from the rest of the table otherwise (almost always a miss): a 95% hit
 * rate, as a page that reads the same options, menus and categories on every request sees.
 *
 * @return list<int>
 */
function bench_hot_ids(): array
{
    return bench_ids(static fn (): int => mt_rand(1, 100) <= 95 ? mt_rand(1, HOT_ROWS) : mt_rand(HOT_ROWS + 1, TABLE_ROWS));
}

/**
 * render_row formats a bench_kv row as one fixed-width line. Values may come as strings or ints (mysqli, PDO, pgsql,
 * JSON) and created as "Y-m-d H:i:s" or "Y-m-dTH:i:s" (Tether); all give the same bytes.
 */
function render_row(?array $row): string
{
    if ($row === null) {
        throw new RuntimeException('no such row');
    }
    return sprintf("%5d %-10s %3d %s\n", $row['id'], $row['name'], $row['score'], strtr(substr((string) $row['created'], 0, 19), 'T', ' '));
}

/**
 * render_cells formats the cells of a Cassandra row, name => value, one "name value" line each: what the E1 pages
 * print, whatever they read through.
 *
 * @param array<string, string> $cells
 */
function render_cells(array $cells): string
{
    if (!$cells) {
        throw new RuntimeException('no such row');
    }
    $out = '';
    foreach ($cells as $name => $value) {
        $out .= sprintf("%-6s %s\n", $name, $value);
    }
    return $out;
}

/**
 * batch_row returns the one row of a point read's batch result (a list of rows), or null when there was none; an
 * operation that failed comes back as its exception, not thrown (Client::batch()): it is thrown here.
 */
function batch_row(mixed $result): ?array
{
    if ($result instanceof Throwable) {
        throw $result;
    }
    return $result[0] ?? null;
}

/** bt_row maps a wide Bigtable row (key, f:name, f:score, f:created) to the fields of render_row. */
function bt_row(?array $row): ?array
{
    return $row === null ? null : ['id' => $row['key'], 'name' => $row['f:name'], 'score' => $row['f:score'], 'created' => $row['f:created']];
}

/**
 * timed runs $read, a page's data access (from getting the client to holding the decoded row), and returns its
 * result. With ?t=1, which only the driver's read-latency probe sends, it also answers how long that took and which
 * worker ran it, as headers: X-Read-Ns (hrtime), X-Pid, X-Db-Us when the Go service said how long its database
 * call took (Server-Timing), and X-Server-Us when the read went through tetherd and its reply said how long tetherd
 * took, from reading the request to its reply (Client::lastServerMicros(); a ping's reply says nothing). With ?t=2
 * it then runs $read once more and sends that time too (X-Read2-Ns): in a fresh worker, the second read tells the
 * first read's connect and first-time costs from the rest. Under ab there is no
 * ?t, and a page does and sends nothing more than the others.
 */
function timed(callable $read): mixed
{
    $t0 = hrtime(true);
    $result = $read();
    $ns = hrtime(true) - $t0;
    if (isset($_GET['t'])) {
        $db = $GLOBALS['go_db_ms'] ?? null;
        header("X-Read-Ns: $ns");
        header('X-Pid: ' . getmypid());
        if ($db !== null) {
            header(sprintf('X-Db-Us: %.0f', $db * 1000));
        }
        // Only a page that made a Client has its class (classes are per PHP request); every Client of the request
        // shares its one connection, so a new one answers for the read's.
        $server = class_exists(Tether\Client::class, false) ? tether()->lastServerMicros() : null;
        if ($server !== null) {
            header("X-Server-Us: $server");
        }
        if ($_GET['t'] === '2') {
            $t0 = hrtime(true);
            $read();
            header('X-Read2-Ns: ' . (hrtime(true) - $t0));
        }
    }
    return $result;
}

/** tether returns a Tether client on the run's socket (the socket itself is persistent, one per PHP worker). */
function tether(): Tether\Client
{
    require_once cfg()['tether_autoload'];
    return new Tether\Client(['socket' => cfg()['tether_socket']]);
}

/**
 * mysqli_open connects to the bench MariaDB as $user (password = user name): over its Unix socket, or, when the run
 * says where (config.php 'mysql_host', the two-host setting, bench/web/twohost.sh), over TCP with TLS, the server's
 * certificate checked against its CA ('mysql_tls_ca').
 */
function mysqli_open(string $user, bool $persistent): mysqli
{
    $c = cfg();
    if (!isset($c['mysql_host'])) {
        return new mysqli(($persistent ? 'p:' : '') . 'localhost', $user, $user, $c['db_name'], 0, $c['mysql_socket']);
    }
    $db = mysqli_init();
    $db->ssl_set(null, null, $c['mysql_tls_ca'], null, null);
    $db->options(MYSQLI_OPT_SSL_VERIFY_SERVER_CERT, true);
    $db->real_connect(($persistent ? 'p:' : '') . $c['mysql_host'], $user, $user, $c['db_name'], $c['mysql_port'], null, MYSQLI_CLIENT_SSL);
    return $db;
}

/** pdo_open connects with PDO persistent, as $user (password = user name), with PDO's defaults otherwise (TCP and TLS as mysqli_open). */
function pdo_open(string $user): PDO
{
    $c = cfg();
    $opts = [PDO::ATTR_PERSISTENT => true, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION];
    if (!isset($c['mysql_host'])) {
        return new PDO("mysql:unix_socket={$c['mysql_socket']};dbname={$c['db_name']}", $user, $user, $opts);
    }
    $opts[PDO::MYSQL_ATTR_SSL_CA] = $c['mysql_tls_ca'];
    $opts[PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT] = true;
    return new PDO("mysql:host={$c['mysql_host']};port={$c['mysql_port']};dbname={$c['db_name']}", $user, $user, $opts);
}

/**
 * pg_open connects with pg_connect or pg_pconnect, as $user (password = user name), to PostgreSQL itself
 * ($via = 'pg') or to pgbouncer ($via = 'pgbouncer'), both over their Unix sockets; in the two-host setting
 * (config.php 'pg_host') PostgreSQL over TCP with TLS (sslmode=verify-full), pgbouncer still over its socket (it
 * runs on the web host).
 *
 * @return PgSql\Connection
 */
function pg_open(string $via, string $user, bool $persistent)
{
    $c = cfg();
    $dsn = sprintf('host=%s port=%d dbname=%s user=%s password=%s', $c["{$via}_socket_dir"], $c["{$via}_port"], $c['db_name'], $user, $user);
    if ($via === 'pg' && isset($c['pg_host'])) {
        // The two-host setting: over TCP, TLS required and the server's certificate checked (host name included).
        $dsn = sprintf('host=%s port=%d dbname=%s user=%s password=%s sslmode=verify-full sslrootcert=%s',
            $c['pg_host'], $c['pg_port'], $c['db_name'], $user, $user, $c['pg_tls_ca']);
    }
    $link = $persistent ? pg_pconnect($dsn) : pg_connect($dsn);
    if ($link === false) {
        throw new RuntimeException("pg connect via $via as $user failed");
    }
    return $link;
}

/** pg_point reads one row with pg_query_params (one round trip: unnamed statement, bound parameter). */
function pg_point($link, int $id): ?array
{
    $r = pg_query_params($link, SQL_POINT_PG, [$id]);
    if ($r === false) {
        throw new RuntimeException('pg_query_params: ' . pg_last_error($link));
    }
    return pg_fetch_assoc($r) ?: null;
}

/** go_curl GETs $path from the Go service with curl, a new TCP connection per call (PHP cannot keep a curl handle across requests). */
function go_curl(string $path): array
{
    $ch = curl_init(cfg()['go_url'] . $path);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
    $body = curl_exec($ch);
    $status = curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    if ($body === false || $status !== 200) {
        throw new RuntimeException("go service $path: status $status " . curl_error($ch));
    }
    return json_decode($body, true, 8, JSON_THROW_ON_ERROR);
}

/**
 * go_keepalive GETs $path from the Go service over a persistent socket (pfsockopen): the worker keeps one HTTP/1.1
 * keep-alive connection across requests, which is as close as PHP gets to a client holding a connection. A socket
 * found closed before any reply byte is reopened once. The service's Server-Timing (its database call) is kept for
 * timed().
 */
function go_keepalive(string $path): array
{
    $c = cfg();
    $req = "GET $path HTTP/1.1\r\nHost: {$c['go_host']}\r\n\r\n";
    for ($try = 0; ; $try++) {
        $s = pfsockopen($c['go_host'], $c['go_port'], $errno, $errstr, 5);
        if ($s === false) {
            throw new RuntimeException("go service: connect: $errstr ($errno)");
        }
        $status = fwrite($s, $req) === strlen($req) ? fgets($s) : false;
        if ($status !== false) {
            break;
        }
        fclose($s); // closes the persistent socket too: the next pfsockopen opens a new one
        if ($try > 0) {
            throw new RuntimeException('go service: connection closed');
        }
    }
    $len = null;
    while (($line = fgets($s)) !== false && $line !== "\r\n") {
        if (strncasecmp($line, 'Content-Length:', 15) === 0) {
            $len = (int) trim(substr($line, 15));
        } elseif (strncasecmp($line, 'Server-Timing: db;dur=', 22) === 0) {
            $GLOBALS['go_db_ms'] = (float) substr($line, 22); // for timed()
        }
    }
    if ($len === null || !str_starts_with($status, 'HTTP/1.1 200 ')) {
        fclose($s);
        throw new RuntimeException('go service: unexpected reply ' . trim($status));
    }
    $body = '';
    while (strlen($body) < $len && ($chunk = fread($s, $len - strlen($body))) !== false && $chunk !== '') {
        $body .= $chunk;
    }
    return json_decode($body, true, 8, JSON_THROW_ON_ERROR);
}

/**
 * tether_raw_ping pings tetherd with hand-written frames on a persistent socket, without the PHP client: the cost
 * of the round trip alone (the round-trip-floor measurement's page).
 */
function tether_raw_ping(): void
{
    $s = stream_socket_client('unix://' . cfg()['tether_socket'], $errno, $errstr, 5, STREAM_CLIENT_CONNECT | STREAM_CLIENT_PERSISTENT);
    if ($s === false) {
        throw new RuntimeException("tetherd: connect: $errstr ($errno)");
    }
    $p = msgpack_pack(['id' => 1, 'op' => 'ping']);
    fwrite($s, pack('N', strlen($p)) . $p);
    $head = fread($s, 4);
    $n = strlen($head) === 4 ? unpack('N', $head)[1] : 0;
    $reply = $n > 0 ? msgpack_unpack(fread($s, $n)) : null;
    if (!is_array($reply) || ($reply['id'] ?? null) !== 1 || isset($reply['error'])) {
        fclose($s);
        throw new RuntimeException('tetherd: bad ping reply ' . json_encode($reply));
    }
}
