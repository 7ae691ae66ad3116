<?php

declare(strict_types=1);

// bench/apps: the Laravel page through PDO (mysql driver) with PDO::ATTR_PERSISTENT: one connection per PHP worker.
require __DIR__ . '/../laravel/bootstrap.php';
laravel_page(laravel_mysql_connection(bench_config()['users']['lv_persistent'], [PDO::ATTR_PERSISTENT => true]));
