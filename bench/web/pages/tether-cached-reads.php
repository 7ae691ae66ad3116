<?php
// A page of N point reads through Tether, each allowed from tetherd's result cache for a minute, 95% of them of
// ids read before (bench_hot_ids): the cache's page (issue 12).
require __DIR__ . '/lib.php';
$tether = tether();
foreach (bench_hot_ids() as $id) {
    echo render_row($tether->queryOne(SQL_POINT, [$id], 'maria', null, 60000));
}
