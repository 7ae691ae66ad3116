<?php
require __DIR__ . '/lib.php';
echo render_row(go_keepalive('/point?id=' . bench_id()));
