<?php
// A page of N point reads through Tether in one batch, each allowed from tetherd's result cache for a minute, 95%
// of them of ids read before (bench_hot_ids): the cache's page, in one round trip.
require __DIR__ . '/lib.php';
$tether = tether();
$ops = array_map(static fn (int $id) => Tether\Batch\Operation::query(SQL_POINT, [$id], 'maria', null, null, 60000), bench_hot_ids());
foreach ($tether->batch($ops) as $result) {
    echo render_row(batch_row($result));
}
