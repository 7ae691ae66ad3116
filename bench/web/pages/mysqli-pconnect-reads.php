<?php
require __DIR__ . '/lib.php';
$db = mysqli_open(cfg()['users']['mysqli_pconnect_n'], true);
foreach (bench_ids() as $id) {
    echo render_row($db->query(SQL_POINT_BY_ID . $id)->fetch_assoc());
}
