<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Tether\Laravel\TetherSession;
use Tether\Laravel\Tests\Support\Databases;

/**
 * SessionSettingsTest checks that the settings Laravel's connectors apply on connect (names and collation, time
 * zone, sql_mode, isolation level; PostgreSQL's search_path and application_name) hold for the connection's later
 * statements, wherever tetherd runs them; that 30 connections with different time zones each keep their own while
 * the server sees no more sessions than the pool's max_conns; and that reconnecting applies them again.
 */
final class SessionSettingsTest extends TestCase
{
    /** The pool size scripts/lib/integration.sh configures for each backend. */
    private const MAX_CONNS = 8;

    /** @var list<string> distinct PostgreSQL time zones, reported back by name */
    private const PG_ZONES = [
        'UTC', 'Europe/London', 'Europe/Paris', 'Europe/Moscow', 'Asia/Dubai', 'Asia/Karachi', 'Asia/Kolkata',
        'Asia/Kathmandu', 'Asia/Dhaka', 'Asia/Bangkok', 'Asia/Shanghai', 'Asia/Tokyo', 'Australia/Adelaide',
        'Australia/Sydney', 'Pacific/Auckland', 'Pacific/Honolulu', 'America/Anchorage', 'America/Los_Angeles',
        'America/Denver', 'America/Chicago', 'America/New_York', 'America/Halifax', 'America/St_Johns',
        'America/Sao_Paulo', 'Atlantic/Azores', 'Africa/Cairo', 'Africa/Nairobi', 'Asia/Tehran', 'Asia/Kabul',
        'Europe/Helsinki',
    ];

    private static function zone(string $platform, int $i): string
    {
        return $platform === Databases::MYSQL ? \sprintf('+%02d:%02d', \intdiv($i, 3), ($i % 3) * 15) : self::PG_ZONES[$i];
    }

    private static function currentZone(Connection $db): string
    {
        $sql = $db->getDriverName() === Databases::MYSQL ? 'select @@session.time_zone as tz' : "select current_setting('TimeZone') as tz";

        return (string) $db->selectOne($sql)->tz;
    }

    public function testMysqlConnectorSettingsHoldOnLaterStatements(): void
    {
        $db = $this->connect(Databases::MYSQL, [
            'charset' => 'utf8mb4', 'collation' => 'utf8mb4_bin', 'timezone' => '+03:45', 'strict' => true,
            'isolation_level' => 'READ COMMITTED',
        ]);
        for ($i = 0; $i < 12; $i++) { // more statements than pooled connections: whichever runs them
            $row = $db->selectOne('select @@session.time_zone as tz, @@session.sql_mode as m, @@character_set_client as cs, @@collation_connection as col, @@session.tx_isolation as iso');
            self::assertSame('+03:45', $row->tz);
            self::assertSame('utf8mb4', $row->cs);
            self::assertSame('utf8mb4_bin', $row->col);
            self::assertSame('READ-COMMITTED', $row->iso);
            self::assertStringContainsString('STRICT_TRANS_TABLES', $row->m);
            self::assertStringContainsString('ONLY_FULL_GROUP_BY', $row->m);
        }
        self::assertSame('+03:45', $db->transaction(static fn (Connection $db): string => self::currentZone($db)), 'inside a transaction too');

        $loose = $this->connect(Databases::MYSQL, ['strict' => false, 'modes' => null]);
        self::assertSame('NO_ENGINE_SUBSTITUTION', $loose->selectOne('select @@session.sql_mode as m')->m);
    }

    public function testPostgresConnectorSettingsHoldOnLaterStatements(): void
    {
        $direct = Databases::direct(Databases::PGSQL);
        $direct->exec('DROP SCHEMA IF EXISTS ss_alt CASCADE');
        $direct->exec('CREATE SCHEMA ss_alt');
        $direct->exec('CREATE TABLE ss_alt.ss_where (place text)');
        $direct->exec("INSERT INTO ss_alt.ss_where VALUES ('alt')");
        $direct->exec('DROP TABLE IF EXISTS public.ss_where');
        $direct->exec('CREATE TABLE public.ss_where (place text)');
        $direct->exec("INSERT INTO public.ss_where VALUES ('public')");

        $db = $this->connect(Databases::PGSQL, [
            'timezone' => 'Asia/Kolkata', 'schema' => ['ss_alt', 'public'], 'application_name' => 'tether-laravel-test',
            'isolation_level' => 'serializable',
        ]);
        for ($i = 0; $i < 12; $i++) {
            $row = $db->selectOne("select current_setting('TimeZone') as tz, current_setting('search_path') as sp, current_setting('application_name') as app, current_setting('client_encoding') as enc");
            self::assertSame('Asia/Kolkata', $row->tz);
            self::assertSame('ss_alt, public', $row->sp);
            self::assertSame('tether-laravel-test', $row->app);
            self::assertSame('UTF8', $row->enc);
            self::assertSame('alt', $db->table('ss_where')->value('place'), 'unqualified names resolve through the search_path');
        }
        self::assertSame('serializable', $db->transaction(static fn (Connection $db): string => $db->selectOne('show transaction_isolation')->transaction_isolation));
        self::assertTrue($db->getSchemaBuilder()->hasTable('ss_where'));
        $direct->exec('DROP SCHEMA ss_alt CASCADE');
    }

    /** @dataProvider platforms */
    public function testThirtyConnectionsKeepTheirOwnTimeZonesOnTheSharedPool(string $platform): void
    {
        $extra = [];
        for ($i = 0; $i < 30; $i++) {
            $extra["c$i"] = Databases::tetherConfig($platform, ['timezone' => self::zone($platform, $i)]);
        }
        $this->capsule = Databases::capsule($platform, [], $extra);
        $direct = Databases::direct($platform);
        $connections = [];
        for ($i = 0; $i < 30; $i++) {
            $connections[$i] = $this->capsule->getConnection("c$i");
            self::assertSame(self::zone($platform, $i), self::currentZone($connections[$i]), "connection c$i right after connecting");
        }

        $most = 0;
        for ($round = 0; $round < 3; $round++) {
            foreach ($connections as $i => $db) {
                $zone = ($round === 1 && $i % 5 === 0)
                    ? $db->transaction(static fn (Connection $db): string => self::currentZone($db))
                    : self::currentZone($db);
                self::assertSame(self::zone($platform, $i), $zone, "connection c$i in round $round");
                if ($i % 10 === 0) {
                    $most = \max($most, Databases::serverSessions($platform, $direct));
                }
            }
        }
        $most = \max($most, Databases::serverSessions($platform, $direct));
        self::assertGreaterThan(0, $most, 'tetherd holds pooled connections to the server');
        self::assertLessThanOrEqual(self::MAX_CONNS, $most, 'no more server sessions than the pool has connections');
    }

    /** @dataProvider platforms */
    public function testReconnectingAppliesTheSettingsAgain(string $platform): void
    {
        $zone = self::zone($platform, 7);
        $db = $this->connect($platform, ['timezone' => $zone]);
        self::assertSame($zone, self::currentZone($db));
        $first = $db->getPdo();
        self::assertInstanceOf(TetherSession::class, $first);

        $db->disconnect();
        self::assertNull($db->getRawPdo());
        self::assertSame($zone, self::currentZone($db), 'a query after disconnect() reconnects (Laravel reconnectIfMissingConnection)');
        self::assertNotSame($first, $db->getPdo());

        $second = $db->getPdo();
        $this->capsule->getDatabaseManager()->reconnect('default');
        self::assertSame($zone, self::currentZone($db));
        self::assertNotSame($second, $db->getPdo());
    }
}
