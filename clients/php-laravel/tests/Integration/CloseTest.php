<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Tether\Laravel\Tests\Support\Databases;

/**
 * CloseTest: disconnect() and purge() end the connection's session at once, as with PDO: the open transaction is
 * rolled back and its locks are free, whether the connection had a socket of its own or the worker's shared one.
 */
final class CloseTest extends TestCase
{
    /** @return array<string, array{string, string, bool}> */
    public static function cases(): array
    {
        $cases = [];
        foreach (['mariadb' => Databases::MYSQL, 'postgresql' => Databases::PGSQL] as $name => $platform) {
            foreach (['disconnect', 'purge'] as $how) {
                foreach (['own socket' => false, 'persistent socket' => true] as $socket => $persistent) {
                    $cases["$name, $how, $socket"] = [$platform, $how, $persistent];
                }
            }
        }

        return $cases;
    }

    /**
     * A connection that locked a row in a transaction, then was disconnected or purged: another session (PDO, lock
     * wait 2 s) updates the row at once and sees the transaction's write rolled back.
     *
     * @dataProvider cases
     */
    public function testCloseRollsBackAndFreesTheLocksAtOnce(string $platform, string $how, bool $persistent): void
    {
        $db = $this->connect($platform, ['persistent' => $persistent]);
        $db->statement('DROP TABLE IF EXISTS close_t');
        $db->statement('CREATE TABLE close_t (id INT PRIMARY KEY, v INT NOT NULL)');
        $db->insert('INSERT INTO close_t (id, v) VALUES (1, 10)');

        $db->beginTransaction();
        self::assertSame(1, $db->update('UPDATE close_t SET v = v + 1 WHERE id = 1'));
        if ($how === 'purge') {
            $this->capsule->getDatabaseManager()->purge('default');
        } else {
            $db->disconnect();
        }

        $pdo = Databases::direct($platform);
        $pdo->exec($platform === Databases::MYSQL ? 'SET SESSION innodb_lock_wait_timeout = 2' : "SET lock_timeout = '2s'");
        $t0 = \microtime(true);
        self::assertSame(1, $pdo->exec('UPDATE close_t SET v = v + 100 WHERE id = 1'), 'the row lock was released');
        self::assertLessThan(1.5, \microtime(true) - $t0, 'no lock wait');
        self::assertSame(110, (int) $pdo->query('SELECT v FROM close_t WHERE id = 1')->fetchColumn(), 'the transaction was rolled back');
        if ($how === 'disconnect') {
            self::assertSame(0, $db->transactionLevel());
            self::assertSame(110, (int) $db->selectOne('SELECT v FROM close_t WHERE id = 1')->v, 'reconnects');
        }
    }

    /** Connections opened and disconnected again and again in one process leave no socket behind. */
    public function testOpenCloseCyclesLeakNoSocket(): void
    {
        $count = static fn (): int => \count(\array_filter(
            \scandir('/proc/self/fd') ?: [],
            static fn (string $fd): bool => \str_starts_with((string) @\readlink("/proc/self/fd/$fd"), 'socket:'),
        ));
        foreach ([Databases::MYSQL, Databases::PGSQL] as $platform) {
            $db = $this->connect($platform, ['persistent' => false]);
            $db->select('SELECT 1');
            $db->disconnect();
            $before = $count();
            for ($i = 0; $i < 50; $i++) {
                $db->select('SELECT 1');
                $db->beginTransaction();
                $db->disconnect();
            }
            self::assertSame($before, $count(), "$platform: 50 open/disconnect cycles leave no socket open");
        }
    }
}
