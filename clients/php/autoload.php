<?php

declare(strict_types=1);

// autoload.php registers a PSR-4 autoloader for the Tether\ namespace, for use without Composer:
//     require '/path/to/clients/php/autoload.php';
// With Composer, require vendor/autoload.php instead.
spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Tether\\', 7) === 0) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 7)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
