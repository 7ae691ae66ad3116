<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Unit;

use PHPUnit\Framework\TestCase;

/**
 * Dbal4SignaturesTest: the driver's classes link against DBAL 4's interface signatures (see
 * tests/Support/dbal4-link-check.php, run in a process of its own since this one has DBAL 3 loaded), and DBAL 4's
 * getDatabasePlatform(ServerVersionProvider) picks the platform through the dialect's DBAL driver.
 */
final class Dbal4SignaturesTest extends TestCase
{
    public function testDriverLinksAgainstDbal4Interfaces(): void
    {
        $script = \dirname(__DIR__) . '/Support/dbal4-link-check.php';
        \exec(\escapeshellarg(PHP_BINARY) . ' ' . \escapeshellarg($script) . ' 2>&1', $output, $status);
        $text = \implode("\n", $output);
        self::assertSame(0, $status, $text);
        foreach (['Driver', 'Connection', 'Statement', 'Result', 'ExceptionConverter', 'Dialect'] as $class) {
            self::assertStringContainsString("linked Tether\\DBAL\\$class", $text);
        }
        self::assertStringContainsString('Doctrine\DBAL\Platforms\MySQL80Platform', $text);
        self::assertStringEndsWith('ok', $text);
    }
}
