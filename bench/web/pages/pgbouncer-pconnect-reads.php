<?php
require __DIR__ . '/lib.php';
$db = pg_open('pgbouncer', cfg()['users']['pgbouncer_pconnect_n'], true);
foreach (bench_ids() as $id) {
    echo render_row(pg_point($db, $id));
}
