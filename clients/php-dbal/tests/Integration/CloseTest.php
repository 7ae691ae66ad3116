<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * CloseTest: closing a connection ends its session at once, as with PDO: the open transaction is rolled back and
 * its locks are free before close() returns, and the socket to tetherd is not kept.
 */
final class CloseTest extends IntegrationTestCase
{
    /** @return array<string, array{string, bool}> */
    public static function backendsAndSockets(): array
    {
        return [
            'mariadb, own socket' => ['mysql', false],
            'mariadb, persistent socket' => ['mysql', true],
            'postgresql, own socket' => ['pgsql', false],
            'postgresql, persistent socket' => ['pgsql', true],
        ];
    }

    /**
     * A connection that locked a row in a transaction and was closed: another session (PDO) gets the row at once
     * (its lock wait is 2 s: a lock still held fails the update) and sees the transaction's write rolled back.
     *
     * @dataProvider backendsAndSockets
     */
    public function testCloseRollsBackAndFreesTheLocksAtOnce(string $kind, bool $persistent): void
    {
        $setup = $this->connect($kind);
        self::recreate($setup, 'close_t', 'id INT PRIMARY KEY, v INT NOT NULL', $kind);
        $setup->insert('close_t', ['id' => 1, 'v' => 10]);

        $conn = $this->connect($kind, ['persistent' => $persistent]);
        $conn->beginTransaction();
        self::assertSame(1, $conn->executeStatement('UPDATE close_t SET v = v + 1 WHERE id = 1'));
        $conn->close();

        $pdo = self::pdo($kind);
        $pdo->exec($kind === 'mysql' ? 'SET SESSION innodb_lock_wait_timeout = 2' : "SET lock_timeout = '2s'");
        $t0 = microtime(true);
        self::assertSame(1, $pdo->exec('UPDATE close_t SET v = v + 100 WHERE id = 1'), 'the row lock was released by close()');
        self::assertLessThan(1.5, microtime(true) - $t0, 'no lock wait');
        self::assertSame(110, (int) $pdo->query('SELECT v FROM close_t WHERE id = 1')->fetchColumn(), 'the closed transaction was rolled back');

        // The DBAL connection reconnects when used again, with no transaction.
        self::assertFalse($conn->isTransactionActive());
        self::assertSame(110, (int) $conn->fetchOne('SELECT v FROM close_t WHERE id = 1'));
    }

    /**
     * Connections opened and closed again and again in one long-running process leave no socket behind (counted
     * in /proc/self/fd): the driver connection and its client are freed by close().
     */
    public function testOpenCloseCyclesLeakNoSocket(): void
    {
        $count = static fn (): int => \count(\array_filter(
            \scandir('/proc/self/fd') ?: [],
            static fn (string $fd): bool => \str_starts_with((string) @\readlink("/proc/self/fd/$fd"), 'socket:'),
        ));
        foreach (['mysql', 'pgsql'] as $kind) {
            $conn = $this->connect($kind);
            $conn->fetchOne('SELECT 1');
            $conn->close();
            $before = $count();
            for ($i = 0; $i < 50; $i++) {
                $conn->fetchOne('SELECT 1');
                $conn->beginTransaction();
                $conn->close();
            }
            self::assertSame($before, $count(), "$kind: 50 open/close cycles leave no socket open");
        }
    }
}
