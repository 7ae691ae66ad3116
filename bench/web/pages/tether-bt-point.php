<?php
require __DIR__ . '/lib.php';
$id = bench_id();
echo render_row(bt_row(timed(static fn () => tether()->get(BT_TABLE, (string) $id, [], 'bt'))));
