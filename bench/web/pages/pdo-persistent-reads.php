<?php
require __DIR__ . '/lib.php';
$db = pdo_open(cfg()['users']['pdo_persistent_n']);
$st = $db->prepare(SQL_POINT);
foreach (bench_ids() as $id) {
    $st->execute([$id]);
    echo render_row($st->fetch(PDO::FETCH_ASSOC) ?: null);
}
