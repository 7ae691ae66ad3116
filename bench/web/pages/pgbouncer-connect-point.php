<?php
require __DIR__ . '/lib.php';
$db = pg_open('pgbouncer', cfg()['users']['pgbouncer_connect'], false);
echo render_row(pg_point($db, bench_id()));
pg_close($db);
