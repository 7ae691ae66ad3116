<?php

declare(strict_types=1);

/*
 * bench/replicas/writer.php: one writer of the loaded phase (bench/replicas/bench.php starts REP_WRITERS of them on
 * the primary's CPU). Straight on the primary over its Unix socket, autocommit, until SIGTERM: an INSERT of 20 rows
 * into bench_w, then an UPDATE of 20 of this writer's rows, round after round. Prints the statements it ran on exit.
 *
 *   php writer.php SOCKET DB WRITER_NUMBER
 */

[$_, $socket, $db, $n] = $argv + [null, null, null, null];
$n = (int) $n;
$stop = false;
pcntl_async_signals(true);
pcntl_signal(SIGTERM, static function () use (&$stop): void {
    $stop = true;
});
$my = new mysqli('localhost', 'root', '', $db, 0, $socket);
$pad = str_repeat('w', 150);
$stmts = 0;
for ($round = 0; !$stop; $round++) {
    $values = [];
    for ($i = 0; $i < 20; $i++) {
        $values[] = sprintf("(%d, %d, '%s')", $n, $round * 20 + $i, $pad);
    }
    $my->query('INSERT INTO bench_w (writer, v, pad) VALUES ' . implode(', ', $values));
    $from = max(0, $round * 20 - 200);
    $my->query(sprintf('UPDATE bench_w SET pad = REVERSE(pad) WHERE writer = %d AND v BETWEEN %d AND %d', $n, $from, $from + 19));
    $stmts += 2;
}
echo json_encode(['writer' => $n, 'statements' => $stmts]), "\n";
