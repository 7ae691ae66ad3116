<?php

declare(strict_types=1);

// tests/bootstrap.php: Composer's autoloader when the package was installed with it, else Debian's Doctrine DBAL
// (php-doctrine-dbal) and this package's own autoload.php (which loads the Tether client's).
$vendor = __DIR__ . '/../vendor/autoload.php';
if (is_file($vendor)) {
    require $vendor;
} else {
    require_once '/usr/share/php/Doctrine/DBAL/autoload.php';
    require_once __DIR__ . '/../autoload.php';
}

spl_autoload_register(static function (string $class): void {
    $prefix = 'Tether\\DBAL\\Tests\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
