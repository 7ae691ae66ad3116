<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\Events\TransactionBeginning;
use Illuminate\Database\Events\TransactionCommitted;
use Illuminate\Database\Events\TransactionRolledBack;
use Illuminate\Database\QueryException;
use Illuminate\Database\Schema\Blueprint;
use Tether\Laravel\Tests\Support\Databases;

/**
 * TransactionTest checks Laravel's transactions through the tether driver: one pinned backend transaction, nested
 * levels as savepoints (trans2, trans3, ...), rollBack to a level, DB::transaction() committing or rolling back on
 * an exception, and isolation from other sessions until commit.
 */
final class TransactionTest extends TestCase
{
    private function table(Connection $db): void
    {
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('tx_items');
        $schema->create('tx_items', static function (Blueprint $t): void {
            $t->id();
            $t->string('name')->unique();
        });
    }

    /** @return list<string> */
    private static function committedNames(\PDO $direct): array
    {
        return $direct->query('SELECT name FROM tx_items ORDER BY name')->fetchAll(\PDO::FETCH_COLUMN);
    }

    /** @dataProvider platforms */
    public function testSavepointsInnerRollbackKeepsOuterWork(string $platform): void
    {
        $db = $this->connect($platform);
        $this->table($db);
        $direct = Databases::direct($platform);
        $events = [];
        foreach ([TransactionBeginning::class, TransactionCommitted::class, TransactionRolledBack::class] as $class) {
            $db->getEventDispatcher()->listen($class, static function (object $e) use (&$events): void {
                $events[] = (new \ReflectionClass($e))->getShortName();
            });
        }

        $db->beginTransaction();
        $db->table('tx_items')->insert(['name' => 'outer']);
        self::assertSame([], self::committedNames($direct), 'uncommitted work is invisible to other sessions');

        $db->beginTransaction();                       // SAVEPOINT trans2
        self::assertSame(2, $db->transactionLevel());
        $db->table('tx_items')->insert(['name' => 'inner']);
        $db->beginTransaction();                       // SAVEPOINT trans3
        $db->table('tx_items')->insert(['name' => 'innermost']);
        self::assertSame(3, $db->table('tx_items')->count(), 'the transaction sees its own work');
        $db->rollBack(1);                              // ROLLBACK TO SAVEPOINT trans2
        self::assertSame(1, $db->transactionLevel());
        self::assertSame(['outer'], $db->table('tx_items')->pluck('name')->all());

        $db->beginTransaction();
        $db->table('tx_items')->insert(['name' => 'second']);
        $db->commit();                                 // level 2 -> 1, nothing sent
        $db->commit();                                 // COMMIT
        self::assertSame(0, $db->transactionLevel());
        self::assertSame(['outer', 'second'], self::committedNames($direct));
        self::assertSame(['TransactionBeginning', 'TransactionBeginning', 'TransactionBeginning', 'TransactionRolledBack', 'TransactionBeginning', 'TransactionCommitted', 'TransactionCommitted'], $events);
    }

    /** @dataProvider platforms */
    public function testTransactionClosureCommitsOrRollsBackOnException(string $platform): void
    {
        $db = $this->connect($platform);
        $this->table($db);
        $direct = Databases::direct($platform);

        $result = $db->transaction(static function (Connection $db): string {
            $db->table('tx_items')->insert(['name' => 'kept']);

            return 'done';
        });
        self::assertSame('done', $result);
        self::assertSame(['kept'], self::committedNames($direct));

        try {
            $db->transaction(static function (Connection $db): void {
                $db->table('tx_items')->insert(['name' => 'lost']);
                throw new \DomainException('changed my mind');
            });
            self::fail('the exception was swallowed');
        } catch (\DomainException $e) {
            self::assertSame('changed my mind', $e->getMessage());
        }
        self::assertSame(0, $db->transactionLevel());
        self::assertSame(['kept'], self::committedNames($direct));

        // A failing statement inside a nested DB::transaction rolls back to its savepoint only; on PostgreSQL that
        // also clears the aborted state, so the outer transaction goes on.
        $db->transaction(static function (Connection $db): void {
            $db->table('tx_items')->insert(['name' => 'outer']);
            try {
                $db->transaction(static function (Connection $db): void {
                    $db->table('tx_items')->insert(['name' => 'nested']);
                    $db->table('tx_items')->insert(['name' => 'kept']); // unique violation
                });
            } catch (QueryException) {
            }
            $db->table('tx_items')->insert(['name' => 'after']);
        });
        self::assertSame(['after', 'kept', 'outer'], self::committedNames($direct));
    }

    /** @dataProvider platforms */
    public function testTheTransactionRunsOnOneBackendConnection(string $platform): void
    {
        $db = $this->connect($platform);
        $sql = $platform === Databases::MYSQL ? 'select connection_id() as id' : 'select pg_backend_pid() as id';
        $ids = $db->transaction(static function (Connection $db) use ($sql): array {
            $ids = [];
            for ($i = 0; $i < 5; $i++) {
                $ids[] = $db->selectOne($sql)->id;
            }

            return $ids;
        });
        self::assertCount(1, \array_unique($ids));
    }

    public function testASerializationFailureIsRetriedByTransactionAttempts(): void
    {
        $db = $this->connect(Databases::PGSQL, ['isolation_level' => 'repeatable read']);
        $db->getSchemaBuilder()->dropIfExists('tx_counters');
        $db->getSchemaBuilder()->create('tx_counters', static function (Blueprint $t): void {
            $t->id();
            $t->integer('n');
        });
        $db->table('tx_counters')->insert(['n' => 0]);
        $other = Databases::direct(Databases::PGSQL);

        $attempts = 0;
        $db->transaction(static function (Connection $db) use (&$attempts, $other): void {
            $attempts++;
            $n = (int) $db->table('tx_counters')->value('n');     // the snapshot is taken here
            if ($attempts === 1) {
                $other->exec('UPDATE tx_counters SET n = n + 100'); // a concurrent, committed update
            }
            $db->table('tx_counters')->update(['n' => $n + 1]);    // 40001 on the first attempt
        }, 2);

        self::assertSame(2, $attempts, 'Laravel saw a concurrency error (SQLSTATE 40001) and ran the closure again');
        self::assertSame(101, (int) $other->query('SELECT n FROM tx_counters')->fetchColumn());
        self::assertSame(0, $db->transactionLevel());
    }
}
