<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Connection;

use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\Protocol\Request;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * StreamConnectionTest covers the failure semantics: which failures reopen the socket, which ones throw, and
 * that a request whose fate is unknown is never sent twice.
 */
final class StreamConnectionTest extends FakeServerTestCase
{
    public function testDeadPersistentSocketIsReopenedBeforeSending(): void
    {
        $server = $this->serve([
            [['recv'], ['reply', []], ['close']],
            [['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        $client->ping();
        self::assertTrue($server->waitFor('closed'), 'server did not close: ' . $server->stderr());

        $client->ping();

        self::assertSame(2, $server->count('accept'));
        self::assertSame([1, 2], array_column($server->requests(), 'conn'), 'each ping reached the server once');
    }

    public function testDeadSocketIsReopenedOnlyOnce(): void
    {
        $connection = new class ('unix:///nonexistent') extends StreamConnection {
            public int $connects = 0;

            protected function connect(float $timeout)
            {
                $this->connects++;
                [$mine, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
                fclose($theirs); // dead before anything is written: the write fails with EPIPE

                return $mine;
            }
        };
        try {
            $connection->request(Request::ping(), 1.0, 1 << 20);
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertNotInstanceOf(UnknownOutcomeException::class, $e, 'nothing was sent, so the outcome is known');
            self::assertStringContainsString('not sent', $e->getMessage());
        }
        self::assertSame(2, $connection->connects, 'the first socket and exactly one reopen');
    }

    public function testConnectionClosedAfterRequestIsUnknownOutcomeAndNotResent(): void
    {
        $server = $this->serve([
            [['recv'], ['close']],
            [['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        try {
            $client->execute('UPDATE accounts SET balance = balance - 10');
            self::fail('no exception');
        } catch (UnknownOutcomeException $e) {
            self::assertStringContainsString('may or may not have been executed', $e->getMessage());
            self::assertInstanceOf(CommunicationException::class, $e);
        }
        self::assertSame(['exec'], array_column(self::maps($server), 'op'), 'the request was not re-sent');

        $client->ping();
        self::assertSame(2, $server->count('accept'), 'the next call opened a new socket');
        self::assertSame([['conn' => 1, 'op' => 'exec'], ['conn' => 2, 'op' => 'ping']], array_map(
            static fn (array $r): array => ['conn' => $r['conn'], 'op' => $r['map']['op']],
            $server->requests(),
        ));
    }

    public function testRequestLeftUnreadIsSentAgainOnANewSocket(): void
    {
        // tetherd handing its clients over closes an idle connection at once; a request written at that moment is
        // never read, and the reset says so: it is sent once more, to whoever serves the socket now.
        $server = $this->serve([
            [['recv'], ['reply', []], ['close_unread', 5]],
            [['recv'], ['reply', ['affected' => 1]]],
        ]);
        $client = $this->client($server);
        $client->ping();

        $result = $client->execute('UPDATE accounts SET balance = balance - 10');

        self::assertSame(1, $result->affectedRows);
        self::assertTrue($server->waitFor('reset'), 'the server did not close with the request unread: ' . $server->stderr());
        self::assertSame([['conn' => 1, 'op' => 'ping'], ['conn' => 2, 'op' => 'exec']], array_map(
            static fn (array $r): array => ['conn' => $r['conn'], 'op' => $r['map']['op']],
            $server->requests(),
        ), 'the exec reached a server exactly once');
    }

    public function testRequestOfATransactionLeftUnreadIsNotSentAgain(): void
    {
        $server = $this->serve([
            [['recv'], ['reply', ['tx' => 7]], ['close_unread', 5]],
            [['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        $tx = $client->begin();
        try {
            $tx->execute('UPDATE accounts SET balance = balance - 10');
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertNotInstanceOf(UnknownOutcomeException::class, $e);
            self::assertStringContainsString('transaction 7 was lost', $e->getMessage());
        }
        self::assertSame(['begin'], array_column(self::maps($server), 'op'), 'nothing of the transaction was sent again');
    }

    public function testReplyTimeoutIsUnknownOutcomeAndDropsSocket(): void
    {
        $server = $this->serve([[['recv'], ['await_eof', 5]]]);
        $client = $this->client($server, ['timeout' => 0.3]);
        $start = microtime(true);
        try {
            $client->query('SELECT slow()');
            self::fail('no exception');
        } catch (UnknownOutcomeException $e) {
            self::assertStringContainsString('no reply from tetherd within 0.300 s', $e->getMessage());
        }
        $elapsed = microtime(true) - $start;
        self::assertGreaterThanOrEqual(0.29, $elapsed);
        self::assertLessThan(2.0, $elapsed);
        self::assertTrue($server->waitFor('eof'), 'the client closed the socket');
    }

    public function testLongerTimeoutMsExtendsTheSocketTimeout(): void
    {
        $server = $this->serve([[['recv'], ['sleep', 0.6], ['reply', ['columns' => ['x'], 'rows' => [[1]]]]]]);
        $rows = $this->client($server, ['timeout' => 0.2])->query('SELECT slow()', [], null, 500);
        self::assertSame([['x' => 1]], $rows);
    }

    public function testReplyWithAnotherIdMeansOutOfSync(): void
    {
        $server = $this->serve([[['recv'], ['reply', [], 1], ['await_eof', 5]]]);
        try {
            $this->client($server)->ping();
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertStringContainsString('out of sync', $e->getMessage());
        }
        self::assertTrue($server->waitFor('eof'), 'the client dropped the socket');
    }

    /** @dataProvider badFrames */
    public function testBadReplyFrameIsCommunicationExceptionAndDropsSocket(string $bytes, string $message): void
    {
        $server = $this->serve([[['recv'], ['raw', $bytes], ['await_eof', 5]]]);
        try {
            $this->client($server, ['max_frame_bytes' => 1024])->ping();
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertStringContainsString($message, $e->getMessage());
            self::assertStringContainsString('may or may not have been executed', $e->getMessage());
        }
        self::assertTrue($server->waitFor('eof'), 'the client dropped the socket');
    }

    /** @return iterable<string, array{string, string}> */
    public static function badFrames(): iterable
    {
        yield 'zero length' => ["\0\0\0\0", 'frame of 0 bytes'];
        yield 'over max_frame_bytes' => [pack('N', 1025) . str_repeat("\x90", 16), 'frame of 1025 bytes'];
        yield 'not msgpack' => [pack('N', 3) . "\xc1\xc1\xc1", 'not a MessagePack map'];
        yield 'not a map' => [pack('N', 1) . "\x2a", 'not a MessagePack map'];
    }

    public function testConnectionClosedMidReplyIsUnknownOutcome(): void
    {
        $server = $this->serve([[['recv'], ['raw', pack('N', 50) . "\x82\xa2id"], ['close']]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->expectExceptionMessage('tetherd closed the connection before replying; the request may or may not have been executed');
        $this->client($server)->ping();
    }

    public function testFrameSplitAcrossWritesIsReassembled(): void
    {
        $payload = msgpack_pack(['id' => 1, 'columns' => ['a'], 'rows' => [['hello']]]);
        $frame = pack('N', strlen($payload)) . $payload;
        $server = $this->serve([[
            ['recv'],
            ['raw', substr($frame, 0, 2)], ['sleep', 0.05],
            ['raw', substr($frame, 2, 5)], ['sleep', 0.05],
            ['raw', substr($frame, 7)],
        ]]);
        self::assertSame([['a' => 'hello']], $this->client($server)->query('SELECT a'));
    }

    public function testLargeReplyIsReadFully(): void
    {
        $blob = random_bytes(3 << 20);
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['b', 'n'], 'rows' => [[$blob, 1], ['', 2]]]]]]);
        $rows = $this->client($server)->query('SELECT b, n FROM blobs');
        self::assertCount(2, $rows);
        self::assertSame($blob, $rows[0]['b']);
        self::assertSame(2, $rows[1]['n']);
    }

    public function testTransactionLostWithItsSocketIsNotSentOnANewOne(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 9]], ['close']]]);
        $client = $this->client($server);
        $tx = $client->begin();
        self::assertTrue($server->waitFor('closed'));

        try {
            $tx->execute('UPDATE t SET a = 1');
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertNotInstanceOf(UnknownOutcomeException::class, $e);
            self::assertStringContainsString('transaction 9 was lost', $e->getMessage());
        }
        self::assertFalse($tx->isOpen());
        $tx->rollback(); // a lost transaction is rolled back already: no exception, nothing sent
        self::assertSame(['begin'], array_column(self::maps($server), 'op'));
        self::assertSame(1, $server->count('accept'), 'no socket was opened for the lost transaction');
    }

    public function testTransactionOfADroppedSocketIsNotSentOnTheNextOne(): void
    {
        $server = $this->serve([
            [['recv'], ['reply', ['tx' => 4]], ['await_eof', 5]],
            [['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]], ['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        $tx = $client->begin();
        $client->drop();
        self::assertFalse($tx->isOpen());

        try {
            $tx->execute('UPDATE t SET a = 1');
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertStringContainsString('transaction 4 was lost', $e->getMessage());
        }
        $client->ping();
        self::assertSame([['conn' => 1, 'op' => 'begin'], ['conn' => 2, 'op' => 'ping']], array_map(
            static fn (array $r): array => ['conn' => $r['conn'], 'op' => $r['map']['op']],
            $server->requests(),
        ));
    }

    /**
     * close() on a persistent client rolls back the transaction it left open, at once (its locks are free when
     * close() returns) and keeps the socket, which other clients of the process and the next PHP request share.
     */
    public function testCloseRollsBackTheClientsTransactionAndKeepsAPersistentSocket(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 4]], ['recv'], ['reply', []], ['recv'], ['reply', []]]]);
        $client = $this->client($server);
        $tx = $client->begin();
        $client->close();
        self::assertFalse($tx->isOpen());
        self::assertTrue($tx->isFinished());
        $client->ping();
        self::assertSame([['op' => 'begin'], ['op' => 'rollback', 'tx' => 4], ['op' => 'ping']], array_map(
            static fn (array $m): array => array_intersect_key($m, ['op' => 1, 'tx' => 1]),
            self::maps($server),
        ));
        self::assertSame(1, $server->count('accept'), 'the persistent socket stays');
    }

    /** close() on a non-persistent client rolls back its open transaction, then closes its socket. */
    public function testCloseRollsBackAndClosesANonPersistentSocket(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 7]], ['recv'], ['reply', []], ['await_eof', 5]]]);
        $client = $this->client($server, ['persistent' => false]);
        $other = $this->client($server, ['persistent' => false]);
        $tx = $client->begin();
        $client->close();
        self::assertTrue($server->waitFor('eof'), 'the socket was closed');
        self::assertSame(['begin', 'rollback'], array_column(self::maps($server), 'op'), 'rolled back before the close, not by the destructor');
        self::assertTrue($tx->isFinished());
        unset($other);
    }

    /** close() leaves alone the transactions of another client on the same persistent socket. */
    public function testCloseLeavesAnotherClientsTransactionOnTheSharedSocket(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 1]], ['recv'], ['reply', ['tx' => 2]], ['recv'], ['reply', []], ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]]]]);
        $mine = $this->client($server);
        $theirs = $this->client($server);
        $myTx = $mine->begin();
        $theirTx = $theirs->begin();
        $mine->close();
        self::assertFalse($myTx->isOpen());
        self::assertTrue($theirTx->isOpen());
        $theirTx->execute('UPDATE t SET a = 1');
        self::assertSame([['op' => 'begin'], ['op' => 'begin'], ['op' => 'rollback', 'tx' => 1], ['op' => 'exec', 'tx' => 2]], array_map(
            static fn (array $m): array => array_intersect_key($m, ['op' => 1, 'tx' => 1]),
            self::maps($server),
        ));
    }

    public function testIdsWrapAfterTwoToTheThirtyTwoMinusOne(): void
    {
        $server = $this->serve([[['recv'], ['reply', []], ['recv'], ['reply', []], ['recv'], ['reply', []]]]);
        $connection = new StreamConnection('unix://' . $server->address(), false);
        $connection->request(Request::ping(), 2.0, 1 << 20);
        (new \ReflectionProperty(StreamConnection::class, 'lastId'))->setValue($connection, 0xFFFFFFFE);
        $connection->request(Request::ping(), 2.0, 1 << 20);
        $connection->request(Request::ping(), 2.0, 1 << 20);

        self::assertSame([1, 0xFFFFFFFF, 1], array_column(self::maps($server), 'id'));
    }

    public function testIdsOnAReusedPersistentSocketStayAboveEarlierOnes(): void
    {
        $server = $this->serve([[['recv'], ['reply', []], ['recv'], ['reply', []], ['recv'], ['reply', []]]]);
        // Two connection objects on one persistent address behave like two PHP requests of one worker:
        // PHP hands the second the socket the first one used.
        $first = new StreamConnection('unix://' . $server->address(), true);
        $first->request(Request::ping(), 2.0, 1 << 20);
        $first->request(Request::ping(), 2.0, 1 << 20);
        $second = new StreamConnection('unix://' . $server->address(), true);
        $second->request(Request::ping(), 2.0, 1 << 20);

        $ids = array_column(self::maps($server), 'id');
        self::assertSame(1, $server->count('accept'), 'the persistent socket was reused');
        self::assertSame([1, 2], array_slice($ids, 0, 2));
        self::assertGreaterThan(2, $ids[2]);
    }
}
