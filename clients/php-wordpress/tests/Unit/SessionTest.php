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
        $ok = ['reply', ['affected' => 0, 'insert_id' => 0]];
        $this->server = FakeServer::start([[
            ['recv'], $ok, ['recv'], ['reply', ['columns' => ['sql_mode'], 'rows' => [['STRICT_TRANS_TABLES']]]],
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
            ['exec', 'query', 'begin', 'commit', 'begin', 'commit', 'begin', 'rollback', 'begin', 'commit'],
            \array_column(\array_column($this->server->requests(), 'map'), 'op'),
        );
    }

    /** What a Tether transaction cannot do is refused, named, with nothing sent. */
    public function testTransactionCharacteristicsAreRefused(): void
    {
        $ok = ['reply', ['affected' => 0, 'insert_id' => 0]];
        $this->server = FakeServer::start([[
            ['recv'], $ok, ['recv'], ['reply', ['columns' => ['sql_mode'], 'rows' => [['']]]],
        ]]);
        $session = new Session(new Client(['socket' => $this->server->address(), 'timeout' => 2.0]), 0.0);
        foreach (['START TRANSACTION READ ONLY', 'START TRANSACTION WITH CONSISTENT SNAPSHOT', 'COMMIT RELEASE'] as $sql) {
            try {
                $session->run($sql, true);
                self::fail('not refused: ' . $sql);
            } catch (QueryError $e) {
                self::assertStringContainsString('not supported', $e->getMessage());
            }
        }
        self::assertSame(['exec', 'query'], \array_column(\array_column($this->server->requests(), 'map'), 'op'));
    }
}
