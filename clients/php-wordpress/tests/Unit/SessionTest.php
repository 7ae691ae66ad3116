<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Unit;

use Tether\Client;
use Tether\Tests\Support\FakeServer;
use Tether\WordPress\QueryError;
use Tether\WordPress\Session;
use PHPUnit\Framework\TestCase;

require_once \dirname(__DIR__, 3) . '/php/tests/Support/FakeServer.php';

/** SessionTest drives the drop-in's Session against the PHP client's scripted fake tetherd: what goes on the wire. */
final class SessionTest extends TestCase
{
    private ?FakeServer $server = null;

    protected function tearDown(): void
    {
        $this->server?->stop();
    }

    /**
     * Every form of SET autocommit the shared detection recognises (LOCAL, @@local., :=) and COMMIT AND CHAIN are
     * run on Tether transactions, not refused: AND CHAIN commits and opens the next one at once.
     */
    public function testAutocommitFormsAndChainMapOntoTetherTransactions(): void
    {
        // No backslash in any of them: they read the same in every sql_mode, which is not read for them.
        $this->server = FakeServer::start([[
            ['recv'], ['reply', ['tx' => 5]],
            ['recv'], ['reply', []],
            ['recv'], ['reply', ['tx' => 6]],
            ['recv'], ['reply', []],
            ['recv'], ['reply', ['tx' => 7]],
            ['recv'], ['reply', []],
            ['recv'], ['reply', ['tx' => 8]],
            ['recv'], ['reply', []],
        ]]);
        $session = new Session(new Client(['socket' => $this->server->address(), 'timeout' => 2.0]), 0.0);

        $session->run('SET LOCAL autocommit := 0', true);
        self::assertTrue($session->inTransaction());
        $session->run('COMMIT WORK AND CHAIN', true);
        self::assertTrue($session->inTransaction(), 'AND CHAIN opens the next transaction');
        $session->run('SET @@local.autocommit = 1', true);
        self::assertFalse($session->inTransaction());
        $session->run('SET @@session.autocommit=OFF', true);
        $session->run('ROLLBACK AND NO CHAIN', true);
        self::assertFalse($session->inTransaction());
        $session->run('SET SESSION autocommit = 0', true);
        $session->run('COMMIT', true);

        self::assertSame(
            ['begin', 'commit', 'begin', 'commit', 'begin', 'rollback', 'begin', 'commit'],
            \array_column(\array_column($this->server->requests(), 'map'), 'op'),
        );
    }

    /** What a Tether transaction cannot do is refused, named, with nothing sent. */
    public function testTransactionCharacteristicsAreRefused(): void
    {
        $this->server = FakeServer::start([[]]);
        $session = new Session(new Client(['socket' => $this->server->address(), 'timeout' => 2.0]), 0.0);
        foreach (['START TRANSACTION READ ONLY', 'START TRANSACTION WITH CONSISTENT SNAPSHOT', 'COMMIT RELEASE'] as $sql) {
            try {
                $session->run($sql, true);
                self::fail('not refused: ' . $sql);
            } catch (QueryError $e) {
                self::assertStringContainsString('not supported', $e->getMessage());
            }
        }
        self::assertSame([], \array_column(\array_column($this->server->requests(), 'map'), 'op'));
    }

    /**
     * A plain statement (SELECT, INSERT, UPDATE, DELETE, REPLACE, SHOW; no @, ;, FOUND_ROWS, LAST_INSERT_ID or _LOCK
     * in its text) goes out as it is, one request, whatever its literals hold; its values come as mysqli's text
     * protocol gives them, and it still counts for FOUND_ROWS(). sql_mode is read (pinned, then read: two requests)
     * only to parse a statement that is not plain and has a backslash, whose literals the mode decides.
     */
    public function testPlainStatementsGoOutAsTheyAreAndBackslashesReadTheMode(): void
    {
        $plain = "\n\t ( SELECT id, score, missing, name, flag FROM t WHERE name IN ('a', 'it\\'s') )";
        $set = "SET time_zone = 'it\\'s'";
        $this->server = FakeServer::start([[
            ['recv'], ['reply', ['columns' => ['id', 'score', 'missing', 'name', 'flag'], 'rows' => [[1, 1.5, null, 'a', true], [2, 0.1, null, 'b\\c', false]]]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ['recv'], ['reply', ['columns' => ['sql_mode'], 'rows' => [['STRICT_TRANS_TABLES']]]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
        ]]);
        $session = new Session(new Client(['socket' => $this->server->address(), 'timeout' => 2.0]), 0.0);

        $result = $session->run($plain, false);
        self::assertSame(['id', 'score', 'missing', 'name', 'flag'], $result->columns);
        self::assertSame([['1', '1.5', null, 'a', '1'], ['2', '0.1', null, 'b\\c', '0']], $result->rows);
        self::assertSame([['2']], $session->run('SELECT FOUND_ROWS()', false)->rows, 'FOUND_ROWS() after a plain SELECT is its row count');
        $session->run($set, true);

        $maps = \array_column($this->server->requests(), 'map');
        self::assertSame(['query', 'exec', 'query', 'exec'], \array_column($maps, 'op'));
        self::assertSame($plain, $maps[0]['sql']);
        self::assertSame('SET SESSION sql_mode = @@SESSION.sql_mode', $maps[1]['sql']);
        self::assertSame($set, $maps[3]['sql']);
    }
}
