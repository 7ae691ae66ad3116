<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use PHPUnit\Framework\TestCase;

/**
 * AutoloadTest keeps autoload.php's class map in step with src/: every class file there must load through it (the
 * tests' bootstrap registers autoload.php when Composer's autoloader is absent).
 */
final class AutoloadTest extends TestCase
{
    public function testEveryClassInSrcAutoloads(): void
    {
        $src = \dirname(__DIR__, 2) . '/src';
        $files = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($src, \FilesystemIterator::SKIP_DOTS));
        $checked = 0;
        foreach ($files as $file) {
            if ($file->getExtension() !== 'php') {
                continue;
            }
            $class = 'Tether\\' . \str_replace('/', '\\', \substr($file->getPathname(), \strlen($src) + 1, -4));
            self::assertTrue(
                \class_exists($class) || \interface_exists($class) || \trait_exists($class),
                "$class (src/" . \substr($file->getPathname(), \strlen($src) + 1) . ') is not in autoload.php\'s class map',
            );
            $checked++;
        }
        self::assertGreaterThan(10, $checked);
    }
}
