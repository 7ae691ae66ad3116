<?php

declare(strict_types=1);

// Composer's autoloader when `composer install` was run. Otherwise the package's own autoload.php for Tether\ and
// a PSR-4 loader for Tether\Tests\ (autoload-dev in composer.json), so the tests run with a bare `phpunit` binary
// and no dependencies installed.
$composer = __DIR__ . '/../vendor/autoload.php';
if (is_file($composer)) {
    require $composer;
    return;
}

require __DIR__ . '/../autoload.php';
spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Tether\\Tests\\', 13) === 0) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, 13)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
