<?php

declare(strict_types=1);

// autoload.php: a PSR-4 autoloader for Tether\DBAL\ without Composer. It loads the Tether client's own
// autoloader (../php/autoload.php) too; Doctrine DBAL must be loadable already (Composer, or Debian's
// /usr/share/php/Doctrine/DBAL/autoload.php).
require_once __DIR__ . '/../php/autoload.php';

spl_autoload_register(static function (string $class): void {
    $prefix = 'Tether\\DBAL\\';
    if (\strncmp($class, $prefix, \strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . \str_replace('\\', '/', \substr($class, \strlen($prefix))) . '.php';
    if (\is_file($file)) {
        require $file;
    }
});
