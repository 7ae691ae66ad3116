<?php

/**
 * result-decode.php measures what the client spends turning a decoded `query` reply into what its methods return,
 * for a 20-row result of 4 columns (id, name, score, created): query() (Protocol\Reply::rows), queryOne()
 * (Reply::first), queryColumns() then rows() (Reply::columns), and queryNumeric() (Reply::numeric) where the
 * checkout has it; each once with distinct column names and once with a repeated one (SELECT a.id, b.id, ...).
 * Each figure is microseconds per reply, MessagePack decode included, the best of --rounds runs (rows interleaved
 * in rounds; the best, since on a shared machine other processes only ever add time). Not a test: run it by hand:
 *
 *     taskset -c 1 php -d opcache.enable_cli=1 clients/php/tests/Benchmark/result-decode.php [--src clients/php] [--rounds 41]
 *
 * --src is the client checkout to load (its autoload.php), so that two versions run under the same command.
 */

declare(strict_types=1);

$options = getopt('', ['src:', 'rounds:', 'rows:']);
require ($options['src'] ?? dirname(__DIR__, 2)) . '/autoload.php';
$rounds = (int) ($options['rounds'] ?? 41);
$height = (int) ($options['rows'] ?? 20);

use Tether\Protocol\Reply;

$replies = [];
foreach (['distinct' => ['id', 'name', 'score', 'created'], 'repeated' => ['id', 'name', 'score', 'id']] as $kind => $columns) {
    $rows = $data = [];
    for ($i = 0; $i < $height; $i++) {
        $rows[] = [$i + 1, "name $i", $i % 7 === 0 ? null : $i * 1.5, '2024-02-29 23:59:59'];
    }
    for ($c = 0; $c < 4; $c++) {
        $data[] = array_column($rows, $c);
    }
    $replies[$kind] = [
        msgpack_pack(['id' => 1, 'columns' => $columns, 'rows' => $rows, 'us' => 120]),
        msgpack_pack(['id' => 1, 'columns' => $columns, 'count' => $height, 'data' => $data, 'us' => 120]),
    ];
}

/** @var array<string, callable(string, string): mixed> $calls row-oriented reply, column-oriented reply */
$calls = [
    'decode only' => static fn (string $r, string $c) => msgpack_unpack($r),
    'query() rows' => static fn (string $r, string $c) => Reply::rows(msgpack_unpack($r)),
    'queryOne() first' => static fn (string $r, string $c) => Reply::first(msgpack_unpack($r)),
    'queryColumns()->rows()' => static fn (string $r, string $c) => Reply::columns(msgpack_unpack($c))->rows(),
];
if (method_exists(Reply::class, 'numeric')) {
    $calls['queryNumeric()'] = static fn (string $r, string $c) => Reply::numeric(msgpack_unpack($r));
    $calls['queryNumeric()->associative()'] = static fn (string $r, string $c) => Reply::numeric(msgpack_unpack($r))->associative();
    $calls['queryColumns()->numericRows()'] = static fn (string $r, string $c) => Reply::columns(msgpack_unpack($c))->numericRows();
}

$iterations = max(100, (int) (4e4 / $height));
$times = [];
for ($round = 0; $round < $rounds; $round++) {
    foreach ($replies as $kind => [$r, $c]) {
        foreach ($calls as $name => $fn) {
            $t = hrtime(true);
            for ($k = 0; $k < $iterations; $k++) {
                $fn($r, $c);
            }
            $times[$name][$kind][] = (hrtime(true) - $t) / 1e3 / $iterations;
        }
    }
}
printf("PHP %s, opcache %s, JIT %s; %d rows x 4 columns; best of %d rounds of %d calls; us per reply\n\n",
    PHP_VERSION, ini_get('opcache.enable_cli') ? 'on' : 'off', (int) ini_get('opcache.jit_buffer_size') > 0 ? 'on' : 'off',
    $height, $rounds, $iterations);
echo "| call | distinct names | a repeated name |\n|---|---:|---:|\n";
foreach ($times as $name => $byKind) {
    printf("| %s | %.2f | %.2f |\n", $name, min($byKind['distinct']), min($byKind['repeated']));
}
