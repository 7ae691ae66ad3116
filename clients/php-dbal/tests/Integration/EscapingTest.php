<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Tether\Client;
use Tether\DBAL\Tests\Support\IntegrationTestCase;
use Tether\Tests\Support\PrivateTetherd;

require_once \dirname(__DIR__, 3) . '/php/tests/Support/PrivateTetherd.php';

/**
 * EscapingTest: Connection::quote() escapes for the session's actual mode. Under MySQL's NO_BACKSLASH_ESCAPES a
 * backslash is an ordinary byte, so backslash-escaping would let `\'` end the literal: every value must read back
 * exactly as quoted, and a payload must never widen a WHERE clause.
 */
final class EscapingTest extends IntegrationTestCase
{
    private const VALUES = ["it's", 'back\\slash', "x\\' OR 1=1 -- ", "\\'", "'", '\\', "a\\\\'b", "trailing\\", "nul\0 \x1a \n \" end"];

    /** The session turns NO_BACKSLASH_ESCAPES on after quote() has read its mode: quote() must notice. */
    public function testMySqlSessionNoBackslashEscapesSetMidway(): void
    {
        $conn = $this->connect('mysql');
        self::assertSame("'it\\'s'", $conn->quote("it's"), 'default mode: backslash escapes');
        $conn->executeStatement("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        self::assertStringContainsString('NO_BACKSLASH_ESCAPES', (string) $conn->fetchOne('SELECT @@SESSION.sql_mode'));
        $pdo = self::pdo('mysql');
        $pdo->exec("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        self::assertRoundTrips($conn, 'esc_session', $pdo);

        $conn->executeStatement("SET sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')");
        self::assertSame("'it\\'s'", $conn->quote("it's"), 'back to backslash escapes');
        self::assertRoundTrips($conn, 'esc_session2', self::pdo('mysql'));
    }

    /** The server's global sql_mode has NO_BACKSLASH_ESCAPES: every new session starts in it. */
    public function testMySqlGlobalNoBackslashEscapes(): void
    {
        PrivateTetherd::withGlobalSqlMode('NO_BACKSLASH_ESCAPES', function (PrivateTetherd $tetherd): void {
            $conn = $this->connect('mysql', ['tether_socket' => $tetherd->socket]);
            self::assertStringContainsString('NO_BACKSLASH_ESCAPES', (string) $conn->fetchOne('SELECT @@SESSION.sql_mode'));
            self::assertSame("'it''s \\'", $conn->quote("it's \\"));
            $pdo = self::pdo('mysql');
            self::assertStringContainsString('NO_BACKSLASH_ESCAPES', (string) $pdo->query('SELECT @@SESSION.sql_mode')->fetchColumn());
            self::assertRoundTrips($conn, 'esc_global', $pdo);
            $conn->close();
        });
    }

    /**
     * A pool whose connections were opened under different global modes (one with NO_BACKSLASH_ESCAPES, one
     * without): the mode quote() reads is pinned as the connection's own, so a literal is read in the mode it was
     * escaped for on either pooled connection. Another client holds one connection in a transaction at a time, so
     * that the DBAL connection's statements run on the other.
     */
    public function testMySqlPoolWithConnectionsOfBothGlobalModes(): void
    {
        $tetherd = PrivateTetherd::start('mixed-modes', 4);
        $previous = null;
        try {
            $client = static fn (): Client => new Client(['socket' => $tetherd->socket, 'backend' => 'mysql', 'persistent' => false]);
            /** @var list<array{Client, \Tether\Transaction, bool}> $held other clients' transactions, each pinning a pooled connection */
            $held = [];
            $hold = static function () use ($client, &$held): void {
                $c = $client();
                $tx = $c->begin();
                $held[] = [$c, $tx, \str_contains((string) $tx->queryOne('SELECT @@SESSION.sql_mode AS m')['m'], 'NO_BACKSLASH_ESCAPES')];
            };
            $hold(); // a connection opened before the change
            $previous = PrivateTetherd::setGlobalSqlMode('NO_BACKSLASH_ESCAPES');
            $hold();
            $hold();
            $hold(); // the pool is full: at least two of the four were opened under the new global mode
            PrivateTetherd::setGlobalSqlMode($previous);
            $previous = null;
            self::assertContains(true, \array_column($held, 2), 'a pooled connection opened with NO_BACKSLASH_ESCAPES');
            self::assertContains(false, \array_column($held, 2), 'a pooled connection opened without it');

            $conn = $this->connect('mysql', ['tether_socket' => $tetherd->socket]);
            $id = 0;
            foreach ([false, true, false] as $round => $nbe) {
                // free one connection in the wanted mode: the DBAL connection's statements can only run there
                $k = \array_search($nbe, \array_column($held, 2), true);
                $held[$k][1]->rollback();
                unset($held[$k]);
                $held = \array_values($held);
                if ($round === 0) {
                    self::recreate($conn, 'esc_mixed', 'id INT PRIMARY KEY, v TEXT', 'mysql');
                }
                $where = $nbe ? 'with' : 'without';
                $first = $id;
                foreach (self::VALUES as $value) {
                    $conn->executeStatement('INSERT INTO esc_mixed (id, v) VALUES (' . $id . ', ' . $conn->quote($value) . ')');
                    self::assertSame($value, $conn->fetchOne('SELECT v FROM esc_mixed WHERE id = ?', [$id]), "round $round, on the connection opened $where NO_BACKSLASH_ESCAPES: " . \json_encode($value));
                    self::assertSame(1, (int) $conn->fetchOne("SELECT COUNT(*) FROM esc_mixed WHERE id >= $first AND v = " . $conn->quote($value)), "round $round: one row for " . \json_encode($value));
                    $id++;
                }
                $hold(); // takes the freed connection back (it keeps the mode it was opened in)
                self::assertSame($nbe, $held[\count($held) - 1][2]);
            }
            $conn->close();
        } finally {
            if ($previous !== null) {
                PrivateTetherd::setGlobalSqlMode($previous);
            }
            foreach ($held ?? [] as [, $tx]) {
                $tx->rollback();
            }
            $tetherd->stop();
        }
    }

    /** PostgreSQL: a literal quote() wrote reads the same whether standard_conforming_strings is on or off. */
    public function testPostgreSqlStandardConformingStringsOff(): void
    {
        $conn = $this->connect('pgsql');
        self::assertRoundTrips($conn, 'esc_pg_on', null, ["\0"]);
        $conn->executeStatement('SET standard_conforming_strings = off');
        self::assertSame('off', $conn->fetchOne('SHOW standard_conforming_strings'));
        self::assertRoundTrips($conn, 'esc_pg_off', null, ["\0"]);
    }

    /**
     * assertRoundTrips stores each value through a quoted literal and reads it back by a bound parameter (equal),
     * then counts the rows that match the quoted literal (one: no injected OR), and compares quote() with PDO's own
     * quote() on a session in the same mode.
     *
     * @param list<string> $without bytes whose values are left out
     */
    private static function assertRoundTrips(Connection $conn, string $table, ?\PDO $pdo, array $without = []): void
    {
        $kind = $pdo !== null ? 'mysql' : 'pgsql';
        self::recreate($conn, $table, 'id INT PRIMARY KEY, v TEXT', $kind);
        $values = \array_values(\array_filter(self::VALUES, static fn (string $v): bool => \array_filter($without, static fn (string $b): bool => \str_contains($v, $b)) === []));
        foreach ($values as $i => $value) {
            $conn->executeStatement("INSERT INTO $table (id, v) VALUES ($i, " . $conn->quote($value) . ')');
        }
        foreach ($values as $i => $value) {
            self::assertSame($value, $conn->fetchOne("SELECT v FROM $table WHERE id = ?", [$i]), 'stored and read back: ' . \json_encode($value));
            self::assertSame(1, (int) $conn->fetchOne("SELECT COUNT(*) FROM $table WHERE v = " . $conn->quote($value)), 'matches exactly one row: ' . \json_encode($value));
            if ($pdo !== null) {
                self::assertSame($pdo->quote($value), $conn->quote($value), 'as PDO quotes it: ' . \json_encode($value));
            }
        }
    }
}
