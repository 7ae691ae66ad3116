<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Server\ServerException;

/**
 * TlsTest reaches tetherd's TCP listener over TLS with a client certificate, as PHP on another host of a pod or VM
 * would: env TETHER_TEST_TLS_ADDR (host:port), TETHER_TEST_TLS_TOKEN and TETHER_TEST_TLS_DIR (ca.pem, client.pem,
 * client-key.pem, from internal/testcert), which scripts/test.sh sets.
 */
final class TlsTest extends TestCase
{
    private string $addr;
    private string $token;
    private string $dir;

    protected function setUp(): void
    {
        foreach (['TETHER_TEST_TLS_ADDR', 'TETHER_TEST_TLS_TOKEN', 'TETHER_TEST_TLS_DIR'] as $name) {
            if ((getenv($name) ?: '') === '') {
                self::fail("env $name is required (scripts/test.sh sets it)");
            }
        }
        $this->addr = getenv('TETHER_TEST_TLS_ADDR');
        $this->token = getenv('TETHER_TEST_TLS_TOKEN');
        $this->dir = getenv('TETHER_TEST_TLS_DIR');
    }

    /** @param array<string, mixed> $tls */
    private function client(array $tls, ?string $token = null): Client
    {
        return new Client(['tcp' => $this->addr, 'token' => $token ?? $this->token, 'tls' => $tls, 'persistent' => false, 'timeout' => 5]);
    }

    /** @return array<string, mixed> */
    private function withCertificate(): array
    {
        return ['cafile' => "$this->dir/ca.pem", 'local_cert' => "$this->dir/client.pem", 'local_pk' => "$this->dir/client-key.pem"];
    }

    public function testQueriesOverTlsWithAClientCertificate(): void
    {
        $client = $this->client($this->withCertificate());
        $row = $client->queryOne('SELECT ? AS echo, length(?) AS n', ['over tls', str_repeat('x', 200000)], 'main');

        self::assertSame(['echo' => 'over tls', 'n' => 200000], $row);
        self::assertIsInt($client->lastServerMicros());
    }

    public function testClientWithoutACertificateIsRefused(): void
    {
        $client = $this->client(['cafile' => "$this->dir/ca.pem"]);
        $this->expectException(CommunicationException::class);
        $client->ping();
    }

    public function testServerNotSignedByTheTrustedCaIsRefused(): void
    {
        // The client's own certificate as the only trusted CA: tetherd's certificate does not chain to it.
        $client = $this->client(['cafile' => "$this->dir/client.pem"] + $this->withCertificate());
        $this->expectException(CommunicationException::class);
        $client->ping();
    }

    public function testWrongTokenIsUnauthorized(): void
    {
        $client = $this->client($this->withCertificate(), 'not-the-token');
        try {
            $client->ping();
            self::fail('no exception');
        } catch (ServerException $e) {
            self::assertSame('unauthorized', $e->getErrorCode());
        }
    }
}
