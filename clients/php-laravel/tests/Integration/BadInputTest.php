<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\QueryException;
use Tether\Laravel\TetherQueryError;
use Tether\Laravel\Tests\Support\Databases;
use Tether\Laravel\UnsupportedStatementException;

/**
 * BadInputTest sends what the tether driver cannot serve as PDO would, and checks that each fails with a
 * QueryException that names the problem, and that the connection stays usable.
 */
final class BadInputTest extends TestCase
{
    private static function failure(callable $run): QueryException
    {
        try {
            $run();
        } catch (QueryException $e) {
            return $e;
        }
        throw new \RuntimeException('the statement was accepted');
    }

    /** @dataProvider platforms */
    public function testRawTransactionControlIsRefusedNamingTheStatement(string $platform): void
    {
        $db = $this->connect($platform);
        foreach (['BEGIN', 'start transaction', '/* hint */ COMMIT', 'rollback'] as $sql) {
            $e = self::failure(static fn () => $db->statement($sql));
            self::assertInstanceOf(UnsupportedStatementException::class, $e->getPrevious(), $sql);
            self::assertStringContainsString(\strtoupper(\trim(\str_replace('/* hint */', '', $sql))), $e->getMessage());
            self::assertStringContainsString('DB::transaction()', $e->getMessage());
            self::assertSame($sql, $e->getSql());
        }
        $e = self::failure(static fn () => $db->unprepared('BEGIN'));
        self::assertStringContainsString('BEGIN cannot run as raw SQL', $e->getMessage());
        if ($platform === Databases::MYSQL) {
            $e = self::failure(static fn () => $db->statement('set autocommit = 0'));
            self::assertStringContainsString('SET autocommit', $e->getMessage());
        }
        self::assertSame(0, $db->transactionLevel());
        self::assertSame(1, (int) $db->selectOne('select 1 as one')->one);

        // Raw savepoints inside a Laravel transaction are fine: they stay on the pinned connection.
        $db->statement('drop table if exists bad_sp');
        $db->statement('create table bad_sp (id int)');
        $db->transaction(static function (Connection $db): void {
            $db->insert('insert into bad_sp values (1)');
            $db->statement('savepoint mine');
            $db->insert('insert into bad_sp values (2)');
            $db->statement('rollback to savepoint mine');
            $db->unprepared('ROLLBACK WORK TO SAVEPOINT mine');
        });
        self::assertSame([1], \array_map('intval', $db->table('bad_sp')->pluck('id')->all()));
    }

    /**
     * Stored procedures on MySQL/MariaDB: DB::select of a CALL that returns one result set gives its rows; one that
     * returns two fails, named, and its writes are done (tetherd answers one result set per query).
     */
    public function testStoredProcedures(): void
    {
        $pdo = Databases::direct(Databases::MYSQL);
        $pdo->exec('DROP TABLE IF EXISTS bad_proc_log');
        $pdo->exec('CREATE TABLE bad_proc_log (v INT)');
        $pdo->exec('DROP PROCEDURE IF EXISTS bad_proc_one');
        $pdo->exec('CREATE PROCEDURE bad_proc_one(IN n INT) BEGIN SELECT n AS a, n * 2 AS b; END');
        $pdo->exec('DROP PROCEDURE IF EXISTS bad_proc_two');
        $pdo->exec('CREATE PROCEDURE bad_proc_two(IN n INT) BEGIN INSERT INTO bad_proc_log VALUES (n); SELECT 1 AS x; SELECT 2 AS y; END');
        $db = $this->connect(Databases::MYSQL);

        $rows = $db->select('CALL bad_proc_one(?)', [21]);
        self::assertSame([['a' => 21, 'b' => 42]], \array_map(static fn (object $r): array => (array) $r, $rows));
        $e = self::failure(static fn () => $db->select('CALL bad_proc_two(?)', [7]));
        self::assertStringContainsString('more than one result set', $e->getMessage());
        self::assertSame('CALL bad_proc_two(?)', $e->getSql());
        self::assertSame(1, (int) $pdo->query('SELECT COUNT(*) FROM bad_proc_log')->fetchColumn(), 'the procedure ran');
        self::assertSame(1, (int) $db->selectOne('select 1 as one')->one, 'the connection serves on');

        $pdo->exec('DROP PROCEDURE bad_proc_one');
        $pdo->exec('DROP PROCEDURE bad_proc_two');
        $pdo->exec('DROP TABLE bad_proc_log');
    }

    public function testLockTablesIsRefusedOnMysql(): void
    {
        $db = $this->connect(Databases::MYSQL);
        $db->statement('create table if not exists bad_locked (id int)');
        $e = self::failure(static fn () => $db->statement('LOCK TABLES bad_locked WRITE'));
        self::assertInstanceOf(UnsupportedStatementException::class, $e->getPrevious());
        self::assertStringContainsString('LOCK TABLES cannot run through the tether driver', $e->getMessage());
        self::assertStringContainsString('lockForUpdate()', $e->getMessage());
        $e = self::failure(static fn () => $db->transaction(static fn (Connection $db) => $db->unprepared('lock tables bad_locked read')));
        self::assertStringContainsString('LOCK TABLES', $e->getMessage());
    }

    public function testTetherdRefusesWhatTheDriverCannotSeeInTheText(): void
    {
        // MySQL runs the executable comment, and the driver reads its body as code (Tether\Sql\SqlText): refused
        // before it is sent.
        $db = $this->connect(Databases::MYSQL);
        $e = self::failure(static fn () => $db->statement('/*!40101 START TRANSACTION */'));
        self::assertInstanceOf(UnsupportedStatementException::class, $e->getPrevious());
        self::assertStringContainsString('START TRANSACTION cannot run as raw SQL', $e->getMessage());
        // EXECUTE IMMEDIATE hides it in a string: tetherd sees the open transaction the server reports and rolls it
        // back.
        $e = self::failure(static fn () => $db->statement("EXECUTE IMMEDIATE 'START TRANSACTION'"));
        self::assertInstanceOf(TetherQueryError::class, $e->getPrevious());
        self::assertStringContainsString('bad_request', $e->getMessage());
        self::assertSame(1, (int) $db->selectOne('select 1 as one')->one);
    }

    /** @dataProvider platforms */
    public function testUnpreparedRunsOneStatementAndRefusesSeveral(string $platform): void
    {
        $db = $this->connect($platform);
        $db->unprepared('drop table if exists bad_one');
        $db->unprepared("create table bad_one (v varchar(20) default 'a;b')");
        self::assertTrue($db->getSchemaBuilder()->hasTable('bad_one'));

        $e = self::failure(static fn () => $db->unprepared('drop table if exists bad_two; create table bad_two (id int);'));
        self::assertInstanceOf(UnsupportedStatementException::class, $e->getPrevious());
        self::assertStringContainsString('DB::unprepared() got 2 statements', $e->getMessage());
        self::assertInstanceOf(TetherQueryError::class, $e->getPrevious()->getPrevious(), 'the server refused it');
        self::assertFalse($db->getSchemaBuilder()->hasTable('bad_two'), 'nothing of it ran');

        // A compound statement with semicolons inside is one statement, as in migrations that create triggers.
        if ($platform === Databases::MYSQL) {
            $db->unprepared('create trigger bad_one_upper before insert on bad_one for each row begin set new.v = upper(new.v); set new.v = concat(new.v, \'!\'); end');
        } else {
            $db->unprepared("create or replace function bad_one_upper() returns trigger language plpgsql as \$\$ begin new.v := upper(new.v); new.v := new.v || '!'; return new; end \$\$");
            $db->unprepared('create trigger bad_one_upper before insert on bad_one for each row execute function bad_one_upper()');
        }
        $db->table('bad_one')->insert(['v' => 'abc']);
        self::assertSame('ABC!', $db->table('bad_one')->value('v'));
    }

    /** @dataProvider platforms */
    public function testPdoOnlyFeaturesFailNamingThemselves(string $platform): void
    {
        $db = $this->connect($platform);
        try {
            $db->getPdo()->prepare('select 1');
            self::fail('prepare() worked');
        } catch (\LogicException $e) {
            self::assertStringContainsString('prepare() is a PDO method', $e->getMessage());
        }
        try {
            $db->getDoctrineConnection();
            self::fail('a Doctrine connection was made');
        } catch (\LogicException $e) {
            self::assertStringContainsString('Doctrine DBAL needs a PDO', $e->getMessage());
        }
    }
}
