<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Batch;

use Tether\Batch\Operation;
use Tether\Batch\PendingBatch;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\ExecResult;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * PendingBatchTest drives Client::sendBatch() against the scripted fake tetherd: replies matched by id whatever
 * their order, other calls while batches are pending, and the failure rules of a pending request.
 *
 * The fake server answers `['reply', map, idDelta]` with the id of the last request it received plus idDelta, so
 * after receiving a batch and then a query, delta -1 answers the batch and 0 the query.
 */
final class PendingBatchTest extends FakeServerTestCase
{
    private const PING_RESULT = ['results' => [['ok' => true]]];

    public function testSendBatchReturnsBeforeTheReplyAndWaitCollectsIt(): void
    {
        $server = $this->serve([[['recv'], ['sleep', 0.3], ['reply', ['results' => [['columns' => ['n'], 'rows' => [[1]]], ['ok' => true]]]]]]);
        $client = $this->client($server);

        $start = microtime(true);
        $pending = $client->sendBatch(['n' => Operation::query('SELECT 1 AS n'), 'alive' => Operation::ping()], 800);
        self::assertLessThan(0.2, microtime(true) - $start, 'sendBatch does not wait for the reply');
        self::assertFalse($pending->isDone());

        self::assertSame(['n' => [['n' => 1]], 'alive' => true], $pending->wait());
        self::assertTrue($pending->isDone());
        self::assertSame(
            ['id' => 1, 'op' => 'batch', 'timeout_ms' => 800, 'ops' => [['op' => 'query', 'sql' => 'SELECT 1 AS n'], ['op' => 'ping']]],
            self::maps($server)[0],
        );
    }

    public function testQueryWhileABatchIsPendingGetsItsOwnReplyWhenTheBatchReplyComesFirst(): void
    {
        $server = $this->serve([[
            ['recv'], ['recv'],
            ['reply', ['results' => [['affected' => 3, 'insert_id' => 0]]], -1], // the batch's, while the query waits
            ['reply', ['columns' => ['q'], 'rows' => [['query']]]],
        ]]);
        $client = $this->client($server);

        $pending = $client->sendBatch(['hit' => Operation::execute('UPDATE hits SET n = n + 1')]);
        self::assertSame([['q' => 'query']], $client->query('SELECT q'));
        $results = $pending->wait();

        self::assertInstanceOf(ExecResult::class, $results['hit']);
        self::assertSame(3, $results['hit']->affectedRows);
        self::assertSame([[1, 'batch'], [2, 'query']], array_map(static fn (array $m): array => [$m['id'], $m['op']], self::maps($server)));
        self::assertSame(1, $server->count('accept'), 'one socket carried both');
    }

    public function testQueryWhileABatchIsPendingWhenTheQueryReplyComesFirst(): void
    {
        $server = $this->serve([[
            ['recv'], ['recv'],
            ['reply', ['columns' => ['q'], 'rows' => [['query']]]],
            ['sleep', 0.1],
            ['reply', self::PING_RESULT, -1],
        ]]);
        $client = $this->client($server);

        $pending = $client->sendBatch([Operation::ping()]);
        self::assertSame([['q' => 'query']], $client->query('SELECT q'));
        self::assertSame([true], $pending->wait());
    }

    public function testTwoPendingBatchesWaitedForInReverseOrder(): void
    {
        $server = $this->serve([[
            ['recv'], ['recv'],
            ['reply', ['results' => [['columns' => ['a'], 'rows' => [['first']]]]], -1],
            ['reply', ['results' => [['columns' => ['b'], 'rows' => [['second']]]]]],
        ]]);
        $client = $this->client($server);

        $first = $client->sendBatch(['a' => Operation::query('SELECT a')]);
        $second = $client->sendBatch(['b' => Operation::query('SELECT b')]);

        self::assertSame(['b' => [['b' => 'second']]], $second->wait(), 'read past the first batch\'s reply');
        self::assertSame(['a' => [['a' => 'first']]], $first->wait(), 'kept for its own wait');
    }

    public function testTransactionWhileABatchIsPending(): void
    {
        $server = $this->serve([[
            ['recv'], // batch
            ['recv'], ['reply', ['tx' => 8]],
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['reply', self::PING_RESULT, -2],
            ['recv'], ['reply', []],
        ]]);
        $client = $this->client($server);

        $pending = $client->sendBatch([Operation::ping()]);
        $client->transaction(static function ($tx): void {
            $tx->execute('UPDATE t SET a = 1');
        });
        self::assertSame([true], $pending->wait());
        self::assertSame(['batch', 'begin', 'exec', 'commit'], array_column(self::maps($server), 'op'));
    }

    public function testWaitTwiceReturnsTheSameResults(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [['columns' => ['n'], 'rows' => [[1]]]]]], ['await_eof', 5]]]);
        $client = $this->client($server);
        $pending = $client->sendBatch([Operation::query('SELECT 1 AS n')]);

        $results = $pending->wait();
        self::assertSame($results, $pending->wait());
        self::assertSame([[['n' => 1]]], $results);
        self::assertSame(1, $server->count('request'), 'nothing is sent again');
    }

    public function testWaitTwiceThrowsTheSameExceptionAgain(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['error' => ['code' => 'bad_request', 'message' => 'ops: too many', 'retry' => false]]]]]);
        $pending = $this->client($server)->sendBatch([Operation::ping()]);

        try {
            $pending->wait();
            self::fail('no exception');
        } catch (ServerException $first) {
            self::assertSame(ServerException::BAD_REQUEST, $first->getErrorCode());
        }
        try {
            $pending->wait();
            self::fail('no exception the second time');
        } catch (ServerException $second) {
            self::assertSame($first, $second);
        }
        self::assertTrue($pending->isDone());
    }

    public function testPendingBatchWhoseSocketDiesIsUnknownOutcome(): void
    {
        $server = $this->serve([
            [['recv'], ['close']],
            [['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        $pending = $client->sendBatch([Operation::execute('UPDATE accounts SET balance = 0')]);

        try {
            $pending->wait();
            self::fail('no exception');
        } catch (UnknownOutcomeException $e) {
            self::assertStringContainsString('may or may not have been executed', $e->getMessage());
        }
        $client->ping();
        self::assertSame([[1, 'batch'], [2, 'ping']], array_map(static fn (array $r): array => [$r['conn'], $r['map']['op']], $server->requests()), 'not re-sent; the next call reconnected');
    }

    public function testPendingBatchOfASocketThatDiedUnderAnotherCallIsUnknownOutcome(): void
    {
        $server = $this->serve([
            [['recv'], ['recv'], ['close']],
            [['recv'], ['reply', []]],
        ]);
        $client = $this->client($server);
        $pending = $client->sendBatch([Operation::ping()]);
        try {
            $client->query('SELECT 1');
            self::fail('no exception');
        } catch (UnknownOutcomeException) {
        }

        $client->ping(); // a new socket: the batch's reply can never come on it
        try {
            $pending->wait();
            self::fail('no exception');
        } catch (UnknownOutcomeException $e) {
            self::assertStringContainsString('failed before the reply to request 1 arrived', $e->getMessage());
        }
    }

    public function testReplyReadBeforeTheSocketDiedIsStillReturned(): void
    {
        $server = $this->serve([[['recv'], ['recv'], ['reply', self::PING_RESULT, -1], ['close']]]);
        $client = $this->client($server);
        $pending = $client->sendBatch([Operation::ping()]);
        try {
            $client->query('SELECT 1');
            self::fail('no exception');
        } catch (UnknownOutcomeException) {
        }

        self::assertSame([true], $pending->wait(), 'its reply came intact before the socket failed');
    }

    public function testWaitHonoursTheBatchTimeout(): void
    {
        // The client's timeout is 0.2 s; the batch's 500 ms deadline raises its wait to 1.5 s.
        $server = $this->serve([[['recv'], ['sleep', 0.6], ['reply', self::PING_RESULT]]]);
        $pending = $this->client($server, ['timeout' => 0.2])->sendBatch([Operation::ping()], 500);
        self::assertSame([true], $pending->wait());
    }

    public function testWaitGivesUpAfterTheTimeoutAndDropsTheSocket(): void
    {
        $server = $this->serve([[['recv'], ['await_eof', 5]]]);
        $pending = $this->client($server, ['timeout' => 0.3])->sendBatch([Operation::ping()]);
        $start = microtime(true);
        try {
            $pending->wait();
            self::fail('no exception');
        } catch (UnknownOutcomeException $e) {
            self::assertStringContainsString('no reply from tetherd within 0.300 s', $e->getMessage());
        }
        self::assertLessThan(2.0, microtime(true) - $start);
        self::assertTrue($server->waitFor('eof'), 'the client closed the socket');
    }

    public function testAnAbandonedBatchReplyIsThrownAway(): void
    {
        $server = $this->serve([[
            ['recv'], ['recv'],
            ['reply', self::PING_RESULT, -1],
            ['reply', ['columns' => ['q'], 'rows' => [['query']]]],
            ['recv'], ['reply', []],
        ]]);
        $client = $this->client($server);
        $client->sendBatch([Operation::ping()]); // not kept: abandoned at once

        self::assertSame([['q' => 'query']], $client->query('SELECT q'));
        $connection = (new \ReflectionProperty(Client::class, 'connection'))->getValue($client);
        self::assertSame([], (new \ReflectionProperty(StreamConnection::class, 'stash'))->getValue($connection), 'not kept');
        $client->ping();
        self::assertSame(1, $server->count('accept'), 'the abandoned reply did not disturb the stream');
    }

    public function testEmptyBatchIsDoneWithoutARoundTrip(): void
    {
        $client = new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket-' . bin2hex(random_bytes(4))]);
        $pending = $client->sendBatch([]);
        self::assertInstanceOf(PendingBatch::class, $pending);
        self::assertTrue($pending->isDone());
        self::assertSame([], $pending->wait());
    }

    public function testSendBatchToAnUnreachableDaemonIsCommunicationException(): void
    {
        $client = new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket-' . bin2hex(random_bytes(4))]);
        try {
            $client->sendBatch([Operation::ping()]);
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertNotInstanceOf(UnknownOutcomeException::class, $e, 'nothing was sent');
        }
    }

    public function testMalformedBatchReplyIsUnknownOutcomeOnWait(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => []]], ['await_eof', 5]]]);
        $pending = $this->client($server)->sendBatch([Operation::ping()]);
        $this->expectException(UnknownOutcomeException::class);
        $pending->wait();
    }
}
