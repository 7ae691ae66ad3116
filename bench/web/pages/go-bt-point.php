<?php
require __DIR__ . '/lib.php';
$id = bench_id();
$row = timed(static fn () => go_keepalive("/bt/row?key=$id"));
echo render_row(bt_row(['key' => $row['key']] + array_map('base64_decode', $row['columns'])));
