<?php
require __DIR__ . '/lib.php';
$row = timed(static fn () => go_keepalive('/cass/row?key=' . CASS_KEY));
echo render_cells(array_map('base64_decode', array_column($row['columns'], 'value', 'name')));
