<?php

/**
 * call-overhead.php measures what Tether\Client spends per call beyond one raw frame written and one reply read:
 * for ping, queryOne, query (10 rows), execute and a batch of 20 queries, a loop of calls through the client
 * against the same loop with hand-written frames (as bench/cli/bench.php's "raw frames" rows write them), on one
 * socket each. Per call: wall time (hrtime) and this process's own CPU time (getrusage, user + system). Rows run
 * interleaved in rounds so that a noisy moment on the machine hits each row alike; the figures are the median of
 * the rounds. Not a test: run it by hand against a tetherd whose default backend is SQLite, e.g.
 *
 *     taskset -a -pc 1 $TETHERD_PID
 *     taskset -c 1 php -d opcache.enable_cli=1 clients/php/tests/Benchmark/call-overhead.php \
 *         --socket /tmp/phpt/var/tether.sock [--calls 35000] [--rounds 7] [--src clients/php]
 *
 * Pinning both processes to one CPU keeps the round trip a plain context switch: on a VM an idle vCPU can take
 * 50 us or more to wake, which swamps the differences measured here. --src is the client checkout to load (its
 * autoload.php), so that two versions run under the same command. The script creates and fills table
 * bench_overhead on the default backend.
 */

declare(strict_types=1);

$options = getopt('', ['socket:', 'calls:', 'rounds:', 'src:']);
$socket = $options['socket'] ?? (getenv('TETHER_SOCKET') ?: './var/tether.sock');
$calls = (int) ($options['calls'] ?? 20000);
$rounds = (int) ($options['rounds'] ?? 7);
require ($options['src'] ?? dirname(__DIR__, 2)) . '/autoload.php';

const SQL_ONE = 'SELECT id, name, score, created FROM bench_overhead WHERE id = ?';
const SQL_TEN = 'SELECT id, name, score, created FROM bench_overhead WHERE id BETWEEN ? AND ? ORDER BY id';
const SQL_EXEC = 'UPDATE bench_overhead SET score = score + 1 WHERE id = ?';
const TABLE_ROWS = 1000;
const BATCH = 20;

/** Raw is a call with a hand-written frame: pack, one fwrite, read the length and the payload, unpack. */
final class Raw
{
    /** @var resource */
    private $s;
    private int $id = 0;

    public function __construct(string $socket)
    {
        $this->s = stream_socket_client('unix://' . $socket, $errno, $error, 5) ?: throw new RuntimeException("connect $socket: $error");
        stream_set_timeout($this->s, 30);
    }

    /** @param array<string, mixed> $request without id */
    public function call(array $request): array
    {
        $p = msgpack_pack(['id' => ++$this->id] + $request);
        fwrite($this->s, pack('N', strlen($p)) . $p);
        $n = unpack('N', fread($this->s, 4))[1];
        $payload = fread($this->s, $n);
        while (strlen($payload) < $n) {
            $payload .= fread($this->s, $n - strlen($payload));
        }
        $reply = msgpack_unpack($payload);
        if (($reply['id'] ?? null) !== $this->id || isset($reply['error'])) {
            throw new RuntimeException('unexpected reply: ' . json_encode($reply));
        }

        return $reply;
    }
}

$raw = new Raw($socket);
$raw->call(['op' => 'exec', 'sql' => 'CREATE TABLE IF NOT EXISTS bench_overhead (id INTEGER PRIMARY KEY, name TEXT, score REAL, created TEXT)']);
$raw->call(['op' => 'exec', 'sql' => 'DELETE FROM bench_overhead']);
for ($i = 1; $i <= TABLE_ROWS; $i += 100) {
    $params = [];
    for ($k = $i; $k < $i + 100; $k++) {
        array_push($params, $k, "name $k", $k * 1.5, '2024-02-29T23:59:59');
    }
    $raw->call(['op' => 'exec', 'sql' => 'INSERT INTO bench_overhead VALUES ' . implode(', ', array_fill(0, 100, '(?, ?, ?, ?)')), 'params' => $params]);
}
$client = new Tether\Client(['socket' => $socket]);
$batch = static function (int $id): array {
    $ops = [];
    for ($k = 0; $k < BATCH; $k++) {
        $ops[] = Tether\Batch\Operation::query(SQL_ONE, [($id + $k) % TABLE_ROWS + 1]);
    }

    return $ops;
};

// Each raw call returns what the client's method returns, built the plainest way.
$rows = [
    'ping' => [
        'raw' => static function (int $id) use ($raw): void {
            $raw->call(['op' => 'ping']);
        },
        'client' => static function (int $id) use ($client): void {
            $client->ping();
        },
    ],
    'queryOne' => [
        'raw' => static function (int $id) use ($raw): void {
            $r = $raw->call(['op' => 'query', 'sql' => SQL_ONE, 'params' => [$id]]);
            $row = isset($r['rows'][0]) ? array_combine($r['columns'], $r['rows'][0]) : null;
            $row['id'] === $id || throw new RuntimeException('wrong row');
        },
        'client' => static function (int $id) use ($client): void {
            $client->queryOne(SQL_ONE, [$id])['id'] === $id || throw new RuntimeException('wrong row');
        },
    ],
    'query 10 rows' => [
        'raw' => static function (int $id) use ($raw): void {
            $r = $raw->call(['op' => 'query', 'sql' => SQL_TEN, 'params' => [$id, $id + 9]]);
            $out = [];
            foreach ($r['rows'] as $row) {
                $out[] = array_combine($r['columns'], $row);
            }
        },
        'client' => static function (int $id) use ($client): void {
            $client->query(SQL_TEN, [$id, $id + 9]);
        },
    ],
    'execute' => [
        // id 0 matches no row: the statement costs tetherd little and writes nothing
        'raw' => static function (int $id) use ($raw): void {
            $r = $raw->call(['op' => 'exec', 'sql' => SQL_EXEC, 'params' => [0]]);
            new Tether\ExecResult($r['affected'], $r['insert_id'] ?? 0);
        },
        'client' => static function (int $id) use ($client): void {
            $client->execute(SQL_EXEC, [0]);
        },
    ],
    'batch of 20 queries' => [
        'raw' => static function (int $id) use ($raw): void {
            $ops = [];
            for ($k = 0; $k < BATCH; $k++) {
                $ops[] = ['op' => 'query', 'sql' => SQL_ONE, 'params' => [($id + $k) % TABLE_ROWS + 1]];
            }
            $r = $raw->call(['op' => 'batch', 'ops' => $ops]);
            $out = [];
            foreach ($r['results'] as $i => $item) {
                $list = [];
                foreach ($item['rows'] as $row) {
                    $list[] = array_combine($item['columns'], $row);
                }
                $out[$i] = $list;
            }
        },
        'client' => static function (int $id) use ($client, $batch): void {
            $client->batch($batch($id));
        },
    ],
];

$cpu = static function (): float {
    $r = getrusage();

    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec']) * 1e6 + $r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec'];
};
$share = max(1, intdiv($calls, $rounds));
$wall = $used = [];
foreach ($rows as $name => $vias) {
    foreach ($vias as $via => $fn) {
        for ($k = 0; $k < min(1000, $share); $k++) {
            $fn($k % TABLE_ROWS + 1);
        }
    }
}
for ($r = 0; $r < $rounds; $r++) {
    foreach ($rows as $name => $vias) {
        foreach ($vias as $via => $fn) {
            $n = $name === 'batch of 20 queries' ? max(1, intdiv($share, 10)) : $share;
            $c0 = $cpu();
            $t0 = hrtime(true);
            for ($k = 0; $k < $n; $k++) {
                $fn(($k * 7919) % (TABLE_ROWS - 10) + 1);
            }
            $wall[$name][$via][] = (hrtime(true) - $t0) / 1e3 / $n;
            $used[$name][$via][] = ($cpu() - $c0) / $n;
        }
    }
}

$median = static function (array $v): float {
    sort($v);
    $n = count($v);

    return $n % 2 === 1 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
};
printf("PHP %s, opcache %s, JIT %s; %d rounds, %d calls per row per round (batches: %d); medians of the rounds, us per call\n\n",
    PHP_VERSION, ini_get('opcache.enable_cli') ? 'on' : 'off', (int) ini_get('opcache.jit_buffer_size') > 0 ? 'on' : 'off',
    $rounds, $share, max(1, intdiv($share, 10)));
echo "| call | wall raw | wall client | wall extra | PHP CPU raw | PHP CPU client | PHP CPU extra |\n";
echo "|---|---:|---:|---:|---:|---:|---:|\n";
foreach ($rows as $name => $_) {
    [$wr, $wc, $cr, $cc] = [$median($wall[$name]['raw']), $median($wall[$name]['client']), $median($used[$name]['raw']), $median($used[$name]['client'])];
    printf("| %s | %.2f | %.2f | %+.2f | %.2f | %.2f | %+.2f |\n", $name, $wr, $wc, $wc - $wr, $cr, $cc, $cc - $cr);
}
