<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestSuite;
use Tether\Batch\Operation;
use Tether\HttpResponse;
use Tether\Server\ServerException;

/**
 * HttpTest calls an HTTP upstream through tetherd: env TETHER_TEST_HTTP_UPSTREAM names a backend of type http
 * whose base URL is internal/testupstream (scripts/test.sh starts it; `api`, with max_conns 4, a default header
 * x-tether-test: php and max_response_bytes 1 MiB), and TETHER_TEST_HTTP_DOWN one that refuses connections
 * (`downapi`). Without TETHER_TEST_HTTP_UPSTREAM this class has no tests at all (see suite()).
 *
 * testupstream's /echo answers with the request body as its body, the method in x-echo-method, the request URI in
 * x-echo-uri and each request header X in x-echo-header-X.
 */
final class HttpTest extends IntegrationTestCase
{
    private string $upstream = '';

    public static function suite(string $className): TestSuite
    {
        if ((string) getenv('TETHER_TEST_HTTP_UPSTREAM') !== '') {
            return new TestSuite(new \ReflectionClass($className));
        }
        $suite = new TestSuite();
        $suite->setName($className);

        return $suite;
    }

    protected function setUp(): void
    {
        parent::setUp();
        $this->upstream = (string) getenv('TETHER_TEST_HTTP_UPSTREAM');
    }

    public function testRequestReachesTheUpstreamAsSent(): void
    {
        $body = "{\"sku\":\"A-1\"}\x00\xff" . implode('', array_map('chr', range(0, 255)));
        $response = $this->client->http($this->upstream, 'POST', '/echo?expand=items&x=%2F', [
            'content-type' => 'application/json',
            'x-request-id' => 'r-1',
        ], $body, 5000);

        self::assertInstanceOf(HttpResponse::class, $response);
        self::assertSame(200, $response->status);
        self::assertSame($body, $response->body, 'the body goes and comes back byte for byte');
        self::assertSame('POST', $response->header('X-Echo-Method'));
        self::assertSame('/echo?expand=items&x=%2F', $response->header('x-echo-uri'));
        self::assertSame('r-1', $response->header('x-echo-header-x-request-id'));
        self::assertSame('application/json', $response->header('x-echo-header-content-type'));
        self::assertSame('php', $response->header('x-echo-header-x-tether-test'), 'the upstream\'s default headers are added');
        self::assertSame('application/octet-stream', $response->header('content-type'));
        foreach ($response->headers as $name => $values) {
            self::assertSame(strtolower($name), $name, 'header names are lower case');
            self::assertTrue(array_is_list($values), "the values of $name are a list");
        }
    }

    public function testRequestHeadersOverrideTheDefaults(): void
    {
        $response = $this->client->http($this->upstream, 'GET', '/echo', ['X-Tether-Test' => 'mine']);
        self::assertSame('mine', $response->header('x-echo-header-x-tether-test'));
        self::assertSame('GET', $response->header('x-echo-method'));
        self::assertSame('', $response->body);
    }

    public function testEveryStatusIsAResponse(): void
    {
        foreach ([201, 204, 404, 500, 503] as $status) {
            $response = $this->client->http($this->upstream, 'GET', "/status/$status");
            self::assertSame($status, $response->status);
            self::assertSame($status === 204 ? '' : "status $status", $response->body);
        }
    }

    public function testDeadlineIsATimeout(): void
    {
        $start = microtime(true);
        try {
            $this->client->http($this->upstream, 'GET', '/sleep?ms=3000', timeoutMs: 300);
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame(ServerException::TIMEOUT, $e->getErrorCode(), $e->getMessage());
        }
        self::assertLessThan(2.5, microtime(true) - $start);
        self::assertSame(200, $this->client->http($this->upstream, 'GET', '/status/200')->status, 'the connection stays usable');
    }

    public function testErrorsOfAnUpstream(): void
    {
        try {
            $this->client->http($this->upstream, 'GET', '/huge?bytes=' . (2 << 20));
            self::fail('no exception for a body over max_response_bytes');
        } catch (ServerException $e) {
            self::assertSame(ServerException::TOO_LARGE, $e->getErrorCode(), $e->getMessage());
        }
        try {
            $this->client->http($this->upstream, 'GET', '/reset');
            self::fail('no exception for a reset connection');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BACKEND_ERROR, $e->getErrorCode(), $e->getMessage());
        }
        $down = (string) getenv('TETHER_TEST_HTTP_DOWN');
        if ($down !== '') {
            try {
                $this->client->http($down, 'POST', '/orders', [], 'x');
                self::fail('no exception for an upstream that refuses connections');
            } catch (ServerException $e) {
                self::assertSame(ServerException::UNAVAILABLE, $e->getErrorCode(), $e->getMessage());
                self::assertTrue($e->isRetryable(), 'refused: nothing was sent');
            }
        }
        try {
            $this->client->http('tether_no_such_upstream', 'GET', '/');
            self::fail('no exception for an unknown upstream');
        } catch (ServerException $e) {
            self::assertSame(ServerException::UNKNOWN_BACKEND, $e->getErrorCode(), $e->getMessage());
        }
    }

    public function testAHostCannotBeNamed(): void
    {
        foreach (['http://example.com/', '//example.com/x', 'echo', "/echo\r\nX-Injected: 1"] as $path) {
            try {
                $this->client->http($this->upstream, 'GET', $path);
                self::fail('no exception for path ' . json_encode($path));
            } catch (ServerException $e) {
                self::assertSame(ServerException::BAD_REQUEST, $e->getErrorCode(), json_encode($path) . ': ' . $e->getMessage());
            }
        }
        try {
            $this->client->http($this->upstream, 'GET', '/echo', ['Host' => 'example.com']);
            self::fail('no exception for a Host header');
        } catch (ServerException $e) {
            self::assertSame(ServerException::BAD_REQUEST, $e->getErrorCode(), $e->getMessage());
        }
    }

    public function testPendingBatchRunsTheCallsConcurrentlyWhileThePageWorks(): void
    {
        $calls = 4; // the upstream's max_conns
        $ms = 400;
        $ops = [];
        for ($i = 0; $i < $calls; $i++) {
            $ops["call$i"] = Operation::http($this->upstream, 'GET', "/sleep?ms=$ms&i=$i");
        }
        $ops['missing'] = Operation::http($this->upstream, 'GET', '/status/404');

        $start = microtime(true);
        $pending = $this->client->sendBatch($ops, 5000);
        $sent = microtime(true) - $start;
        $this->client->ping(); // the page's own work, on the same socket, while the calls run
        $results = $pending->wait();
        $elapsed = microtime(true) - $start;

        self::assertLessThan($ms / 1000 / 2, $sent, 'sendBatch does not wait for the upstream');
        for ($i = 0; $i < $calls; $i++) {
            self::assertInstanceOf(HttpResponse::class, $results["call$i"]);
            self::assertSame("slept $ms", $results["call$i"]->body);
        }
        self::assertSame(404, $results['missing']->status);
        self::assertLessThan($calls * $ms / 1000 * 0.75, $elapsed, sprintf('%d calls of %d ms took %.2f s: not concurrent', $calls, $ms, $elapsed));
    }

    public function testTwoPendingBatchesCollectedInReverseOrder(): void
    {
        $slow = $this->client->sendBatch(['slow' => Operation::http($this->upstream, 'GET', '/sleep?ms=300')]);
        $fast = $this->client->sendBatch(['fast' => Operation::http($this->upstream, 'GET', '/sleep?ms=1')]);

        self::assertSame('slept 1', $fast->wait()['fast']->body);
        self::assertSame('slept 300', $slow->wait()['slow']->body);
        self::assertSame('slept 300', $slow->wait()['slow']->body, 'waiting again gives the same results');
    }
}
