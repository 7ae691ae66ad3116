<?php
require __DIR__ . '/lib.php';
$db = pdo_open(cfg()['users']['pdo_persistent']);
$st = $db->prepare(SQL_POINT);
$st->execute([bench_id()]);
echo render_row($st->fetch(PDO::FETCH_ASSOC) ?: null);
