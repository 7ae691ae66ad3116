<?php

declare(strict_types=1);

// bench/apps: the Laravel page through PDO (mysql driver), not persistent: Laravel's default.
require __DIR__ . '/../laravel/bootstrap.php';
laravel_page(laravel_mysql_connection(bench_config()['users']['lv_native']));
