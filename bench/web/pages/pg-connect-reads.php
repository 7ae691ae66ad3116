<?php
require __DIR__ . '/lib.php';
$db = pg_open('pg', cfg()['users']['pg_connect_n'], false);
foreach (bench_ids() as $id) {
    echo render_row(pg_point($db, $id));
}
pg_close($db);
