<?php

declare(strict_types=1);

namespace Tether\Tests\Support;

use PHPUnit\Framework\TestCase;
use Tether\Client;

/**
 * FakeServerTestCase starts scripted fake tetherd servers (see FakeServer) and stops them after each test.
 */
abstract class FakeServerTestCase extends TestCase
{
    /** @var list<FakeServer> */
    private array $servers = [];

    /**
     * serve starts a fake server running one script per accepted connection.
     *
     * @param list<list<array<mixed>>> $connections
     */
    protected function serve(array $connections, string $listen = 'unix'): FakeServer
    {
        return $this->servers[] = FakeServer::start($connections, $listen);
    }

    /**
     * client returns a Client for $server: persistent, as in production, with a short timeout.
     *
     * @param array<string, mixed> $options
     */
    protected function client(FakeServer $server, array $options = []): Client
    {
        return new Client($options + ['socket' => $server->address(), 'timeout' => 2.0]);
    }

    /**
     * maps returns the request maps $server received, in order.
     *
     * @return list<mixed>
     */
    protected static function maps(FakeServer $server): array
    {
        return array_column($server->requests(), 'map');
    }

    protected function tearDown(): void
    {
        foreach ($this->servers as $server) {
            $server->stop();
        }
        $this->servers = [];
    }
}
