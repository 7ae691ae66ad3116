<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Bigtable\Mutation;
use Tether\Batch\Operation;
use Tether\Client;
use Tether\Connection\UnknownOutcomeException;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;
use Tether\Transaction;

/**
 * MalformedReplyTest pins what every Client and Transaction method that reads one reply does with a reply of the
 * wrong shape, a well-formed one and an error: one path (StreamConnection::call(), under Client::call and Transaction::call) serves them all, so each
 * method is driven through it here against the scripted fake tetherd.
 */
final class MalformedReplyTest extends FakeServerTestCase
{
    /**
     * clientCalls lists each public Client method that reads one reply, with the op its malformed-reply message
     * names, a well-formed reply and what the method returns for it.
     *
     * @return iterable<string, array{callable(Client): mixed, string, array<string, mixed>, mixed}>
     */
    public static function clientCalls(): iterable
    {
        $rows = ['columns' => ['id', 'name'], 'rows' => [[1, 'ada'], [2, 'bob']]];
        $cols = ['columns' => ['id'], 'count' => 1, 'data' => [[7]]];
        $set = [Mutation::set('f', 'q', 'v')];
        yield 'ping' => [static fn (Client $c) => $c->ping(), 'ping', [], null];
        yield 'query' => [static fn (Client $c) => $c->query('SELECT 1'), 'query', $rows, [['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => 'bob']]];
        yield 'queryOne' => [static fn (Client $c) => $c->queryOne('SELECT 1'), 'query', $rows, ['id' => 1, 'name' => 'ada']];
        yield 'queryOne no row' => [static fn (Client $c) => $c->queryOne('SELECT 1'), 'query', ['columns' => ['id'], 'rows' => []], null];
        yield 'queryNumeric' => [static fn (Client $c) => $c->queryNumeric('SELECT 1')->rows, 'query', $rows, [[1, 'ada'], [2, 'bob']]];
        yield 'queryColumns' => [static fn (Client $c) => $c->queryColumns('SELECT 1')->rows(), 'query', $cols, [['id' => 7]]];
        yield 'execute' => [static fn (Client $c) => (array) $c->execute('DELETE FROM t'), 'exec', ['affected' => 3, 'insert_id' => 9], ['affectedRows' => 3, 'lastInsertId' => 9]];
        yield 'queryPage' => [static fn (Client $c) => (array) $c->queryPage('SELECT 1', [], 10), 'query', $rows + ['cursor' => 'c'], ['rows' => [['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => 'bob']], 'cursor' => 'c']];
        yield 'get' => [static fn (Client $c) => $c->get('t', 1), 'get', $rows, ['id' => 1, 'name' => 'ada']];
        yield 'get no row' => [static fn (Client $c) => $c->get('t', 1), 'get', ['columns' => ['id'], 'rows' => []], null];
        yield 'multiGet' => [static fn (Client $c) => $c->multiGet('t', [1, 2, 3]), 'multi_get', ['columns' => ['id'], 'rows' => [[1], null, [3]]], [['id' => 1], null, ['id' => 3]]];
        yield 'scan' => [static fn (Client $c) => (array) $c->scan('t'), 'scan', $rows, ['rows' => [['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => 'bob']], 'cursor' => null]];
        yield 'scanColumns' => [static fn (Client $c) => $c->scanColumns('t')->rows(), 'scan', $cols, [['id' => 7]]];
        yield 'put' => [static fn (Client $c) => $c->put('t', ['id' => 1]), 'put', ['affected' => 1], null];
        yield 'delete' => [static fn (Client $c) => $c->delete('t', 1), 'delete', ['affected' => 1], 1];
        yield 'readRows' => [static fn (Client $c) => (array) $c->readRows('t'), 'read_rows', $rows, ['rows' => [['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => 'bob']], 'cursor' => null]];
        yield 'readRowsColumns' => [static fn (Client $c) => $c->readRowsColumns('t')->rows(), 'read_rows', $cols, [['id' => 7]]];
        yield 'mutateRow' => [static fn (Client $c) => $c->mutateRow('t', 'k', $set), 'mutate_row', ['affected' => 1], null];
        yield 'increment' => [static fn (Client $c) => $c->increment('t', 'k', 'f', 'q'), 'increment', ['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['k', 'f', 'q', 42]]], 42];
        yield 'checkAndMutate true' => [static fn (Client $c) => $c->checkAndMutate('t', 'k', 'f', 'q', 'v', $set), 'check_and_mutate', ['affected' => 1], true];
        yield 'checkAndMutate false' => [static fn (Client $c) => $c->checkAndMutate('t', 'k', 'f', 'q', 'v', $set), 'check_and_mutate', ['affected' => 0], false];
        yield 'http' => [static fn (Client $c) => $c->http('api', 'GET', '/')->status, 'http', ['status' => 204, 'headers' => [], 'body' => ''], 204];
        yield 'join' => [static fn (Client $c) => $c->join(Operation::query('SELECT 1'), 'r', ['id'])->rows(), 'join', $cols, [['id' => 7]]];
        yield 'begin' => [static fn (Client $c) => $c->begin()->handle(), 'begin', ['tx' => 5], 5];
    }

    /**
     * malformedClientCalls is clientCalls() without ping, which reads no field of its reply: none is malformed.
     *
     * @return iterable<string, array{callable(Client): mixed, string, array<string, mixed>, mixed}>
     */
    public static function malformedClientCalls(): iterable
    {
        foreach (self::clientCalls() as $name => $case) {
            if ($name !== 'ping') {
                yield $name => $case;
            }
        }
    }

    /** @dataProvider malformedClientCalls */
    public function testClientMalformedReplyIsUnknownOutcomeAndDropsTheSocket(callable $call, string $op, array $reply, mixed $want): void
    {
        // A map with none of the fields any method reads ('affected' a string, so that no shape fits).
        $server = $this->serve([[['recv'], ['reply', ['affected' => 'x', 'tx' => 'x', 'status' => 'x']], ['await_eof', 5]]]);
        try {
            $call($this->client($server));
            self::fail('no exception for a malformed reply');
        } catch (UnknownOutcomeException $e) {
            self::assertSame("tetherd sent a malformed reply to $op; the request may or may not have been executed", $e->getMessage());
        }
        self::assertTrue($server->waitFor('eof'), 'the socket is dropped after a malformed reply');
    }

    /** @dataProvider clientCalls */
    public function testClientWellFormedReplyIsDecoded(callable $call, string $op, array $reply, mixed $want): void
    {
        $server = $this->serve([[['recv'], ['reply', $reply + ['us' => 5]]]]);
        $client = $this->client($server);

        self::assertSame($want, $call($client));
        self::assertSame(5, $client->lastServerMicros());
    }

    /** @dataProvider clientCalls */
    public function testClientErrorReplyIsServerException(callable $call, string $op, array $reply, mixed $want): void
    {
        $server = $this->serve([[['recv'], ['reply', ['error' => ['code' => 'busy', 'message' => 'no connection came free', 'retry' => true]]]]]);
        try {
            $call($this->client($server));
            self::fail('no exception for an error reply');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BUSY, $e->getErrorCode());
            self::assertTrue($e->isRetryable());
        }
    }

    /**
     * transactionCalls lists each Transaction method that reads one reply, as clientCalls().
     *
     * @return iterable<string, array{callable(Transaction): mixed, string, array<string, mixed>, mixed}>
     */
    public static function transactionCalls(): iterable
    {
        $rows = ['columns' => ['id'], 'rows' => [[1], [2]]];
        yield 'query' => [static fn (Transaction $t) => $t->query('SELECT 1'), 'query', $rows, [['id' => 1], ['id' => 2]]];
        yield 'queryOne' => [static fn (Transaction $t) => $t->queryOne('SELECT 1'), 'query', $rows, ['id' => 1]];
        yield 'queryOne no row' => [static fn (Transaction $t) => $t->queryOne('SELECT 1'), 'query', ['columns' => ['id'], 'rows' => []], null];
        yield 'queryNumeric' => [static fn (Transaction $t) => $t->queryNumeric('SELECT 1')->rows, 'query', $rows, [[1], [2]]];
        yield 'queryColumns' => [static fn (Transaction $t) => $t->queryColumns('SELECT 1')->rows(), 'query', ['columns' => ['id'], 'count' => 1, 'data' => [[7]]], [['id' => 7]]];
        yield 'execute' => [static fn (Transaction $t) => (array) $t->execute('DELETE FROM t'), 'exec', ['affected' => 2], ['affectedRows' => 2, 'lastInsertId' => 0]];
    }

    /** @dataProvider transactionCalls */
    public function testTransactionMalformedReplyIsUnknownOutcome(callable $call, string $op, array $reply, mixed $want): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', ['affected' => 'x']], ['await_eof', 5]]]);
        $tx = $this->client($server)->begin();
        try {
            $call($tx);
            self::fail('no exception for a malformed reply');
        } catch (UnknownOutcomeException $e) {
            self::assertSame("tetherd sent a malformed reply to $op; the request may or may not have been executed", $e->getMessage());
        }
        self::assertTrue($server->waitFor('eof'), 'the socket is dropped after a malformed reply');
        self::assertFalse($tx->isOpen(), 'the transaction is lost with its socket');
    }

    /** @dataProvider transactionCalls */
    public function testTransactionWellFormedReplyIsDecoded(callable $call, string $op, array $reply, mixed $want): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', $reply], ['recv'], ['reply', ['affected' => 0]]]]);
        $tx = $this->client($server)->begin();

        self::assertSame($want, $call($tx));
        $tx->commit();
        self::assertSame(3, self::maps($server)[1]['tx'], 'the statement runs in the transaction');
    }

    /** @dataProvider transactionCalls */
    public function testTransactionAfterCommitThrowsWithoutSending(callable $call, string $op, array $reply, mixed $want): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', ['affected' => 0]]]]);
        $tx = $this->client($server)->begin();
        $tx->commit();

        $this->expectException(\Tether\Exception\LogicException::class);
        $this->expectExceptionMessage('transaction 3 is already committed');
        $call($tx);
    }
    /**
     * batchOperations lists each kind of batch operation with a well-formed result item and what the batch gives
     * for it: what the Client method of the same name returns (true for those that return nothing).
     *
     * @return iterable<string, array{Operation, array<string, mixed>, callable(mixed): mixed, mixed}>
     */
    public static function batchOperations(): iterable
    {
        $rows = ['columns' => ['id', 'name'], 'rows' => [[1, 'ada'], [2, 'bob']]];
        $cols = ['columns' => ['id'], 'count' => 1, 'data' => [[7]]];
        $same = static fn (mixed $v): mixed => $v;
        $set = [Mutation::set('f', 'q', 'v')];
        yield 'query' => [Operation::query('SELECT 1'), $rows, $same, [['id' => 1, 'name' => 'ada'], ['id' => 2, 'name' => 'bob']]];
        yield 'queryColumns' => [Operation::queryColumns('SELECT 1'), $cols, static fn ($r) => $r->rows(), [['id' => 7]]];
        yield 'execute' => [Operation::execute('DELETE FROM t'), ['affected' => 3], static fn ($r) => (array) $r, ['affectedRows' => 3, 'lastInsertId' => 0]];
        yield 'ping' => [Operation::ping(), [], $same, true];
        yield 'get' => [Operation::get('t', 1), $rows, $same, ['id' => 1, 'name' => 'ada']];
        yield 'get no row' => [Operation::get('t', 1), ['columns' => ['id'], 'rows' => []], $same, null];
        yield 'multiGet' => [Operation::multiGet('t', [1, 2]), ['columns' => ['id'], 'rows' => [null, [2]]], $same, [null, ['id' => 2]]];
        yield 'scan' => [Operation::scan('t'), $rows + ['cursor' => 'c'], static fn ($r) => [\count($r->rows), $r->cursor], [2, 'c']];
        yield 'scanColumns' => [Operation::scanColumns('t'), $cols, static fn ($r) => $r->rows(), [['id' => 7]]];
        yield 'put' => [Operation::put('t', ['id' => 1]), ['affected' => 1], $same, true];
        yield 'delete' => [Operation::delete('t', 1), ['affected' => 0], $same, 0];
        yield 'readRows' => [Operation::readRows('t'), $rows, static fn ($r) => \count($r->rows), 2];
        yield 'readRowsColumns' => [Operation::readRowsColumns('t'), $cols, static fn ($r) => $r->rows(), [['id' => 7]]];
        yield 'mutateRow' => [Operation::mutateRow('t', 'k', $set), ['affected' => 1], $same, true];
        yield 'increment' => [Operation::increment('t', 'k', 'f', 'q'), ['columns' => ['key', 'family', 'qualifier', 'value'], 'rows' => [['k', 'f', 'q', 42]]], $same, 42];
        yield 'checkAndMutate true' => [Operation::checkAndMutate('t', 'k', 'f', 'q', 'v', $set), ['affected' => 1], $same, true];
        yield 'checkAndMutate false' => [Operation::checkAndMutate('t', 'k', 'f', 'q', 'v', $set), ['affected' => 0], $same, false];
        yield 'http' => [Operation::http('api', 'GET', '/'), ['status' => 204], static fn ($r) => $r->status, 204];
        yield 'join' => [Operation::join(Operation::query('SELECT 1'), 'r', ['id']), $cols, static fn ($r) => $r->rows(), [['id' => 7]]];
    }

    /** @dataProvider batchOperations */
    public function testBatchResultIsDecodedAsTheClientMethodDecodes(Operation $op, array $item, callable $view, mixed $want): void
    {
        $error = ['error' => ['code' => 'busy', 'message' => 'no connection came free', 'retry' => true]];
        $server = $this->serve([[['recv'], ['reply', ['results' => [$item, $error]]]]]);

        $results = $this->client($server)->batch(['a' => $op, 'b' => $op]);
        self::assertSame($want, $view($results['a']));
        self::assertInstanceOf(ServerException::class, $results['b'], 'a failed operation is its exception, returned');
        self::assertSame(ServerException::BUSY, $results['b']->getErrorCode());
    }

    /** @dataProvider batchOperations */
    public function testBatchMalformedResultIsUnknownOutcome(Operation $op, array $item, callable $view, mixed $want): void
    {
        // ping reads nothing of its result: only a result that is not a map is malformed for it
        $bad = $op->op === 'ping' ? 'x' : ['affected' => 'x', 'status' => 'x'];
        $server = $this->serve([[['recv'], ['reply', ['results' => [$bad]]], ['await_eof', 5]]]);
        try {
            $this->client($server)->batch([$op]);
            self::fail('no exception for a malformed batch result');
        } catch (UnknownOutcomeException $e) {
            self::assertSame('tetherd sent a malformed reply to batch; the request may or may not have been executed', $e->getMessage());
        }
        self::assertTrue($server->waitFor('eof'), 'the socket is dropped after a malformed reply');
    }
}
