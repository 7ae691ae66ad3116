<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Tether\Laravel\Tests\Support\Databases;
use Tether\Tests\Support\PrivateTetherd;

require_once \dirname(__DIR__, 3) . '/php/tests/Support/PrivateTetherd.php';

/**
 * EscapingTest: the session's quote() (PDO::quote(), what Laravel's escaping uses) escapes for the session's actual
 * mode. Under MySQL's NO_BACKSLASH_ESCAPES a backslash is an ordinary byte, so backslash-escaping would let `\'`
 * end the literal: every value must read back exactly, and a payload must never widen a WHERE clause.
 */
final class EscapingTest extends TestCase
{
    private const VALUES = ["it's", 'back\\slash', "x\\' OR 1=1 -- ", "\\'", "'", '\\', "a\\\\'b", "trailing\\", "nul\0 \x1a \n \" end"];

    /** The session turns NO_BACKSLASH_ESCAPES on after quote() read its mode: quote() must notice. */
    public function testMySqlSessionNoBackslashEscapesSetMidway(): void
    {
        $db = $this->connect(Databases::MYSQL);
        self::assertSame("'it\\'s'", $db->getPdo()->quote("it's"), 'default mode: backslash escapes');
        $db->statement("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        self::assertStringContainsString('NO_BACKSLASH_ESCAPES', $db->selectOne('SELECT @@SESSION.sql_mode AS m')->m);
        $pdo = Databases::direct(Databases::MYSQL);
        $pdo->exec("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')");
        self::assertRoundTrips($db, 'esc_session', $pdo);

        $db->unprepared("SET sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')");
        self::assertSame("'it\\'s'", $db->getPdo()->quote("it's"), 'back to backslash escapes');
        self::assertRoundTrips($db, 'esc_session2', Databases::direct(Databases::MYSQL));
    }

    /** The server's global sql_mode has NO_BACKSLASH_ESCAPES: every new session starts in it. */
    public function testMySqlGlobalNoBackslashEscapes(): void
    {
        PrivateTetherd::withGlobalSqlMode('NO_BACKSLASH_ESCAPES', function (PrivateTetherd $tetherd): void {
            // No 'strict': Laravel then sets no sql_mode of its own, and the session keeps the server's.
            $db = $this->connect(Databases::MYSQL, ['socket' => $tetherd->socket, 'strict' => null, 'persistent' => false]);
            self::assertStringContainsString('NO_BACKSLASH_ESCAPES', $db->selectOne('SELECT @@SESSION.sql_mode AS m')->m);
            self::assertSame("'it''s \\'", $db->getPdo()->quote("it's \\"));
            $pdo = Databases::direct(Databases::MYSQL);
            self::assertStringContainsString('NO_BACKSLASH_ESCAPES', (string) $pdo->query('SELECT @@SESSION.sql_mode')->fetchColumn());
            self::assertRoundTrips($db, 'esc_global', $pdo);
            $db->disconnect();
        });
    }

    /** PostgreSQL: a literal quote() wrote reads the same whether standard_conforming_strings is on or off. */
    public function testPostgreSqlStandardConformingStringsOff(): void
    {
        $db = $this->connect(Databases::PGSQL);
        self::assertRoundTrips($db, 'esc_pg_on', null);
        $db->statement('SET standard_conforming_strings = off');
        self::assertSame('off', $db->selectOne('SHOW standard_conforming_strings')->standard_conforming_strings);
        self::assertRoundTrips($db, 'esc_pg_off', null);
    }

    /**
     * assertRoundTrips stores each value through a quoted literal and reads it back by a binding (equal), counts
     * the rows matching the quoted literal (one: no injected OR), and compares with PDO's own quote() on a session
     * in the same mode (MySQL).
     */
    private static function assertRoundTrips(Connection $db, string $table, ?\PDO $pdo): void
    {
        $db->statement("DROP TABLE IF EXISTS $table");
        $db->statement("CREATE TABLE $table (id INT PRIMARY KEY, v TEXT)");
        $values = $pdo !== null ? self::VALUES : \array_values(\array_filter(self::VALUES, static fn (string $v): bool => !\str_contains($v, "\0")));
        $quote = static fn (string $v): string => $db->getPdo()->quote($v);
        foreach ($values as $i => $value) {
            $db->insert("INSERT INTO $table (id, v) VALUES ($i, " . $quote($value) . ')');
        }
        foreach ($values as $i => $value) {
            self::assertSame($value, $db->selectOne("SELECT v FROM $table WHERE id = ?", [$i])->v, 'stored and read back: ' . \json_encode($value));
            self::assertSame(1, (int) $db->selectOne("SELECT COUNT(*) AS n FROM $table WHERE v = " . $quote($value))->n, 'matches exactly one row: ' . \json_encode($value));
            if ($pdo !== null) {
                self::assertSame($pdo->quote($value), $quote($value), 'as PDO quotes it: ' . \json_encode($value));
            }
        }
    }
}
