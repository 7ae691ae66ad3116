<?php
require __DIR__ . '/lib.php';
echo render_row(go_curl('/point?id=' . bench_id()));
