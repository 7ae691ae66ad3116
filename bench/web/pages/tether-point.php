<?php
require __DIR__ . '/lib.php';
echo render_row(tether()->queryOne(SQL_POINT, [bench_id()], 'maria'));
