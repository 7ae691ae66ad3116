<?php
require __DIR__ . '/lib.php';
$tether = tether();
// One frame, one reply: tetherd runs the N reads side by side on its pool.
$ops = array_map(static fn (int $id) => Tether\Batch\Operation::query(SQL_POINT_PG, [$id], 'pg'), bench_ids());
foreach ($tether->batch($ops) as $result) {
    echo render_row(batch_row($result));
}
