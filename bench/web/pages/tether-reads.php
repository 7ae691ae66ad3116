<?php
require __DIR__ . '/lib.php';
$tether = tether();
foreach (bench_ids() as $id) {
    echo render_row($tether->queryOne(SQL_POINT, [$id], 'maria'));
}
