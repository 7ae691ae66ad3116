<?php
require __DIR__ . '/lib.php';
echo render_row(pg_point(pg_open('pgbouncer', cfg()['users']['pgbouncer_pconnect'], true), bench_id()));
