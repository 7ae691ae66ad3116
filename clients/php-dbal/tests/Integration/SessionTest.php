<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * SessionTest: the session settings DBAL and Symfony users make on connect (charset, an init command, SET
 * time_zone, SET search_path) hold for every later statement of that connection and of no other, while the
 * database server sees no more sessions than tetherd's pool (max_conns = 8 per backend in
 * scripts/lib/integration.sh).
 */
final class SessionTest extends IntegrationTestCase
{
    private const CONNECTIONS = 30;
    private const POOL_SIZE = 8;

    /** charset and PDO::MYSQL_ATTR_INIT_COMMAND on MySQL/MariaDB: run on connect, in effect afterwards. */
    public function testMySQLCharsetAndInitCommand(): void
    {
        $conn = $this->connect('mysql', [
            'charset' => 'latin1',
            'driverOptions' => [1002 => "SET time_zone = '+05:30', sql_mode = 'ANSI_QUOTES'"],
        ]);
        $plain = $this->connect('mysql');
        for ($i = 0; $i < 10; $i++) {
            self::assertSame(
                ['tz' => '+05:30', 'cs' => 'latin1', 'ansi' => 1],
                $this->fetchTyped($conn, "SELECT @@session.time_zone AS tz, @@character_set_client AS cs, @@sql_mode LIKE '%ANSI_QUOTES%' AS ansi"),
            );
            self::assertSame('SYSTEM', $plain->fetchOne('SELECT @@session.time_zone'), 'another connection keeps its own settings');
        }
        // ANSI_QUOTES is really in effect: "x" is an identifier.
        self::assertSame(1, (int) $conn->fetchOne('SELECT "one" FROM (SELECT 1 AS one) AS t'));
    }

    /** SET search_path and SET TIME ZONE on PostgreSQL, after connect, hold for the connection's later statements. */
    public function testPostgreSQLSearchPathAndTimeZone(): void
    {
        $conn = $this->connect('pgsql', ['charset' => 'UTF8']);
        $conn->executeStatement('DROP SCHEMA IF EXISTS sess_app CASCADE');
        $conn->executeStatement('CREATE SCHEMA sess_app');
        $conn->executeStatement('CREATE TABLE sess_app.only_here (v INT)');
        $conn->executeStatement('INSERT INTO sess_app.only_here VALUES (7)');
        $conn->executeStatement('SET search_path TO sess_app, public');
        $conn->executeStatement("SET TIME ZONE 'Asia/Tokyo'");
        $other = $this->connect('pgsql');
        for ($i = 0; $i < 10; $i++) {
            self::assertSame(7, $conn->fetchOne('SELECT v FROM only_here'));
            self::assertSame('Asia/Tokyo', $conn->fetchOne("SELECT current_setting('TimeZone')"));
            self::assertNotSame('Asia/Tokyo', $other->fetchOne("SELECT current_setting('TimeZone')"));
        }
        // Inside a transaction too.
        $conn->beginTransaction();
        self::assertSame(7, $conn->fetchOne('SELECT v FROM only_here'));
        $conn->commit();
        $conn->executeStatement('DROP SCHEMA sess_app CASCADE');
    }

    /** @dataProvider backends */
    public function testManyConnectionsEachKeepTheirTimeZoneOnAPoolOfEight(string $kind): void
    {
        /** @var array<int, Connection> $conns */
        $conns = [];
        $zones = [];
        $local = [];
        for ($i = 0; $i < self::CONNECTIONS; $i++) {
            $conns[$i] = $this->connect($kind);
            // -07:00 ... +07:30 in half hours: 30 different offsets.
            $minutes = ($i - 14) * 30;
            $zones[$i] = sprintf('%s%02d:%02d', $minutes < 0 ? '-' : '+', intdiv(abs($minutes), 60), abs($minutes) % 60);
            $local[$i] = gmdate('H:i', 1704067200 + $minutes * 60); // 2024-01-01 00:00:00 UTC there
            $conns[$i]->executeStatement($kind === 'mysql'
                ? "SET time_zone = '{$zones[$i]}'"
                : "SET TIME ZONE INTERVAL '{$zones[$i]}' HOUR TO MINUTE");
        }
        $current = $kind === 'mysql'
            ? "SELECT @@session.time_zone AS tz, DATE_FORMAT(CONVERT_TZ('2024-01-01 00:00:00', '+00:00', @@session.time_zone), '%H:%i') AS local"
            : "SELECT to_char(timestamptz '2024-01-01 00:00:00+00', 'HH24:MI') AS local";
        for ($round = 0; $round < 3; $round++) {
            foreach ($conns as $i => $conn) {
                $row = $conn->fetchAssociative($current);
                self::assertSame($local[$i], $row['local'], "connection $i ($zones[$i]), round $round");
                if ($kind === 'mysql') {
                    self::assertSame($zones[$i], $row['tz']);
                }
            }
            $sessions = $this->serverSessions($kind);
            self::assertGreaterThanOrEqual(1, $sessions);
            self::assertLessThanOrEqual(self::POOL_SIZE, $sessions, 'the server sees only the pool\'s sessions');
        }
        // A transaction on each connection also runs under that connection's settings.
        foreach ([0, 17, 29] as $i) {
            $conns[$i]->beginTransaction();
            self::assertSame($local[$i], $conns[$i]->fetchAssociative($current)['local']);
            $conns[$i]->commit();
        }
    }

    /** @dataProvider backends */
    public function testPersistentConnectionsShareTheWorkerSocketAndItsSettings(string $kind): void
    {
        $zone = $kind === 'mysql' ? "SET time_zone = '+03:00'" : "SET TIME ZONE 'Europe/Kyiv'";
        $read = $kind === 'mysql' ? 'SELECT @@session.time_zone' : "SELECT current_setting('TimeZone')";
        $first = $this->connect($kind, ['persistent' => true]);
        $second = $this->connect($kind, ['persistent' => true]);
        $own = $this->connect($kind);
        $first->executeStatement($zone);
        $want = $first->fetchOne($read);
        self::assertSame($want, $second->fetchOne($read), 'one socket, one set of settings');
        self::assertNotSame($want, $own->fetchOne($read), 'a connection of its own is not affected');
        // Back to the server's default for the rest of the process, which keeps the persistent socket.
        $first->executeStatement($kind === 'mysql' ? 'SET time_zone = DEFAULT' : 'SET TIME ZONE DEFAULT');
        self::assertSame($own->fetchOne($read), $second->fetchOne($read));
    }

    /** DBAL's setTransactionIsolation() is a session setting: the connection's later transactions run at that level. */
    public function testTransactionIsolationHoldsForLaterTransactions(): void
    {
        foreach (['mysql' => 'SELECT @@tx_isolation', 'pgsql' => 'SHOW transaction_isolation'] as $kind => $read) {
            $conn = $this->connect($kind);
            $conn->setTransactionIsolation(\Doctrine\DBAL\TransactionIsolationLevel::SERIALIZABLE);
            $other = $this->connect($kind);
            for ($i = 0; $i < 3; $i++) {
                $conn->beginTransaction();
                self::assertSame('serializable', strtolower(str_replace('-', ' ', (string) $conn->fetchOne($read))), $kind);
                $conn->commit();
                self::assertNotSame('serializable', strtolower(str_replace('-', ' ', (string) $other->fetchOne($read))), "$kind: only that connection");
            }
        }
    }

    /** serverSessions counts the sessions of user tether on this database other than the direct one asking. */
    private function serverSessions(string $kind): int
    {
        $pdo = self::pdo($kind);
        $sql = $kind === 'mysql'
            ? "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'tether' AND DB = DATABASE() AND ID <> CONNECTION_ID()"
            : "SELECT COUNT(*) FROM pg_stat_activity WHERE usename = 'tether' AND datname = current_database() AND pid <> pg_backend_pid()";

        return (int) $pdo->query($sql)->fetchColumn();
    }

    /** @return array<string, mixed> the first row with numeric strings as ints */
    private function fetchTyped(Connection $conn, string $sql): array
    {
        return array_map(static fn ($v) => is_string($v) && ctype_digit($v) ? (int) $v : $v, (array) $conn->fetchAssociative($sql));
    }
}
