<?php
// A page of N point reads through Tether with the PHP client's local cache (Client option local_cache; tetherd's
// cache.local): each allowed from the cache for a minute, 95% of them of ids read before (bench_hot_ids), the hits
// answered from APCu in the worker without a call to tetherd (issue 20).
require __DIR__ . '/lib.php';
require_once cfg()['tether_autoload'];
$tether = new Tether\Client(['socket' => cfg()['tether_socket'], 'local_cache' => true]);
foreach (bench_hot_ids() as $id) {
    echo render_row($tether->queryOne(SQL_POINT, [$id], 'maria', null, 60000));
}
