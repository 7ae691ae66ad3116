<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Batch\Operation;
use Tether\Client;
use Tether\Exception\InvalidArgumentException;
use Tether\Exception\LogicException;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * CausalTest drives the read/write split's client side against a scripted fake tetherd: `primary` on statements,
 * causalToken() (which backends it asks, how it encodes them) and the causal_token option (causal_after before the
 * first call, once per socket).
 */
final class CausalTest extends FakeServerTestCase
{
    public function testPrimaryIsSentBetweenTimeFormatAndCacheTtl(): void
    {
        $rows = ['columns' => ['x'], 'rows' => [[1]]];
        $server = $this->serve([[['recv'], ['reply', $rows], ['recv'], ['reply', $rows], ['recv'], ['reply', $rows], ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]], ['recv'], ['reply', $rows]]]);
        $client = $this->client($server, ['time_format' => 'sql']);
        $client->query('SELECT 1', [], 'maria', null, 500, primary: true);
        $client->queryOne('SELECT 1', [], 'maria', primary: true);
        $client->queryNumeric('SELECT 1', backend: 'maria', primary: true);
        $client->execute('UPDATE t SET a = 1', [], 'maria', primary: true);
        $client->query('SELECT 1', [], 'maria');

        $maps = self::maps($server);
        self::assertSame(['id' => 1, 'op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT 1', 'time_format' => 'sql', 'primary' => true, 'cache_ttl_ms' => 500], $maps[0]);
        self::assertSame(['id' => 2, 'op' => 'query', 'backend' => 'maria', 'sql' => 'SELECT 1', 'time_format' => 'sql', 'primary' => true], $maps[1]);
        self::assertTrue($maps[2]['primary']);
        self::assertSame(['id' => 4, 'op' => 'exec', 'backend' => 'maria', 'sql' => 'UPDATE t SET a = 1', 'primary' => true], $maps[3]);
        self::assertArrayNotHasKey('primary', $maps[4], 'absent unless asked for');
    }

    public function testBatchOperationsCarryPrimary(): void
    {
        self::assertSame(['op' => 'query', 'backend' => 'pg', 'sql' => 'SELECT 1', 'primary' => true], Operation::query('SELECT 1', [], 'pg', primary: true)->request);
        self::assertTrue(Operation::queryColumns('SELECT 1', primary: true)->request['primary']);
        self::assertTrue(Operation::execute('DELETE FROM t', primary: true)->request['primary']);
        self::assertArrayNotHasKey('primary', Operation::query('SELECT 1')->request);
    }

    public function testNoWriteNoTokenNoRoundTrip(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['x'], 'rows' => []]]]]);
        $client = $this->client($server);
        $client->query('SELECT 1', [], 'maria');

        self::assertSame('', $client->causalToken());
        self::assertCount(1, self::maps($server), 'a client that wrote nothing asks nothing');
    }

    public function testTokenCoversEveryBackendWrittenTo(): void
    {
        $exec = ['affected' => 1, 'insert_id' => 0];
        $server = $this->serve([[
            ['recv'], ['reply', $exec],                                       // 1 exec maria
            ['recv'], ['reply', ['columns' => ['x'], 'rows' => []]],          // 2 primary query on pg
            ['recv'], ['reply', ['results' => [$exec]]],                      // 3 batch exec on lite (the default)
            ['recv'], ['reply', ['tx' => 9]],                                 // 4 begin cass
            ['recv'], ['reply', []],                                          // 5 commit
            ['recv'], ['recv'], ['recv'], ['recv'],                           // 6..9 causal_token x4, pipelined
            ['reply', ['id' => 6, 'position' => '0-1-42']],
            ['reply', ['id' => 7, 'position' => '0/3000060']],
            ['reply', ['id' => 8, 'position' => '']],
            ['reply', ['id' => 9, 'position' => '']],
        ]]);
        $client = $this->client($server);
        $client->execute('UPDATE t SET a = 1', [], 'maria');
        $client->query('SELECT 1', [], 'pg', primary: true);
        $client->batch([Operation::execute('DELETE FROM t')]);
        $client->begin('cass')->commit();
        $token = $client->causalToken();

        $maps = self::maps($server);
        self::assertSame(['id' => 6, 'op' => 'causal_token', 'backend' => 'maria'], $maps[5]);
        self::assertSame(['id' => 7, 'op' => 'causal_token', 'backend' => 'pg'], $maps[6]);
        self::assertSame(['id' => 8, 'op' => 'causal_token'], $maps[7], "the default backend's: no backend key");
        self::assertSame(['id' => 9, 'op' => 'causal_token', 'backend' => 'cass'], $maps[8], 'a committed transaction is a write');
        self::assertMatchesRegularExpression('/^[A-Za-z0-9_-]+$/', $token, 'base64url, no padding: safe in a cookie');
        self::assertSame(['maria' => '0-1-42', 'pg' => '0/3000060'], json_decode(base64_decode(strtr($token, '-_', '+/')), true), 'backends whose position is empty are left out');
    }

    public function testRolledBackTransactionIsNoWrite(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['tx' => 3]], ['recv'], ['reply', []]]]);
        $client = $this->client($server);
        $client->begin('maria')->rollback();

        self::assertSame('', $client->causalToken());
        self::assertCount(2, self::maps($server));
    }

    public function testPingSendsNoCausalAfter(): void
    {
        $token = self::token(['maria' => '0-1-42', '' => '0/16B3748']);
        $server = $this->serve([[['recv'], ['reply', []]]]);
        $client = $this->client($server, ['causal_token' => $token]);
        $client->ping();
        self::assertSame([['id' => 1, 'op' => 'ping']], self::maps($server), 'a ping touches no backend: no causal_after');
    }

    public function testCausalAfterIsSentBeforeTheFirstStatement(): void
    {
        $token = self::token(['maria' => '0-1-42', '' => '0/16B3748']);
        $rows = ['columns' => ['x'], 'rows' => [[1]]];
        $server = $this->serve([[
            ['recv'], ['recv'],
            ['reply', ['id' => 1]], ['reply', ['id' => 2]],
            ['recv'], ['reply', $rows],
            ['recv'], ['reply', $rows],
        ]]);
        $client = $this->client($server, ['causal_token' => $token]);
        self::assertSame(['x' => 1], $client->queryOne('SELECT 1', [], 'maria'));
        $client->query('SELECT 1', [], 'maria');

        $maps = self::maps($server);
        self::assertSame(['id' => 1, 'op' => 'causal_after', 'backend' => 'maria', 'position' => '0-1-42'], $maps[0]);
        self::assertSame(['id' => 2, 'op' => 'causal_after', 'position' => '0/16B3748'], $maps[1], "the default backend's: no backend key");
        self::assertSame('query', $maps[2]['op']);
        self::assertSame('query', $maps[3]['op'], 'once per client and socket, not per call');
        self::assertCount(4, $maps);
        self::assertSame(['' => '0/16B3748', 'maria' => '0-1-42'], self::positions($client->causalToken()), 'a client that only read hands the token on, with no round trip');
        self::assertCount(4, self::maps($server));
    }

    public function testCausalAfterErrorIsThrownAndTheStatementNotSent(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['error' => ['code' => 'unknown_backend', 'message' => 'no backend "gone"']]],
        ]]);
        $client = $this->client($server, ['causal_token' => self::token(['gone' => '0-1-1'])]);
        try {
            $client->query('SELECT 1', [], 'maria');
            self::fail('want the causal_after error');
        } catch (ServerException $e) {
            self::assertSame('unknown_backend', $e->getErrorCode());
        }
        self::assertCount(1, self::maps($server));
    }

    public function testTokenCarriesTheOptionsPositionsForBackendsNotWritten(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['id' => 1]], ['recv'], ['reply', ['id' => 2]],
            ['recv'], ['reply', ['affected' => 1, 'insert_id' => 0]],
            ['recv'], ['reply', ['position' => '0/5000000']],
        ]]);
        $client = $this->client($server, ['causal_token' => self::token(['maria' => '0-1-42', 'pg' => '0/4000000'])]);
        $client->execute('UPDATE t SET a = 1', [], 'pg');

        self::assertSame(['maria' => '0-1-42', 'pg' => '0/5000000'], self::positions($client->causalToken()));
    }

    /** @return iterable<string, array{mixed, string}> */
    public static function badTokens(): iterable
    {
        yield 'not a string' => [42, 'got a int'];
        yield 'not base64url' => ['a+b/c=', 'not base64url'];
        yield 'not JSON' => [rtrim(strtr(base64_encode('hello'), '+/', '-_'), '='), 'not a token'];
        yield 'a JSON list' => [rtrim(strtr(base64_encode('["0-1-1"]'), '+/', '-_'), '='), 'not a token'];
        yield 'an empty object' => [rtrim(strtr(base64_encode('{}'), '+/', '-_'), '='), 'not a token'];
        yield 'a position that is not a string' => [self::rawToken('{"maria":7}'), "backend 'maria'"];
        yield 'an empty position' => [self::rawToken('{"maria":""}'), "backend 'maria'"];
        yield 'a position too long' => [self::rawToken(json_encode(['pg' => str_repeat('x', 4097)])), "backend 'pg'"];
        yield 'cut' => [substr(self::token(['maria' => '0-1-42']), 0, 9), 'not'];
    }

    /** @dataProvider badTokens */
    public function testBadTokenIsRefusedNamingTheOption(mixed $token, string $why): void
    {
        try {
            new Client(['socket' => '/nonexistent/tether.sock', 'causal_token' => $token]);
            self::fail('want InvalidArgumentException');
        } catch (InvalidArgumentException $e) {
            self::assertInstanceOf(LogicException::class, $e);
            self::assertStringStartsWith('option causal_token: ', $e->getMessage());
            self::assertStringContainsString($why, $e->getMessage());
        }
    }

    public function testEmptyOrNullTokenIsNone(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['columns' => ['x'], 'rows' => []]], ['recv'], ['reply', ['columns' => ['x'], 'rows' => []]]]]);
        $this->client($server, ['causal_token' => ''])->query('SELECT 1');
        $this->client($server, ['causal_token' => null])->query('SELECT 1');

        self::assertSame(['query', 'query'], array_column(self::maps($server), 'op'));
    }

    /** @param array<string, string> $positions */
    private static function token(array $positions): string
    {
        return self::rawToken(json_encode($positions, JSON_FORCE_OBJECT));
    }

    private static function rawToken(string $json): string
    {
        return rtrim(strtr(base64_encode($json), '+/', '-_'), '=');
    }

    /** @return array<string, string> */
    private static function positions(string $token): array
    {
        return json_decode(base64_decode(strtr($token, '-_', '+/')), true);
    }
}
