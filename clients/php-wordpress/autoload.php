<?php

declare(strict_types=1);

// autoload.php registers an autoloader for Tether\WordPress\ (src/) and makes sure tether-php's Tether\ classes load,
// for use without Composer (db.php requires it). Where tether-php comes from, first that applies:
//   1. a Composer vendor/autoload.php beside this file (composer install in this package);
//   2. the constant TETHER_PHP_AUTOLOAD (define it in wp-config.php): the path of tether-php's autoload.php;
//   3. ../php/autoload.php: this package inside a checkout of the Tether repository (clients/php-wordpress).
spl_autoload_register(static function (string $class): void {
    if (\str_starts_with($class, 'Tether\\WordPress\\')) {
        $file = __DIR__ . '/src/' . \str_replace('\\', '/', \substr($class, \strlen('Tether\\WordPress\\'))) . '.php';
        if (\is_file($file)) {
            require $file;
        }
    }
});

if (!\class_exists(\Tether\Client::class)) {
    if (\is_file(__DIR__ . '/vendor/autoload.php')) {
        require_once __DIR__ . '/vendor/autoload.php';
    } elseif (\defined('TETHER_PHP_AUTOLOAD')) {
        require_once \constant('TETHER_PHP_AUTOLOAD');
    } else {
        require_once __DIR__ . '/../php/autoload.php';
    }
}
