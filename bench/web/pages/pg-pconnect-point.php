<?php
require __DIR__ . '/lib.php';
echo render_row(pg_point(pg_open('pg', cfg()['users']['pg_pconnect'], true), bench_id()));
