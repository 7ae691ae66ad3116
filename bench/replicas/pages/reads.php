<?php
// bench/replicas/pages/reads.php: a page of ?n point reads (bench/web's lib.php: ids, rows) through tetherd, one
// call each, on the backend ?b: MariaDB "one" (the primary alone) or "rep" (the same primary with its replica);
// PostgreSQL "pone" or "prep" the same.
require __DIR__ . '/lib.php';
$backend = $_GET['b'] ?? '';
if (!in_array($backend, ['one', 'rep', 'pone', 'prep'], true)) {
    throw new RuntimeException('want ?b=one, rep, pone or prep');
}
$sql = $backend[0] === 'p' ? SQL_POINT_PG : SQL_POINT;
$tether = tether();
foreach (bench_ids() as $id) {
    echo render_row($tether->queryOne($sql, [$id], $backend));
}
