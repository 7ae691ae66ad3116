<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Doctrine\DBAL\Exception\ConnectionException;
use Doctrine\DBAL\Exception\ConnectionLost;
use Doctrine\DBAL\Exception\DeadlockException;
use Doctrine\DBAL\Exception\ForeignKeyConstraintViolationException;
use Doctrine\DBAL\Exception\TableNotFoundException;
use Doctrine\DBAL\Exception\UniqueConstraintViolationException;
use Tether\DBAL\Exception\DriverError;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * ExceptionTest: backend errors become DBAL's exception classes through DBAL's own converter of the dialect, with
 * the backend's code (MySQL error number as the code, PostgreSQL SQLSTATE); a deadlock between two real
 * transactions on two connections; and tetherd unreachable or gone.
 */
final class ExceptionTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testConstraintViolations(string $kind): void
    {
        $conn = $this->connect($kind);
        $conn->executeStatement('DROP TABLE IF EXISTS exc_child');
        self::recreate($conn, 'exc_parent', 'id INT PRIMARY KEY, email VARCHAR(50) UNIQUE', $kind);
        self::recreate($conn, 'exc_child', 'id INT PRIMARY KEY, parent_id INT NOT NULL REFERENCES exc_parent (id)', $kind);
        $conn->insert('exc_parent', ['id' => 1, 'email' => 'a@example.org']);

        $e = self::catch(static fn () => $conn->insert('exc_parent', ['id' => 2, 'email' => 'a@example.org']));
        self::assertInstanceOf(UniqueConstraintViolationException::class, $e);
        self::assertBackendCode($kind, 1062, '23505', $e);
        self::assertStringContainsString('INSERT INTO exc_parent', (string) $e->getQuery()?->getSQL(), 'DBAL keeps the statement');

        $e = self::catch(static fn () => $conn->insert('exc_child', ['id' => 1, 'parent_id' => 99]));
        self::assertInstanceOf(ForeignKeyConstraintViolationException::class, $e);
        self::assertBackendCode($kind, 1452, '23503', $e);

        $e = self::catch(static fn () => $conn->fetchAllAssociative('SELECT * FROM exc_no_such_table'));
        self::assertInstanceOf(TableNotFoundException::class, $e);

        // The same classes in a transaction; the connection goes on after it.
        $conn->beginTransaction();
        self::assertInstanceOf(UniqueConstraintViolationException::class, self::catch(static fn () => $conn->insert('exc_parent', ['id' => 1, 'email' => 'b@example.org'])));
        $conn->rollBack();
        self::assertSame(1, (int) $conn->fetchOne('SELECT COUNT(*) FROM exc_parent'));

        // The same class as DBAL's own PDO driver gives.
        $direct = $this->directDbal($kind);
        self::assertInstanceOf(UniqueConstraintViolationException::class, self::catch(static fn () => $direct->insert('exc_parent', ['id' => 3, 'email' => 'a@example.org'])));
    }

    /** @dataProvider backends */
    public function testDeadlockBetweenTwoConcurrentTransactions(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'exc_deadlock', 'id INT PRIMARY KEY, n INT NOT NULL', $kind);
        $conn->executeStatement('INSERT INTO exc_deadlock (id, n) VALUES (1, 0), (2, 0)');

        $conn->beginTransaction();
        $conn->executeStatement('UPDATE exc_deadlock SET n = n + 1 WHERE id = 1');
        $peer = proc_open(
            [PHP_BINARY, __DIR__ . '/../Support/deadlock-peer.php', $kind, 'exc_deadlock'],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        self::assertIsResource($peer);
        try {
            $line = fgets($pipes[1]);
            if ($line !== "locked\n") {
                self::fail('the peer did not lock row 2: ' . $line . stream_get_contents($pipes[2]));
            }
            fwrite($pipes[0], "go\n");
            fflush($pipes[0]);
            usleep(300_000); // the peer now waits for row 1, held here
            $mine = self::catch(static fn () => $conn->executeStatement('UPDATE exc_deadlock SET n = n + 1 WHERE id = 2'));
            if ($mine === null) {
                $conn->commit();
            } else {
                $conn->rollBack();
            }
            $theirs = trim((string) fgets($pipes[1]));
        } finally {
            foreach ($pipes as $pipe) {
                fclose($pipe);
            }
            proc_close($peer);
        }

        // Exactly one of the two was chosen as the deadlock's victim, and got DeadlockException; the other committed.
        if ($mine === null) {
            self::assertSame(DeadlockException::class, $theirs, 'the peer was the victim');
        } else {
            self::assertInstanceOf(DeadlockException::class, $mine);
            self::assertBackendCode($kind, 1213, '40P01', $mine);
            self::assertSame('committed', $theirs);
        }
        self::assertSame(2, (int) $conn->fetchOne('SELECT SUM(n) FROM exc_deadlock'), 'the survivor committed both its updates');
    }

    /** @dataProvider backends */
    public function testUnreachableTetherdIsAConnectionException(string $kind): void
    {
        $conn = $this->connect($kind, ['tether_socket' => sys_get_temp_dir() . '/tether-dbal-no-such.sock']);
        $e = self::catch(static fn () => $conn->fetchOne('SELECT 1'));
        self::assertInstanceOf(ConnectionException::class, $e);
        self::assertNotInstanceOf(ConnectionLost::class, $e);
        self::assertStringContainsString('cannot reach the database through tetherd', $e->getMessage());
    }

    /** @dataProvider backends */
    public function testTetherdGoneMidSessionIsConnectionLost(string $kind): void
    {
        // A tetherd of this test's own, killed under an open connection and its transaction.
        [$tetherd, $socket] = self::startTetherd('lost-' . $kind);
        try {
            $conn = $this->connect($kind, ['tether_socket' => $socket]);
            self::assertSame(1, (int) $conn->fetchOne('SELECT 1'));
            $conn->beginTransaction();
            $conn->fetchOne('SELECT 1');
        } finally {
            self::stopTetherd($tetherd, 9); // SIGKILL: gone at once (SIGTERM would drain the open transaction)
        }

        $e = self::catch(static fn () => $conn->fetchOne('SELECT 1'));
        self::assertInstanceOf(ConnectionLost::class, $e, 'inside the transaction');
        self::assertInstanceOf(DriverError::class, $e->getPrevious());
        self::assertStringContainsString('lost the connection to the database through tetherd', $e->getMessage());
        // DBAL closed the connection on ConnectionLost, and its transaction with it.
        self::assertFalse($conn->isTransactionActive());
        // Connecting again finds no tetherd.
        $e = self::catch(static fn () => $conn->fetchOne('SELECT 1'));
        self::assertInstanceOf(ConnectionException::class, $e);
        self::assertNotInstanceOf(ConnectionLost::class, $e);
    }

    private static function catch(callable $fn): ?\Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            return $e;
        }

        return null;
    }

    private static function assertBackendCode(string $kind, int $mysqlCode, string $sqlState, \Throwable $e): void
    {
        $driverError = $e->getPrevious();
        self::assertInstanceOf(DriverError::class, $driverError);
        if ($kind === 'mysql') {
            self::assertSame($mysqlCode, $driverError->getCode());
        } else {
            self::assertSame($sqlState, $driverError->getSQLState());
        }
    }
}
