<?php

/**
 * local-cache-reader.php is the PHP side of the local cache's history checker (server/cachelocal_checker_test.go):
 * run by `php -S` with several workers (PHP_CLI_SERVER_WORKERS) that share one APCu, each request reads keys through
 * a Client with local_cache, as a page would, and answers the values read.
 *
 *   GET /?sql=SELECT+v+FROM+t+WHERE+k+%3D+%3F&k=3,1,7   -> {"v":[12,null,40]}
 *   GET /?stats=1                                        -> LocalCache::stats() of the host
 *
 * Env: TETHER_SOCKET (absolute), TETHER_BACKEND.
 */

declare(strict_types=1);

require __DIR__ . '/../../autoload.php';

use Tether\Cache\LocalCache;
use Tether\Client;

header('Content-Type: application/json');
if (isset($_GET['stats'])) {
    echo json_encode(LocalCache::stats() + ['available' => LocalCache::available()]);

    return;
}
$client = new Client(['socket' => (string) getenv('TETHER_SOCKET'), 'backend' => (string) getenv('TETHER_BACKEND'), 'local_cache' => true]);
$values = [];
foreach (explode(',', (string) ($_GET['k'] ?? '')) as $k) {
    $row = $client->queryOne((string) $_GET['sql'], [(int) $k], null, null, 60000);
    $values[] = $row === null ? null : (int) $row['v'];
}
echo json_encode(['v' => $values]);
