<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Client;
use Tether\Sql\SqlText;

/**
 * SqlModeCacheTest: the escaping mode (sql_mode NO_BACKSLASH_ESCAPES) is kept once per socket, on real MariaDB:
 * when one Client on the worker's shared socket changes sql_mode, another Client's quote follows at once, and a
 * literal it quotes reads back as the value; a dropped and reopened socket (tetherd forgot the session's mode)
 * makes it read the mode again.
 */
final class SqlModeCacheTest extends IntegrationTestCase
{
    /** @return iterable<string, array{string, string}> */
    public static function mysqlBackends(): iterable
    {
        return self::backendsOfType('mysql');
    }

    /** @dataProvider mysqlBackends */
    public function testAnotherClientsSqlModeChangeAndAReconnectReachTheQuote(string $backend): void
    {
        $socket = (string) getenv('TETHER_SOCKET');
        $escaper = new Client(['socket' => $socket, 'timeout' => 10.0]);
        $other = new Client(['socket' => $socket, 'timeout' => 10.0]);
        $value = "a\\'; SELECT 'b\\\\";
        try {
            $escaper->execute("SET SESSION sql_mode = 'STRICT_TRANS_TABLES'", [], $backend);
            self::assertFalse($escaper->noBackslashEscapes($backend));
            $this->assertQuoteReadsBack($escaper, $backend, $value);

            $other->execute("SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'", [], $backend);
            self::assertTrue($escaper->noBackslashEscapes($backend), "the other client's SET sql_mode was not seen");
            $this->assertQuoteReadsBack($escaper, $backend, $value);

            // A dropped socket: tetherd forgets the session's sql_mode; the next socket has the server's default.
            $other->drop();
            $default = SqlText::noBackslashEscapes((string) $escaper->queryOne('SELECT @@GLOBAL.sql_mode AS m', [], $backend)['m']);
            self::assertSame($default, $escaper->noBackslashEscapes($backend), 'the mode of the dropped socket was kept');
            $this->assertQuoteReadsBack($escaper, $backend, $value);
        } finally {
            $escaper->drop(); // the session settings end with the socket
        }
    }

    private function assertQuoteReadsBack(Client $client, string $backend, string $value): void
    {
        $literal = SqlText::quote($value, SqlText::MYSQL, $client->noBackslashEscapes($backend));
        self::assertSame([[$value]], $client->queryNumeric('SELECT ' . $literal . ' AS v', [], $backend)->rows, $literal);
    }
}
