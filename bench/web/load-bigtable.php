<?php

declare(strict_types=1);

/*
 * bench/web/load-bigtable.php: write seed E2's 10,000 rows into a Bigtable table through tetherd (its Bigtable
 * backend: the emulator bench/web/run.sh starts), and read one back. Row key: the id as decimal text ("42"); columns
 * f:name, f:score, f:created, with the values of bench_kv's row of that id in MariaDB and PostgreSQL, so that the
 * Bigtable pages print the same line as every other point-read page (render_row).
 *
 *   php bench/web/load-bigtable.php TETHER_SOCKET BACKEND TABLE [ROWS]
 *
 * mutate_row operations go 500 to a batch (tetherd runs a batch's operations concurrently). Prints one line on stderr.
 */

require dirname(__DIR__, 2) . '/clients/php/autoload.php';

use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\Server\ServerException;

[, $socket, $backend, $table] = $argv + [null, null, null, null];
$rows = (int) ($argv[4] ?? 10000);
if ($table === null) {
    fwrite(STDERR, "usage: php load-bigtable.php TETHER_SOCKET BACKEND TABLE [ROWS]\n");
    exit(2);
}
$t0 = hrtime(true);
$c = new Tether\Client(['socket' => $socket]);
$epoch = new DateTimeImmutable('2026-01-01 00:00:00', new DateTimeZone('UTC'));
for ($first = 1; $first <= $rows; $first += 500) {
    $ops = [];
    for ($id = $first; $id < $first + 500 && $id <= $rows; $id++) {
        $ops[] = Operation::mutateRow($table, (string) $id, [
            Mutation::set('f', 'name', "name-$id"),
            Mutation::set('f', 'score', (string) (($id * 7919) % 1000)),
            Mutation::set('f', 'created', $epoch->modify("-$id minutes")->format('Y-m-d H:i:s')),
        ], $backend);
    }
    foreach ($c->batch($ops) as $result) {
        if ($result instanceof ServerException) {
            throw $result;
        }
    }
}
$row = $c->get($table, '42', [], $backend);
if (($row['f:name'] ?? null) !== 'name-42') {
    fwrite(STDERR, 'load-bigtable.php: row 42 reads back as ' . json_encode($row) . "\n");
    exit(1);
}
fwrite(STDERR, sprintf("==> bigtable: loaded %d rows into %s in %.1f s\n", $rows, $table, (hrtime(true) - $t0) / 1e9));
