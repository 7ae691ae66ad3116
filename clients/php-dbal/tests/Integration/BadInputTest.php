<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Exception\DriverException;
use Tether\DBAL\Exception\RefusedStatement;
use Tether\DBAL\Exception\UnsupportedOption;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * BadInputTest: what the driver cannot serve fails with an exception that names it: unknown options, and
 * statements that control the transaction by their text, which a pool of shared connections cannot honour.
 */
final class BadInputTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testUnsupportedOptionsAreNamed(string $kind): void
    {
        // A PDO attribute this driver cannot honour (PDO::ATTR_EMULATE_PREPARES = 20).
        $e = self::failure(fn () => $this->connect($kind, ['driverOptions' => [20 => true]])->fetchOne('SELECT 1'));
        self::assertInstanceOf(UnsupportedOption::class, $e->getPrevious());
        self::assertStringContainsString('unsupported driver option 20', $e->getMessage());

        $e = self::failure(fn () => $this->connect($kind, ['tether_sockett' => '/tmp/x.sock'])->fetchOne('SELECT 1'));
        self::assertInstanceOf(UnsupportedOption::class, $e->getPrevious());
        self::assertStringContainsString("'tether_sockett'", $e->getMessage());

        $e = self::failure(fn () => $this->connect($kind, ['tether_timeout' => 'soon'])->fetchOne('SELECT 1'));
        self::assertStringContainsString("'tether_timeout': want seconds > 0, got 'soon'", $e->getMessage());

        $e = self::failure(fn () => $this->connect($kind, ['tether_backend' => 'no_such_backend'])->fetchOne('SELECT 1'));
        self::assertStringContainsString('no_such_backend', $e->getMessage());

        $e = self::failure(fn () => $this->connect($kind, ['driverOptions' => ['tether_backend' => 'other']])->fetchOne('SELECT 1'));
        self::assertStringContainsString("'tether_backend'", $e->getMessage());
        self::assertStringContainsString("'other'", $e->getMessage());
    }

    /** Symfony's doctrine.yaml passes `options` as driverOptions: the Tether parameters work from there alone. */
    public function testTetherParametersInDriverOptions(): void
    {
        $conn = \Doctrine\DBAL\DriverManager::getConnection([
            'driverClass' => \Tether\DBAL\Driver::class,
            // Host, user, password and database are ignored: tetherd holds them. (A URL with a scheme would make DBAL
            // pick the scheme's driver instead of driverClass.)
            'url' => '//app:secret@db.invalid:3306/app',
            'driverOptions' => ['tether_socket' => self::env('TETHER_SOCKET'), 'tether_backend' => self::backendName('pgsql')],
        ]);
        self::assertSame('on', $conn->fetchOne("SELECT current_setting('standard_conforming_strings')"));
        self::assertInstanceOf(\Doctrine\DBAL\Platforms\PostgreSQLPlatform::class, $conn->getDatabasePlatform());
        $conn->close();
    }

    /** A backend that is neither MySQL/MariaDB nor PostgreSQL (tetherd's SQLite) is refused on connect, named. */
    public function testBackendOfAnotherKindIsRefused(): void
    {
        $db = self::env('TETHER_IT_DIR') . '/other-kind.db';
        [$tetherd, $socket] = self::startTetherd('other-kind', "[backends.lite]\ntype = \"sqlite\"\ndsn = \"$db\"\n");
        try {
            $e = self::failure(fn () => $this->connect('mysql', ['tether_socket' => $socket, 'tether_backend' => 'lite'])->fetchOne('SELECT 1'));
        } finally {
            self::stopTetherd($tetherd, 15);
        }
        self::assertInstanceOf(\Tether\DBAL\Exception\DriverError::class, $e->getPrevious());
        self::assertStringContainsString('tetherd backend lite: SELECT VERSION() failed', $e->getMessage());
        self::assertStringContainsString('this driver serves MySQL/MariaDB and PostgreSQL backends', $e->getMessage());
    }

    /** The init command is a MySQL option: on PostgreSQL it is refused, not ignored. */
    public function testInitCommandOnPostgreSQLIsRefused(): void
    {
        $e = self::failure(fn () => $this->connect('pgsql', ['driverOptions' => [1002 => "SET TIME ZONE 'UTC'"]])->fetchOne('SELECT 1'));
        self::assertInstanceOf(UnsupportedOption::class, $e->getPrevious());
        self::assertStringContainsString('MYSQL_ATTR_INIT_COMMAND', $e->getMessage());
    }

    /** @dataProvider backends */
    public function testTransactionControlBySqlTextIsRefused(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'bad_t', 'id INT PRIMARY KEY', $kind);

        // Outside a transaction tetherd refuses a statement that leaves one open, and rolls it back.
        foreach (['BEGIN', 'START TRANSACTION', $kind === 'mysql' ? 'SET autocommit = 0' : 'BEGIN ISOLATION LEVEL SERIALIZABLE'] as $sql) {
            $e = self::failure(static fn () => $conn->executeStatement($sql));
            self::assertInstanceOf(RefusedStatement::class, $e->getPrevious(), $sql);
            self::assertStringContainsString('"' . $sql . '"', $e->getMessage());
            self::assertStringContainsString('beginTransaction()', $e->getMessage());
        }
        if ($kind === 'mysql') {
            $e = self::failure(static fn () => $conn->executeStatement('LOCK TABLES bad_t WRITE'));
            self::assertInstanceOf(RefusedStatement::class, $e->getPrevious());
            self::assertStringContainsString('"LOCK TABLES bad_t WRITE"', $e->getMessage());
        }
        // Nothing stayed open: a write outside a transaction is committed at once.
        $conn->insert('bad_t', ['id' => 1]);
        self::assertSame(1, (int) self::pdo($kind)->query('SELECT COUNT(*) FROM bad_t')->fetchColumn());

        // Inside a transaction the driver refuses them itself: they would end tetherd's transaction behind it.
        $conn->beginTransaction();
        $conn->insert('bad_t', ['id' => 2]);
        foreach (['COMMIT', 'ROLLBACK', '/* hidden */ commit work', 'START TRANSACTION', $kind === 'mysql' ? 'LOCK TABLES bad_t WRITE' : 'END'] as $sql) {
            $e = self::failure(static fn () => $conn->executeStatement($sql));
            self::assertInstanceOf(RefusedStatement::class, $e->getPrevious(), $sql);
            self::assertStringContainsString($sql, $e->getMessage());
        }
        // The transaction is intact: rolling it back drops the insert.
        $conn->rollBack();
        self::assertSame(0, (int) self::pdo($kind)->query('SELECT COUNT(*) FROM bad_t WHERE id = 2')->fetchColumn());
    }

    /**
     * Stored procedures on MySQL/MariaDB: one result set comes back as the query's rows; a procedure that returns
     * two fails, named, with its writes done (tetherd answers one result set per query; the driver sends a CALL as a
     * query, whichever DBAL method runs it).
     */
    public function testStoredProcedures(): void
    {
        $pdo = self::pdo('mysql');
        $pdo->exec('DROP TABLE IF EXISTS bad_proc_log');
        $pdo->exec('CREATE TABLE bad_proc_log (v INT)');
        $pdo->exec('DROP PROCEDURE IF EXISTS bad_proc_one');
        $pdo->exec('CREATE PROCEDURE bad_proc_one(IN n INT) BEGIN SELECT n AS a, n * 2 AS b; END');
        $pdo->exec('DROP PROCEDURE IF EXISTS bad_proc_two');
        $pdo->exec('CREATE PROCEDURE bad_proc_two(IN n INT) BEGIN INSERT INTO bad_proc_log VALUES (n); SELECT 1 AS x; SELECT 2 AS y; END');
        $conn = $this->connect('mysql');

        self::assertSame([['a' => 21, 'b' => 42]], $conn->fetchAllAssociative('CALL bad_proc_one(?)', [21]));
        $e = self::failure(static fn () => $conn->fetchAllAssociative('CALL bad_proc_two(?)', [7]));
        self::assertStringContainsString('more than one result set', $e->getMessage());
        $e = self::failure(static fn () => $conn->executeStatement('CALL bad_proc_two(?)', [8]));
        self::assertStringContainsString('the statement ran', $e->getMessage());
        self::assertSame(2, (int) $pdo->query('SELECT COUNT(*) FROM bad_proc_log')->fetchColumn(), 'the procedure ran both times');

        $pdo->exec('DROP PROCEDURE bad_proc_one');
        $pdo->exec('DROP PROCEDURE bad_proc_two');
        $pdo->exec('DROP TABLE bad_proc_log');
    }

    private static function failure(callable $fn): DriverException
    {
        try {
            $fn();
        } catch (DriverException $e) {
            return $e;
        }
        self::fail('expected a DriverException');
    }
}
