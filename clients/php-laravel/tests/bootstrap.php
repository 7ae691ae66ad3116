<?php

declare(strict_types=1);

// Composer's autoloader when `composer install` was run. Otherwise the Debian packages' autoloaders for
// Illuminate (php-laravel-framework, on the include path /usr/share/php), the Tether client's autoload.php, and
// PSR-4 loaders for Tether\Laravel\ and Tether\Laravel\Tests\, so the tests run with a bare `phpunit`.
$composer = __DIR__ . '/../vendor/autoload.php';
if (is_file($composer)) {
    require $composer;
    return;
}

require_once 'Illuminate/Database/autoload.php';
require_once 'Illuminate/Events/autoload.php';
require_once 'Illuminate/Support/autoload.php';
require_once 'Illuminate/Config/autoload.php';
require_once 'Illuminate/Http/autoload.php';    // the CausalTokens middleware's tests
require_once 'Illuminate/Session/autoload.php';
require_once __DIR__ . '/../../php/autoload.php';
spl_autoload_register(static function (string $class): void {
    foreach (['Tether\\Laravel\\Tests\\' => __DIR__ . '/', 'Tether\\Laravel\\' => __DIR__ . '/../src/'] as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }

            return;
        }
    }
});
