<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Batch\Operation;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Connection\UnknownOutcomeException;
use Tether\ExecResult;
use Tether\Exception\LogicException;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;
use Tether\Transaction;

/**
 * ClientTest drives Client against a scripted fake tetherd: what goes on the wire, and how replies come back.
 */
final class ClientTest extends FakeServerTestCase
{
    public function testPingSendsIdAndOpOnly(): void
    {
        $server = $this->serve([[['recv'], ['reply', []]]]);
        $this->client($server)->ping();

        $requests = $server->requests();
        self::assertCount(1, $requests);
        self::assertSame(['id' => 1, 'op' => 'ping'], $requests[0]['map']);
        self::assertSame("\x82\xa2id\x01\xa2op\xa4ping", $requests[0]['raw']);
    }

    public function testRequestsArePlainMessagePackAndLeaveTheCallersMapsAlone(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['x'], 'rows' => []]], ['recv'], ['reply', ['results' => array_fill(0, 2, ['columns' => ['x'], 'rows' => [[1], null]])]]]]);
        $client = $this->client($server);
        $n = 7;
        $params = [&$n, -1, 1 << 40, 1.5, true, null, "b\x00\xff", str_repeat('s', 300)];
        $client->query('SELECT ?', $params);
        $op = Operation::multiGet('t', [[1, 'a'], [1, 'a']], ['x']);
        $client->batch([$op, $op]);

        $requests = $server->requests();
        self::assertSame(msgpack_pack(['id' => 1, 'op' => 'query', 'sql' => 'SELECT ?', 'params' => [7, -1, 1 << 40, 1.5, true, null, "b\x00\xff", str_repeat('s', 300)]]), $requests[0]['raw']);
        self::assertSame(msgpack_pack(['id' => 2, 'op' => 'batch', 'ops' => [$op->request, $op->request]]), $requests[1]['raw'], 'a map used twice is sent twice, as it is');
        self::assertSame(['op' => 'multi_get', 'table' => 't', 'keys' => [[1, 'a'], [1, 'a']], 'columns' => ['x']], $op->request, 'no id written into the operation');
    }

    public function testIdsIncrementOnOneConnection(): void
    {
        $server = $this->serve([[['recv'], ['reply', []], ['recv'], ['reply', []], ['recv'], ['reply', []]]]);
        $client = $this->client($server);
        $client->ping();
        $client->ping();
        $client->ping();

        self::assertSame([1, 2, 3], array_column(self::maps($server), 'id'));
        self::assertSame(1, $server->count('accept'));
    }

    public function testQueryBuildsAssociativeRowsAndSendsKeysInSpecOrder(): void
    {
        $server = $this->serve([[
            ['recv'],
            ['reply', ['columns' => ['id', 'name', 'note', 'price'], 'rows' => [[1, 'a', null, 1.5], [2, "b\x00\xff", 'x', -2.25]]]],
        ]]);
        $rows = $this->client($server)->query('SELECT * FROM t WHERE a = ? AND b = ?', ['first' => 7, 'second' => 'x'], 'pg', 250);

        self::assertSame([
            ['id' => 1, 'name' => 'a', 'note' => null, 'price' => 1.5],
            ['id' => 2, 'name' => "b\x00\xff", 'note' => 'x', 'price' => -2.25],
        ], $rows);
        self::assertSame(
            ['id' => 1, 'op' => 'query', 'backend' => 'pg', 'sql' => 'SELECT * FROM t WHERE a = ? AND b = ?', 'params' => [7, 'x'], 'timeout_ms' => 250],
            self::maps($server)[0],
        );
    }

    public function testQueryWithoutParamsOmitsAbsentKeys(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['x'], 'rows' => []]]]]);
        self::assertSame([], $this->client($server)->query('SELECT 1 WHERE 0'));
        self::assertSame(['id' => 1, 'op' => 'query', 'sql' => 'SELECT 1 WHERE 0'], self::maps($server)[0]);
    }

    public function testQueryOneReturnsFirstRowOrNull(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['n'], 'rows' => [[1], [2]]]],
            ['recv'], ['reply', ['columns' => ['n'], 'rows' => []]],
        ]]);
        $client = $this->client($server);

        self::assertSame(['n' => 1], $client->queryOne('SELECT n FROM t'));
        self::assertNull($client->queryOne('SELECT n FROM t WHERE 0'));
    }

    public function testExecuteReturnsExecResult(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['affected' => 3, 'insert_id' => 42]]]]);
        $result = $this->client($server)->execute('UPDATE t SET a = ?', [null]);

        self::assertSame(3, $result->affectedRows);
        self::assertSame(42, $result->lastInsertId);
        self::assertSame(['id' => 1, 'op' => 'exec', 'sql' => 'UPDATE t SET a = ?', 'params' => [null]], self::maps($server)[0]);
    }

    public function testDefaultBackendOptionAppliesWhenACallNamesNone(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
        ]]);
        $client = $this->client($server, ['backend' => 'maria']);
        $client->execute('DELETE FROM t');
        $client->execute('DELETE FROM t', [], 'pg');

        self::assertSame(['maria', 'pg'], array_column(self::maps($server), 'backend'));
    }

    public function testCacheTtlMsIsSentWhenPositive(): void
    {
        $reply = ['reply', ['columns' => ['v'], 'rows' => [[1]]]];
        $columnar = ['reply', ['columns' => ['v'], 'count' => 1, 'data' => [[1]]]];
        $server = $this->serve([[['recv'], $reply, ['recv'], $columnar, ['recv'], $reply]]);
        $client = $this->client($server);
        $client->query('SELECT v FROM x', [], null, null, 5000);
        $client->queryColumns('SELECT v FROM x', [], null, null, 250);
        $client->queryOne('SELECT v FROM x', [], null, null, 0);

        self::assertSame([5000, 250, null], array_map(static fn (array $m): ?int => $m['cache_ttl_ms'] ?? null, self::maps($server)));
    }

    public function testTimeFormatOptionIsSentWithQueriesOnly(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['t'], 'rows' => [['2024-02-29 23:59:58']]]],
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
        ]]);
        $client = $this->client($server, ['time_format' => 'sql']);
        $client->query('SELECT t FROM x');
        $client->execute('DELETE FROM x');

        self::assertSame(['sql', null], array_map(static fn (array $m): ?string => $m['time_format'] ?? null, self::maps($server)));
    }

    public function testErrorReplyBecomesServerExceptionAndConnectionStaysUsable(): void
    {
        $server = $this->serve([[
            ['recv'],
            ['reply', ['error' => ['code' => 'backend_error', 'message' => "Table 'app.t' doesn't exist", 'retry' => false, 'backend_code' => '1146']]],
            ['recv'], ['reply', []],
        ]]);
        $client = $this->client($server);
        try {
            $client->query('SELECT * FROM t');
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BACKEND_ERROR, $e->getErrorCode());
            self::assertSame("Table 'app.t' doesn't exist", $e->getMessage());
            self::assertFalse($e->isRetryable());
            self::assertSame('1146', $e->getBackendCode());
            self::assertInstanceOf(TetherException::class, $e);
        }
        $client->ping();
        self::assertSame(1, $server->count('accept'), 'an error reply must not cost a reconnect');
    }

    public function testRetryableErrorReply(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['error' => ['code' => 'busy', 'message' => 'no connection free within 1s', 'retry' => true]]]]]);
        try {
            $this->client($server)->execute('UPDATE t SET a = 1');
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BUSY, $e->getErrorCode());
            self::assertTrue($e->isRetryable());
            self::assertNull($e->getBackendCode());
        }
    }

    public function testFrameLevelErrorWithIdZeroIsServerExceptionAndDropsSocket(): void
    {
        $server = $this->serve([[
            ['recv'],
            ['reply', ['id' => 0, 'error' => ['code' => 'too_large', 'message' => 'frame of 9000000 bytes over max_frame_bytes', 'retry' => false]]],
            ['await_eof', 5],
        ]]);
        try {
            $this->client($server)->execute('INSERT INTO t VALUES (?)', [str_repeat('x', 100)]);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::TOO_LARGE, $e->getErrorCode());
        }
        self::assertTrue($server->waitFor('eof'), 'the client must close a socket that tetherd is closing');
    }

    public function testBatchReturnsResultsAndServerExceptionsInRequestOrder(): void
    {
        $server = $this->serve([[[
            'recv'], ['reply', ['results' => [
                ['columns' => ['n'], 'rows' => [[1]]],
                ['error' => ['code' => 'backend_error', 'message' => 'duplicate key', 'retry' => false, 'backend_code' => '23505']],
                ['affected' => 1, 'insert_id' => 0],
                [],
            ]]],
        ]]);
        $results = $this->client($server)->batch([
            'count' => Operation::query('SELECT ? AS n', [1], 'main'),
            'dup' => Operation::execute('INSERT INTO u VALUES ($1)', [5], 'pg', 100),
            'ok' => Operation::execute('UPDATE u SET a = 1', [], 'maria'),
            'ping' => Operation::ping(),
        ], 500);

        self::assertSame(['count', 'dup', 'ok', 'ping'], array_keys($results));
        self::assertSame([['n' => 1]], $results['count']);
        self::assertInstanceOf(ServerException::class, $results['dup']);
        self::assertSame('23505', $results['dup']->getBackendCode());
        self::assertSame('duplicate key', $results['dup']->getMessage());
        self::assertInstanceOf(ExecResult::class, $results['ok']);
        self::assertSame(1, $results['ok']->affectedRows);
        self::assertTrue($results['ping']);
        self::assertSame([
            'id' => 1,
            'op' => 'batch',
            'timeout_ms' => 500,
            'ops' => [
                ['op' => 'query', 'backend' => 'main', 'sql' => 'SELECT ? AS n', 'params' => [1]],
                ['op' => 'exec', 'backend' => 'pg', 'sql' => 'INSERT INTO u VALUES ($1)', 'params' => [5], 'timeout_ms' => 100],
                ['op' => 'exec', 'backend' => 'maria', 'sql' => 'UPDATE u SET a = 1'],
                ['op' => 'ping'],
            ],
        ], self::maps($server)[0]);
    }

    public function testBatchOperationsGetTheDefaultBackend(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [['affected' => 0, 'insert_id' => 0], []]]]]]);
        $this->client($server, ['backend' => 'maria'])->batch([Operation::execute('DELETE FROM t'), Operation::ping()]);

        self::assertSame([['op' => 'exec', 'backend' => 'maria', 'sql' => 'DELETE FROM t'], ['op' => 'ping']], self::maps($server)[0]['ops']);
    }

    public function testBatchWithWrongResultCountIsMalformed(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [[]]]], ['await_eof', 5]]]);
        $this->expectException(UnknownOutcomeException::class);
        $this->client($server)->batch([Operation::ping(), Operation::ping()]);
    }

    public function testEmptyBatchNeedsNoRoundTrip(): void
    {
        $client = new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket-' . bin2hex(random_bytes(4))]);
        self::assertSame([], $client->batch([]));
    }

    public function testLocalCacheOptionsAreChecked(): void
    {
        foreach ([['local_cache' => 'yes'], ['local_cache' => true, 'local_cache_max_entry_bytes' => 0]] as $options) {
            try {
                new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket'] + $options);
                self::fail('accepted ' . var_export($options, true));
            } catch (LogicException $e) {
                self::assertStringContainsString('option local_cache', $e->getMessage());
            }
        }
    }

    public function testLocalCacheWithoutASegmentSendsNoVersions(): void
    {
        // No tetherd versions segment beside this socket: the read goes to tetherd as it would without the option,
        // and asks for no versions (which an older tetherd would refuse).
        $server = $this->serve([[
            ['recv'], ['reply', ['columns' => ['v'], 'rows' => [[1]]]],
        ]]);
        $client = $this->client($server, ['local_cache' => true]);
        self::assertSame(['v' => 1], $client->queryOne('SELECT v FROM t WHERE id = ?', [1], null, null, 1000));
        $request = self::maps($server)[0];
        self::assertSame(1000, $request['cache_ttl_ms']);
        self::assertArrayNotHasKey('versions', $request);
    }

    public function testBatchRejectsSomethingElseThanOperations(): void
    {
        $client = new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket']);
        $this->expectException(LogicException::class);
        $client->batch([Operation::ping(), 'SELECT 1']);
    }

    public function testTransactionHelperCommitsAndReturnsTheCallbackValue(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['tx' => 7]],
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 5]],
            ['recv'], ['reply', []],
        ]]);
        $value = $this->client($server)->transaction(
            static fn (Transaction $tx): int => $tx->execute('INSERT INTO t (a) VALUES (?)', ['x'])->lastInsertId,
            'main',
        );

        self::assertSame(5, $value);
        self::assertSame([
            ['id' => 1, 'op' => 'begin', 'backend' => 'main'],
            ['id' => 2, 'op' => 'exec', 'sql' => 'INSERT INTO t (a) VALUES (?)', 'params' => ['x'], 'tx' => 7],
            ['id' => 3, 'op' => 'commit', 'tx' => 7],
        ], self::maps($server));
    }

    public function testTransactionHelperRollsBackAndRethrows(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 7]], ['recv'], ['reply', []]]]);
        $thrown = new \DomainException('application failure');
        try {
            $this->client($server)->transaction(static function () use ($thrown): void {
                throw $thrown;
            });
            self::fail('no exception');
        } catch (\DomainException $e) {
            self::assertSame($thrown, $e);
            self::assertNull($e->getPrevious());
        }
        self::assertSame([['id' => 1, 'op' => 'begin'], ['id' => 2, 'op' => 'rollback', 'tx' => 7]], self::maps($server));
    }

    public function testTransactionHelperKeepsRollbackFailureAsPrevious(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['tx' => 7]],
            ['recv'], ['reply', ['error' => ['code' => 'internal', 'message' => 'rollback exploded', 'retry' => false]]],
        ]]);
        $cause = new \LogicException('cause');
        $thrown = new \RuntimeException('application failure', 0, $cause);
        try {
            $this->client($server)->transaction(static function () use ($thrown): void {
                throw $thrown;
            });
            self::fail('no exception');
        } catch (\RuntimeException $e) {
            self::assertSame($thrown, $e);
            self::assertSame($cause, $e->getPrevious());
            self::assertInstanceOf(ServerException::class, $cause->getPrevious());
            self::assertSame('rollback exploded', $cause->getPrevious()->getMessage());
        }
    }

    public function testTransactionHelperLeavesATransactionTheCallbackEnded(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', []]]]);
        $result = $this->client($server)->transaction(static function (Transaction $tx): string {
            $tx->rollback();

            return 'rolled back by hand';
        });

        self::assertSame('rolled back by hand', $result);
        self::assertSame(['begin', 'rollback'], array_column(self::maps($server), 'op'));
    }

    public function testTransactionStatementsCarryTheHandleAndFinishedOnesThrow(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['tx' => 11]],
            ['recv'], ['reply', ['columns' => ['a'], 'rows' => [['x'], ['y']]]],
            ['recv'], ['reply', ['columns' => ['a'], 'rows' => [['x'], ['y']]]],
            ['recv'], ['reply', []],
        ]]);
        $tx = $this->client($server)->begin('pg', 1000);
        self::assertTrue($tx->isOpen());
        self::assertSame(11, $tx->handle());
        self::assertSame([['a' => 'x'], ['a' => 'y']], $tx->query('SELECT a FROM t WHERE b = $1', [2], 300));
        self::assertSame(['a' => 'x'], $tx->queryOne('SELECT a FROM t'));
        $tx->commit();
        self::assertFalse($tx->isOpen());
        self::assertTrue($tx->isFinished());

        self::assertSame([
            ['id' => 1, 'op' => 'begin', 'backend' => 'pg', 'timeout_ms' => 1000],
            ['id' => 2, 'op' => 'query', 'sql' => 'SELECT a FROM t WHERE b = $1', 'params' => [2], 'tx' => 11, 'timeout_ms' => 300],
            ['id' => 3, 'op' => 'query', 'sql' => 'SELECT a FROM t', 'tx' => 11],
            ['id' => 4, 'op' => 'commit', 'tx' => 11],
        ], self::maps($server));

        foreach ([
            'query' => static fn () => $tx->query('SELECT 1'),
            'queryOne' => static fn () => $tx->queryOne('SELECT 1'),
            'execute' => static fn () => $tx->execute('DELETE FROM t'),
            'commit' => static fn () => $tx->commit(),
            'rollback' => static fn () => $tx->rollback(),
        ] as $method => $call) {
            try {
                $call();
                self::fail("$method on a committed transaction did not throw");
            } catch (LogicException $e) {
                self::assertStringContainsString('already committed', $e->getMessage());
            }
        }
        self::assertCount(4, $server->requests(), 'nothing is sent for a finished transaction');
    }

    public function testTransactionLeftOpenIsRolledBackWhenDestroyed(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', []], ['recv'], ['reply', []]]]);
        $client = $this->client($server);
        $tx = $client->begin();
        unset($tx);
        $client->ping();

        self::assertSame([
            ['id' => 1, 'op' => 'begin'],
            ['id' => 2, 'op' => 'rollback', 'tx' => 3],
            ['id' => 3, 'op' => 'ping'],
        ], self::maps($server));
    }

    public function testRollbackOfATransactionTetherdAbortedDoesNotThrow(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['tx' => 3]],
            ['recv'], ['reply', ['error' => ['code' => 'tx_aborted', 'message' => 'idle too long', 'retry' => true]]],
        ]]);
        $tx = $this->client($server)->begin();
        $tx->rollback();
        self::assertFalse($tx->isOpen());
        self::assertSame(['begin', 'rollback'], array_column(self::maps($server), 'op'));
    }

    /**
     * A rollback that tetherd answers with an error (here unknown_tx) leaves the socket sound: close() carries on
     * and never drops the shared persistent socket, which holds another Client's transaction.
     */
    public function testCloseKeepsTheSharedSocketWhenARollbackAnswersAnError(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['tx' => 3]],
            ['recv'], ['reply', ['tx' => 4]],
            ['recv'], ['reply', ['error' => ['code' => 'unknown_tx', 'message' => 'no transaction 3', 'retry' => false]]],
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['recv'], ['reply', []],
        ]]);
        $mine = $this->client($server);
        $other = $this->client($server);
        $myTx = $mine->begin();
        $otherTx = $other->begin();

        $mine->close();

        self::assertFalse($myTx->isOpen());
        self::assertTrue($otherTx->isOpen(), "the other client's transaction was lost with the socket");
        self::assertSame(1, $otherTx->execute('UPDATE t SET a = 1')->affectedRows);
        $otherTx->commit();
        self::assertSame(1, $server->count('accept'));
        self::assertSame(['begin', 'begin', 'rollback', 'exec', 'commit'], array_column(self::maps($server), 'op'));
    }

    /**
     * The escaping mode is kept once per socket and backend: a second Client on the socket needs no round trip,
     * and a statement setting sql_mode sent by either makes both read it again.
     */
    public function testNoBackslashEscapesIsSharedPerSocketAndFollowsAnyClientsSqlModeChange(): void
    {
        $readMode = static fn (string $mode): array => [
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ['recv'], ['reply', ['columns' => ['sql_mode'], 'rows' => [[$mode]]]],
        ];
        $server = $this->serve([[
            ...$readMode('STRICT_TRANS_TABLES'),
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ...$readMode('STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'),
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ...$readMode('NO_BACKSLASH_ESCAPES'),
        ]]);
        $first = $this->client($server, ['backend' => 'maria']);
        $second = $this->client($server, ['backend' => 'maria']);

        self::assertFalse($first->noBackslashEscapes());
        self::assertFalse($second->noBackslashEscapes(), 'the second client reads the socket\'s cache');
        self::assertCount(2, self::maps($server));

        $first->execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')");
        self::assertTrue($second->noBackslashEscapes(), "the second client's quote must follow the first's SET sql_mode");
        self::assertTrue($first->noBackslashEscapes());
        self::assertCount(5, self::maps($server));

        // Detected whichever way backslashes read: under NO_BACKSLASH_ESCAPES `'x\'` is a whole literal.
        $second->execute("SET @a = 'x\\', sql_mode = 'NO_BACKSLASH_ESCAPES'");
        self::assertTrue($first->noBackslashEscapes());
        self::assertSame(
            ['exec', 'query', 'exec', 'exec', 'query', 'exec', 'exec', 'query'],
            array_column(self::maps($server), 'op'),
        );
        self::assertSame('SET SESSION sql_mode = @@SESSION.sql_mode', self::maps($server)[0]['sql']);
        self::assertSame('maria', self::maps($server)[0]['backend']);
    }

    /** A silent reconnect (tetherd handed the socket over) loses the pinned sql_mode: the mode is read again. */
    public function testNoBackslashEscapesIsReadAgainAfterASilentReconnect(): void
    {
        $readMode = static fn (string $mode): array => [
            ['recv'], ['reply', ['affected' => 0, 'insert_id' => 0]],
            ['recv'], ['reply', ['columns' => ['sql_mode'], 'rows' => [[$mode]]]],
        ];
        $server = $this->serve([
            [...$readMode('NO_BACKSLASH_ESCAPES'), ['close_unread', 5]],
            [['recv'], ['reply', []], ...$readMode('')],
        ]);
        $client = $this->client($server);
        self::assertTrue($client->noBackslashEscapes());

        $client->ping();

        self::assertTrue($server->waitFor('reset'), 'the server did not close with the request unread: ' . $server->stderr());
        self::assertFalse($client->noBackslashEscapes(), 'the mode read on the old socket was kept');
        self::assertSame([1, 1, 2, 2, 2], array_column($server->requests(), 'conn'));
    }

    public function testTcpSendsHelloWithTheTokenFirst(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['server' => 'tetherd', 'protocol' => 1]], ['recv'], ['reply', []]]], 'tcp');
        (new Client(['tcp' => $server->address(), 'token' => 's3cret', 'timeout' => 2.0]))->ping();

        self::assertSame([['id' => 1, 'op' => 'hello', 'token' => 's3cret'], ['id' => 2, 'op' => 'ping']], self::maps($server));
    }

    public function testTcpUnauthorizedHelloIsServerException(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['error' => ['code' => 'unauthorized', 'message' => 'bad token', 'retry' => false]]], ['close'],
        ]], 'tcp');
        try {
            (new Client(['tcp' => $server->address(), 'token' => 'wrong', 'timeout' => 2.0, 'persistent' => false]))->ping();
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNAUTHORIZED, $e->getErrorCode());
        }
        self::assertSame(['hello'], array_column(self::maps($server), 'op'), 'the request itself is not sent unauthenticated');
    }

    /**
     * @dataProvider invalidOptions
     * @param array<string, mixed> $options
     */
    public function testInvalidOptionsAreRejected(array $options, string $message): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage($message);
        new Client($options);
    }

    /** @return iterable<string, array{array<string, mixed>, string}> */
    public static function invalidOptions(): iterable
    {
        yield 'unknown option' => [['sokcet' => '/tmp/x'], 'unknown option sokcet'];
        yield 'tcp without token' => [['tcp' => '127.0.0.1:7070'], 'option token is required with tcp'];
        yield 'tcp without port' => [['tcp' => '127.0.0.1', 'token' => 't'], 'option tcp: want "host:port"'];
        yield 'zero timeout' => [['timeout' => 0], 'option timeout'];
        yield 'string timeout' => [['timeout' => '5'], 'option timeout'];
        yield 'empty backend' => [['backend' => ''], 'option backend'];
        yield 'zero max frame' => [['max_frame_bytes' => 0], 'option max_frame_bytes'];
        yield 'persistent not bool' => [['persistent' => 1], 'option persistent'];
        yield 'unknown time format' => [['time_format' => 'local'], "option time_format: want 'iso' or 'sql'"];
    }

    public function testSocketDefaultsToTetherSocketEnv(): void
    {
        $server = $this->serve([[['recv'], ['reply', []]]]);
        $previous = getenv('TETHER_SOCKET');
        putenv('TETHER_SOCKET=' . $server->address());
        try {
            (new Client(['timeout' => 2.0]))->ping();
        } finally {
            putenv($previous === false ? 'TETHER_SOCKET' : 'TETHER_SOCKET=' . $previous);
        }
        self::assertCount(1, $server->requests());
    }

    public function testUnreachableDaemonIsCommunicationExceptionNotUnknownOutcome(): void
    {
        $client = new Client(['socket' => sys_get_temp_dir() . '/tether-no-such-socket-' . bin2hex(random_bytes(4))]);
        try {
            $client->ping();
            self::fail('no exception');
        } catch (CommunicationException $e) {
            self::assertNotInstanceOf(UnknownOutcomeException::class, $e);
            self::assertStringContainsString('not sent', $e->getMessage());
            self::assertTrue($e->shouldResetConnection());
        }
    }
}
