<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use Tether\Batch\Operation;
use Tether\HttpResponse;
use Tether\Server\ServerException;
use Tether\Tests\Support\FakeServerTestCase;

/**
 * HttpTest drives Client::http() and batch http operations against the scripted fake tetherd.
 */
final class HttpTest extends FakeServerTestCase
{
    private const REPLY = [
        'status' => 201,
        'headers' => ['content-type' => ['application/json'], 'set-cookie' => ['a=1', 'b=2']],
        'body' => "{\"id\":7}\x00\xff",
    ];

    public function testHttpSendsTheRequestAndMapsTheResponse(): void
    {
        $server = $this->serve([[['recv'], ['reply', self::REPLY]]]);
        $response = $this->client($server, ['backend' => 'maria'])->http('api', 'POST', '/v1/orders?expand=items', [
            'x-request-id' => 'r-1',
            'content-type' => 'application/json',
        ], '{"sku":"A-1","qty":2}', 1500);

        self::assertInstanceOf(HttpResponse::class, $response);
        self::assertSame(201, $response->status);
        self::assertSame("{\"id\":7}\x00\xff", $response->body, 'binary-safe');
        self::assertSame(['a=1', 'b=2'], $response->headers['set-cookie']);
        self::assertSame('application/json', $response->header('Content-Type'));
        self::assertSame([
            'id' => 1, 'op' => 'http', 'backend' => 'api', 'timeout_ms' => 1500, 'method' => 'POST', 'path' => '/v1/orders?expand=items',
            'headers' => ['content-type' => 'application/json', 'x-request-id' => 'r-1'],
            'body' => '{"sku":"A-1","qty":2}',
        ], self::maps($server)[0], 'the upstream is named, never the client\'s default backend');
    }

    public function testNon2xxIsAResponseNotAnException(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['status' => 404, 'headers' => [], 'body' => 'not found']]]]);
        $response = $this->client($server)->http('api', 'GET', '/missing');

        self::assertSame(404, $response->status);
        self::assertFalse($response->isSuccessful());
        self::assertSame('not found', $response->body);
        self::assertSame(['id' => 1, 'op' => 'http', 'backend' => 'api', 'method' => 'GET', 'path' => '/missing'], self::maps($server)[0]);
    }

    public function testErrorsAreServerExceptions(): void
    {
        $server = $this->serve([[
            ['recv'], ['reply', ['error' => ['code' => 'unavailable', 'message' => 'dial tcp 127.0.0.1:1: connection refused', 'retry' => true]]],
            ['recv'], ['reply', ['error' => ['code' => 'too_large', 'message' => 'response body over 8388608 bytes', 'retry' => false]]],
            ['recv'], ['reply', ['status' => 200, 'headers' => [], 'body' => 'ok']],
        ]]);
        $client = $this->client($server);
        try {
            $client->http('api', 'GET', '/');
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNAVAILABLE, $e->getErrorCode());
            self::assertTrue($e->isRetryable(), 'refused: nothing was sent');
        }
        try {
            $client->http('api', 'GET', '/huge');
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::TOO_LARGE, $e->getErrorCode());
        }
        self::assertSame('ok', $client->http('api', 'GET', '/')->body, 'the connection stays usable');
    }

    public function testBatchHttpResultsAreResponses(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['results' => [
            self::REPLY,
            ['status' => 503, 'headers' => ['retry-after' => ['1']], 'body' => ''],
            ['error' => ['code' => 'timeout', 'message' => 'deadline exceeded', 'retry' => false]],
        ]]]]]);
        $results = $this->client($server, ['backend' => 'main'])->batch([
            'a' => Operation::http('api', 'GET', '/a'),
            'b' => Operation::http('billing', 'GET', '/b'),
            'c' => Operation::http('api', 'GET', '/slow', timeoutMs: 100),
        ]);

        self::assertInstanceOf(HttpResponse::class, $results['a']);
        self::assertSame(201, $results['a']->status);
        self::assertSame('1', $results['b']->header('Retry-After'));
        self::assertInstanceOf(ServerException::class, $results['c']);
        self::assertSame(['api', 'billing', 'api'], array_column(self::maps($server)[0]['ops'], 'backend'));
    }

    public function testMalformedHttpReplyIsUnknownOutcome(): void
    {
        $server = $this->serve([[['recv'], ['reply', ['status' => 'OK']], ['await_eof', 5]]]);
        $this->expectException(\Tether\Connection\UnknownOutcomeException::class);
        $this->expectExceptionMessage('malformed reply to http');
        $this->client($server)->http('api', 'GET', '/');
    }
}
