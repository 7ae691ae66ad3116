<?php

declare(strict_types=1);

// bench/apps: the Laravel page through the tether driver (clients/php-laravel), registered on the Capsule's
// container as its README says for an app without Laravel's service providers. Without Composer: the Tether client's
// autoloader, and PSR-4 for Tether\Laravel\ (composer.json's autoload).
require __DIR__ . '/../laravel/bootstrap.php';
require_once __DIR__ . '/../clients/php/autoload.php';
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Tether\\Laravel\\')) {
        $file = __DIR__ . '/../clients/php-laravel/src/' . strtr(substr($class, strlen('Tether\\Laravel\\')), '\\', '/') . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
$cfg = bench_config();
laravel_page([
    'driver' => 'tether',
    'socket' => $cfg['tether_socket'],
    'backend' => $cfg['tether_backend'],
    'platform' => 'mysql',
    'database' => $cfg['db_name'],
    'charset' => 'utf8mb4',
    'collation' => 'utf8mb4_unicode_ci',
    'prefix' => '',
    'strict' => true,
], static fn (Illuminate\Database\Capsule\Manager $capsule) => Tether\Laravel\TetherDriver::register($capsule->getContainer()));
