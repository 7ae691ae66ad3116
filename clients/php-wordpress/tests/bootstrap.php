<?php

declare(strict_types=1);

// tests/bootstrap.php: the package's autoloader (and tether-php's), plus Tether\WordPress\Tests\ for tests/.
require __DIR__ . '/../autoload.php';

spl_autoload_register(static function (string $class): void {
    $prefix = 'Tether\\WordPress\\Tests\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
