<?php

declare(strict_types=1);

/*
 * bench/replicas/writer.php: one writer of the loaded phase (bench/replicas/bench.php starts REP_WRITERS of them on
 * the primary's CPU). Straight on the primary over its Unix socket, autocommit, until SIGTERM, round after round: an
 * INSERT of 20 rows into bench_w, then the writer's summary row in bench_w_sum recomputed from its last 2,000 rows
 * (INSERT ... SELECT ... ON DUPLICATE KEY UPDATE). Most of the work is the primary's: the summary reads 2,000 rows
 * to write one, and the replica (binary log in row format) applies 21 row events a round. It is the shape of an
 * application's write load that keeps a primary busy (counters, summaries, UPDATEs that search) without giving its
 * replica as much to do, which on this 2-CPU machine keeps the replica's CPU, shared with the web host, for reads.
 * Prints the statements it ran on exit.
 *
 *   php writer.php mariadb SOCKET DB WRITER_NUMBER
 *   php writer.php postgres CONNINFO - WRITER_NUMBER    (the same statements in PostgreSQL's dialect)
 */

[$_, $kind, $where, $db, $n] = $argv + [null, null, null, null, null];
$n = (int) $n;
$stop = false;
pcntl_async_signals(true);
pcntl_signal(SIGTERM, static function () use (&$stop): void {
    $stop = true;
});
if ($kind === 'postgres') {
    $pg = pg_connect($where) ?: throw new RuntimeException("pg_connect $where failed");
    $q = static fn (string $sql) => pg_query($pg, $sql) ?: throw new RuntimeException(pg_last_error($pg));
    $sum = 'INSERT INTO bench_w_sum (writer, n, bytes) SELECT writer, count(*), sum(length(pad)) FROM bench_w
        WHERE writer = %d AND v >= %d GROUP BY writer ON CONFLICT (writer) DO UPDATE SET n = EXCLUDED.n, bytes = EXCLUDED.bytes';
} else {
    $my = new mysqli('localhost', 'root', '', $db, 0, $where);
    $q = static fn (string $sql) => $my->query($sql);
    $sum = 'INSERT INTO bench_w_sum (writer, n, bytes) SELECT writer, COUNT(*), SUM(LENGTH(pad)) FROM bench_w
        WHERE writer = %d AND v >= %d GROUP BY writer ON DUPLICATE KEY UPDATE n = VALUES(n), bytes = VALUES(bytes)';
}
$pad = str_repeat('w', 150);
$stmts = 0;
for ($round = 0; !$stop; $round++) {
    $values = [];
    for ($i = 0; $i < 20; $i++) {
        $values[] = sprintf("(%d, %d, '%s')", $n, $round * 20 + $i, $pad);
    }
    $q('INSERT INTO bench_w (writer, v, pad) VALUES ' . implode(', ', $values));
    $q(sprintf($sum, $n, $round * 20 - 2000));
    $stmts += 2;
}
echo json_encode(['writer' => $n, 'statements' => $stmts]), "\n";
