<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Doctrine\DBAL\Exception\DriverException;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * TransactionTest: commit, rollback, nested transactions with savepoints, every statement of a transaction on
 * its one backend connection, and lastInsertId() inside and outside transactions.
 */
final class TransactionTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testCommitAndRollback(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'tx_items', 'id INT PRIMARY KEY, name VARCHAR(20)', $kind);
        $direct = self::pdo($kind);
        $backendId = $kind === 'mysql' ? 'SELECT CONNECTION_ID()' : 'SELECT pg_backend_pid()';

        $conn->beginTransaction();
        $pid = $conn->fetchOne($backendId);
        $conn->insert('tx_items', ['id' => 1, 'name' => 'kept']);
        self::assertSame(1, (int) $conn->fetchOne('SELECT COUNT(*) FROM tx_items'), 'the transaction sees its own insert');
        self::assertSame(0, (int) $direct->query('SELECT COUNT(*) FROM tx_items')->fetchColumn(), 'no one else sees it before commit');
        for ($i = 0; $i < 5; $i++) {
            self::assertSame($pid, $conn->fetchOne($backendId), 'every statement of the transaction runs on its backend connection');
        }
        $conn->commit();
        self::assertSame(1, (int) $direct->query('SELECT COUNT(*) FROM tx_items')->fetchColumn());

        $conn->beginTransaction();
        $conn->insert('tx_items', ['id' => 2, 'name' => 'dropped']);
        $conn->update('tx_items', ['name' => 'changed'], ['id' => 1]);
        $conn->rollBack();
        self::assertSame([['id' => 1, 'name' => 'kept']], $conn->fetchAllAssociative('SELECT id, name FROM tx_items ORDER BY id'));

        // transactional(): commits on return, rolls back on an exception.
        $conn->transactional(static fn (Connection $c) => $c->insert('tx_items', ['id' => 3, 'name' => 'closure']));
        try {
            $conn->transactional(static function (Connection $c): void {
                $c->insert('tx_items', ['id' => 4, 'name' => 'never']);
                throw new \DomainException('abort');
            });
            self::fail('transactional() rethrows');
        } catch (\DomainException) {
        }
        self::assertSame([1, 3], array_map('intval', $conn->fetchFirstColumn('SELECT id FROM tx_items ORDER BY id')));
        self::assertFalse($conn->isTransactionActive());
    }

    /** @dataProvider backends */
    public function testNestedTransactionsWithSavepoints(string $kind): void
    {
        $conn = $this->connect($kind);
        $conn->setNestTransactionsWithSavepoints(true);
        self::recreate($conn, 'tx_nested', 'id INT PRIMARY KEY', $kind);

        $conn->beginTransaction();
        $conn->insert('tx_nested', ['id' => 1]);
        $conn->beginTransaction();                       // SAVEPOINT
        $conn->insert('tx_nested', ['id' => 2]);
        $conn->beginTransaction();                       // a second level
        $conn->insert('tx_nested', ['id' => 3]);
        $conn->commit();                                 // RELEASE SAVEPOINT
        $conn->rollBack();                               // ROLLBACK TO SAVEPOINT: 2 and 3 go, 1 stays
        self::assertSame(1, $conn->getTransactionNestingLevel());
        $conn->insert('tx_nested', ['id' => 4]);

        // An error inside a savepoint: rolled back to it, the outer transaction goes on (on PostgreSQL too, where
        // the error aborted the transaction until the ROLLBACK TO SAVEPOINT).
        $conn->beginTransaction();
        try {
            $conn->insert('tx_nested', ['id' => 1]);
            self::fail('duplicate key');
        } catch (DriverException) {
            $conn->rollBack();
        }
        $conn->insert('tx_nested', ['id' => 5]);
        $conn->commit();

        self::assertSame([1, 4, 5], array_map('intval', self::pdo($kind)->query('SELECT id FROM tx_nested ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN)));
    }

    /** @dataProvider backends */
    public function testLastInsertId(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'tx_ids', self::serialKey($kind) . ', name VARCHAR(20)', $kind);
        self::recreate($conn, 'tx_noseq', 'code VARCHAR(10) PRIMARY KEY', $kind);

        // Outside a transaction: each insert, then lastInsertId(), DBAL's usual flow.
        $conn->insert('tx_ids', ['name' => 'a']);
        self::assertSame(1, (int) $conn->lastInsertId());
        $conn->insert('tx_ids', ['name' => 'b']);
        self::assertSame(2, (int) $conn->lastInsertId());
        // Another connection's inserts do not change this connection's id.
        $other = $this->connect($kind);
        $other->insert('tx_ids', ['name' => 'other']);
        self::assertSame(3, (int) $other->lastInsertId());
        self::assertSame(2, (int) $conn->lastInsertId());

        // Inside a transaction, on its backend connection; with the sequence named on PostgreSQL.
        $conn->beginTransaction();
        $conn->insert('tx_ids', ['name' => 'c']);
        self::assertSame(4, (int) $conn->lastInsertId());
        if ($kind === 'pgsql') {
            self::assertSame(4, (int) $conn->lastInsertId('tx_ids_id_seq'));
        }
        $conn->commit();
        self::assertSame(4, (int) $conn->lastInsertId(), 'the id asked inside the transaction stays');
        if ($kind === 'pgsql') {
            // On PostgreSQL, an id not asked before commit is gone with the transaction's connection: an error, not
            // a stale id.
            $conn->beginTransaction();
            $conn->insert('tx_ids', ['name' => 'd']);
            $conn->commit();
            try {
                $conn->lastInsertId();
                self::fail('no id after commit');
            } catch (DriverException $e) {
                self::assertStringContainsString('inside the transaction', $e->getMessage());
            }
        } else {
            $conn->transactional(static fn (Connection $c) => $c->insert('tx_ids', ['name' => 'd']));
            self::assertSame(5, (int) $conn->lastInsertId());
        }

        // An insert into a table without a sequence still inserts, once.
        $conn->insert('tx_noseq', ['code' => 'x']);
        self::assertSame(1, (int) self::pdo($kind)->query('SELECT COUNT(*) FROM tx_noseq')->fetchColumn());
        self::assertSame(['a', 'b', 'other', 'c', 'd'], $conn->fetchFirstColumn('SELECT name FROM tx_ids ORDER BY id'));
    }

    /**
     * On PostgreSQL, an INSERT outside a transaction into a table without a sequence, on backend sessions that never
     * called one (a fresh tetherd's pool): LASTVAL() fails and aborts the INSERT's little transaction, so the driver
     * runs the INSERT again alone. It is inserted exactly once, and lastInsertId() has no id.
     */
    public function testPostgreSQLInsertWithoutSequenceOnFreshSessions(): void
    {
        $setup = $this->connect('pgsql');
        self::recreate($setup, 'tx_noseq_fresh', 'code VARCHAR(10) PRIMARY KEY', 'pgsql');
        [$tetherd, $socket] = self::startTetherd('fresh-pool');
        try {
            $conn = $this->connect('pgsql', ['tether_socket' => $socket]);
            self::assertSame(1, $conn->insert('tx_noseq_fresh', ['code' => 'once']));
            try {
                $conn->lastInsertId();
                self::fail('no sequence was called');
            } catch (DriverException $e) {
                self::assertSame('55000', $e->getSQLState());
            }
            $conn->insert('tx_noseq_fresh', ['code' => 'twice']);
            $conn->close();
        } finally {
            self::stopTetherd($tetherd, 15);
        }
        self::assertSame(['once', 'twice'], self::pdo('pgsql')->query('SELECT code FROM tx_noseq_fresh ORDER BY code')->fetchAll(\PDO::FETCH_COLUMN));
    }

    /** lastInsertId() on PostgreSQL with tether_pg_lastval off: no id outside a transaction, a clear error. */
    public function testPostgreSQLLastInsertIdWithoutLastval(): void
    {
        $conn = $this->connect('pgsql', ['tether_pg_lastval' => false]);
        self::recreate($conn, 'tx_ids_off', self::serialKey('pgsql'), 'pgsql');
        $conn->executeStatement('INSERT INTO tx_ids_off DEFAULT VALUES');
        try {
            $conn->lastInsertId();
            self::fail('no id is known');
        } catch (DriverException $e) {
            self::assertStringContainsString('tether_pg_lastval', $e->getMessage());
            self::assertSame('55000', $e->getSQLState());
        }
        self::assertSame([['id' => 9]], $conn->fetchAllAssociative('INSERT INTO tx_ids_off (id) VALUES (9) RETURNING id'));
    }

    /**
     * Inside a transaction, what only looks like transaction control runs: ROLLBACK WORK TO SAVEPOINT (a savepoint's
     * rollback, the transaction stays open) and MariaDB's compound statement BEGIN NOT ATOMIC ... END (the driver
     * refused both, taking them for ROLLBACK and BEGIN).
     *
     * @dataProvider backends
     */
    public function testSavepointRollbackAndCompoundStatementsAreNotTransactionControl(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'tx_lookalike', 'id INT PRIMARY KEY', $kind);
        $conn->beginTransaction();
        $conn->insert('tx_lookalike', ['id' => 1]);
        $conn->executeStatement('SAVEPOINT s1');
        $conn->insert('tx_lookalike', ['id' => 2]);
        $conn->executeStatement($kind === 'mysql' ? 'ROLLBACK WORK TO SAVEPOINT s1' : 'ROLLBACK TRANSACTION TO SAVEPOINT s1');
        if ($kind === 'mysql') {
            $conn->executeStatement('BEGIN NOT ATOMIC INSERT INTO tx_lookalike VALUES (3); END');
        }
        self::assertTrue($conn->isTransactionActive());
        $conn->commit();
        self::assertSame($kind === 'mysql' ? [1, 3] : [1], \array_map('intval', self::pdo($kind)->query('SELECT id FROM tx_lookalike ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN)));
    }
}
