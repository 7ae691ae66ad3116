<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Events\QueryExecuted;
use Illuminate\Database\QueryException;
use Illuminate\Database\Schema\Blueprint;
use Tether\Laravel\TetherQueryError;
use Tether\Laravel\Tests\Support\Databases;
use Tether\Server\ServerException;

/**
 * EventsAndErrorsTest checks DB::listen events and the query log (SQL as Laravel wrote it, bindings, time in ms),
 * and errors as QueryException with the SQL, the bindings and PDO's codes.
 */
final class EventsAndErrorsTest extends TestCase
{
    /** @dataProvider platforms */
    public function testListenersAndTheQueryLogSeeEveryStatementWithItsTime(string $platform): void
    {
        $db = $this->connect($platform);
        /** @var list<QueryExecuted> $events */
        $events = [];
        $db->listen(static function (QueryExecuted $e) use (&$events): void {
            $events[] = $e;
        });
        $db->enableQueryLog();

        $sleep = $platform === Databases::MYSQL ? 'select sleep(0.05) as s, ? as v' : 'select pg_sleep(0.05) as s, ?::int as v';
        $db->select($sleep, [3]);
        $db->table('information_schema.tables')->where('table_name', 'nope')->where('table_schema', '<>', 'x')->count();

        self::assertCount(2, $events);
        self::assertSame($sleep, $events[0]->sql, 'the SQL as Laravel wrote it, placeholders and all');
        self::assertSame([3], $events[0]->bindings);
        self::assertSame('default', $events[0]->connectionName);
        self::assertGreaterThanOrEqual(50.0, $events[0]->time, 'time in milliseconds');
        self::assertLessThan(5000.0, $events[0]->time);
        self::assertSame(['nope', 'x'], $events[1]->bindings);

        $log = $db->getQueryLog();
        self::assertCount(2, $log);
        self::assertSame($sleep, $log[0]['query']);
        self::assertSame($events[0]->time, $log[0]['time']);
    }

    /** @dataProvider platforms */
    public function testPretendLogsWithoutRunning(string $platform): void
    {
        $db = $this->connect($platform);
        $log = $db->pretend(static function ($db): void {
            $db->table('never_created')->insert(['a' => 1]);
            self::assertSame([], $db->table('never_created')->get()->all());
        });
        self::assertCount(2, $log);
        self::assertStringContainsString('insert into', $log[0]['query']);
        self::assertFalse($db->getSchemaBuilder()->hasTable('never_created'));
    }

    /** @dataProvider platforms */
    public function testReadAndWriteSessionsAndStickyWrites(string $platform): void
    {
        $backend = $platform === Databases::MYSQL ? 'TETHER_IT_MYSQL_BACKEND' : 'TETHER_IT_PGSQL_BACKEND';
        $db = $this->connect($platform, [
            'read' => ['backend' => Databases::env($backend), 'application_name' => 'reader'],
            'write' => ['backend' => Databases::env($backend)],
            'sticky' => true,
        ]);
        self::assertNotSame($db->getReadPdo(), $db->getPdo(), 'two sessions');
        $db->getSchemaBuilder()->dropIfExists('rw_items');
        $db->getSchemaBuilder()->create('rw_items', static function (Blueprint $t): void {
            $t->id();
            $t->string('v');
        });
        $db->table('rw_items')->insert(['v' => 'x']);
        self::assertSame(1, $db->table('rw_items')->count());
        self::assertSame($db->getPdo(), $db->getReadPdo(), 'sticky: reads after a write use the write session');
    }

    /** @dataProvider platforms */
    public function testUniqueViolationIsAQueryExceptionWithPdoCodes(string $platform): void
    {
        $db = $this->connect($platform);
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('err_users');
        $schema->create('err_users', static function (Blueprint $t): void {
            $t->id();
            $t->string('email')->unique();
        });
        $db->table('err_users')->insert(['email' => 'a@example.com']);

        try {
            $db->table('err_users')->insert(['email' => 'a@example.com']);
            self::fail('the duplicate was accepted');
        } catch (QueryException $e) {
            self::assertStringContainsString('insert into', $e->getSql());
            self::assertSame(['a@example.com'], $e->getBindings());
            self::assertStringContainsString('(SQL: insert into', $e->getMessage());
            self::assertInstanceOf(TetherQueryError::class, $e->getPrevious());
            self::assertInstanceOf(\PDOException::class, $e->getPrevious());
            self::assertInstanceOf(ServerException::class, $e->getPrevious()->getPrevious());
            if ($platform === Databases::MYSQL) {
                self::assertSame('23000', $e->getCode());
                self::assertSame(['23000', 1062], \array_slice($e->errorInfo, 0, 2));
                // Laravel 10+'s MySqlConnection::isUniqueConstraintError() matches exactly this.
                self::assertMatchesRegularExpression('#Integrity constraint violation: 1062#i', $e->getMessage());
            } else {
                self::assertSame('23505', $e->getCode());
                self::assertSame('23505', $e->errorInfo[0]);
                self::assertStringContainsString('SQLSTATE[23505]: Unique violation', $e->getMessage());
            }
        }
        self::assertSame(1, $db->table('err_users')->count());
    }

    /** @dataProvider platforms */
    public function testSyntaxErrorsAndMissingTablesKeepTheBackendsCodes(string $platform): void
    {
        $db = $this->connect($platform);
        try {
            $db->select('select * from err_missing_table where id = ?', [1]);
            self::fail('a missing table was accepted');
        } catch (QueryException $e) {
            self::assertSame($platform === Databases::MYSQL ? '42S02' : '42P01', $e->getCode());
            self::assertSame([1], $e->getBindings());
        }
        try {
            $db->statement('selec 1');
            self::fail('a syntax error was accepted');
        } catch (QueryException $e) {
            self::assertSame($platform === Databases::MYSQL ? '42000' : '42601', $e->getCode());
        }
        self::assertSame(1, (int) $db->selectOne('select 1 as one')->one, 'the connection is usable after errors');
    }

    /** @dataProvider platforms */
    public function testAnUnreachableTetherdIsALostConnectionAndLaravelReconnectsOnce(string $platform): void
    {
        $db = $this->connect($platform, ['socket' => Databases::env('TETHER_IT_DIR') . '/no-such.sock']);
        $attempts = 0;
        $db->beforeExecuting(static function () use (&$attempts): void {
            $attempts++;
        });
        try {
            $db->select('select 1');
            self::fail('a query without tetherd succeeded');
        } catch (QueryException $e) {
            self::assertSame('08S01', $e->getCode());
            self::assertStringContainsString('Lost connection to tetherd', $e->getMessage());
        }
        self::assertSame(1, $attempts, 'beforeExecuting runs once; the retry after reconnecting is inside run()');
    }
}
