<?php
require __DIR__ . '/lib.php';
$db = mysqli_open(cfg()['users']['mysqli_connect'], false);
echo render_row($db->execute_query(SQL_POINT, [bench_id()])->fetch_assoc());
$db->close();
