<?php
// bench/replicas/pages/reads.php: a page of ?n point reads (bench/web's lib.php: ids, rows) through tetherd, one
// call each, on the backend ?b: "one" (the primary alone) or "rep" (the same primary with its replica).
require __DIR__ . '/lib.php';
$backend = $_GET['b'] ?? '';
if ($backend !== 'one' && $backend !== 'rep') {
    throw new RuntimeException('want ?b=one or ?b=rep');
}
$tether = tether();
foreach (bench_ids() as $id) {
    echo render_row($tether->queryOne(SQL_POINT, [$id], $backend));
}
