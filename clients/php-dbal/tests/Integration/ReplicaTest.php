<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Doctrine\DBAL\Exception\DriverException;
use Tether\Client;
use Tether\DBAL\Primary;
use Tether\DBAL\Tests\Support\IntegrationTestCase;
use Tether\Tests\Support\ReplicaAdmin;

require_once __DIR__ . '/../../../php/tests/Support/ReplicaAdmin.php';

/**
 * ReplicaTest runs the driver over a tetherd backend with replicas (env TETHER_IT_RMYSQL_BACKEND: the MariaDB pair;
 * scripts/lib/integration.sh with TETHER_IT_REPLICAS=1): the switches that stand for PrimaryReadReplicaConnection's.
 * Where a read ran is told by a marker row that differs on the primary and the replica
 * (ReplicaAdmin::markHosts()). Each DBAL connection has a socket of its own (persistent off, the default), so that
 * tetherd's read-your-writes for a connection's own writes plays no part.
 *
 * @group replicas
 */
final class ReplicaTest extends IntegrationTestCase
{
    private const MARKER = 'php_whoami';

    private ReplicaAdmin $admin;
    private bool $delayed = false;

    protected function setUp(): void
    {
        $this->admin = new ReplicaAdmin('mysql');
        $this->admin->markHosts(self::MARKER);
        $this->waitUntilReplicaServes();
    }

    protected function tearDown(): void
    {
        parent::tearDown();
        if ($this->delayed) {
            $this->admin->delay(0);
        }
    }

    public function testPrimarySwitches(): void
    {
        $conn = $this->replicated();
        self::assertSame('replica', $this->who($conn), 'a plain read');
        self::assertFalse(Primary::isForced($conn));
        self::assertSame('primary', Primary::with($conn, fn () => $this->who($conn)), 'Primary::with()');
        self::assertFalse(Primary::isForced($conn), 'with() restores');

        Primary::ensure($conn);
        self::assertTrue(Primary::isForced($conn));
        self::assertSame('primary', $this->who($conn), 'Primary::ensure(): ensureConnectedToPrimary()');
        Primary::release($conn);

        $other = $this->replicated(['tether_primary' => true]);
        self::assertSame('primary', $this->who($other), 'tether_primary: a write connection');

        $tx = $this->replicated();
        $tx->beginTransaction();
        self::assertSame('primary', $this->who($tx), 'a transaction reads the primary');
        $tx->rollBack();

        self::assertSame('replica', $this->who($this->replicated()), 'a new connection reads the replica again');
    }

    public function testCausalTokenParameter(): void
    {
        $table = 'causal_' . \bin2hex(\random_bytes(4));
        $setup = $this->replicated();
        $setup->executeStatement("CREATE TABLE $table (id INT PRIMARY KEY, v INT NOT NULL)");
        try {
            $this->admin->waitCaughtUp();
            $this->admin->delay(2);
            $this->delayed = true;
            $this->waitUntilReplicaServes();

            $writer = $this->replicated();
            $writer->insert($table, ['id' => 1, 'v' => 42]);
            $client = $writer->getNativeConnection();
            self::assertInstanceOf(Client::class, $client);
            $token = $client->causalToken();
            self::assertNotSame('', $token);

            $with = $this->replicated(['tether_causal_token' => $token]);
            self::assertSame(42, $with->fetchOne("SELECT v FROM $table WHERE id = 1"));
            $without = $this->replicated();
            self::assertFalse($without->fetchOne("SELECT v FROM $table WHERE id = 1"), 'without the token the replica is behind: else this test proves nothing');
        } finally {
            $this->replicated()->executeStatement("DROP TABLE IF EXISTS $table");
        }
    }

    public function testBadCausalTokenIsRefused(): void
    {
        $this->expectException(DriverException::class);
        $this->expectExceptionMessage('causal_token');
        $this->replicated(['tether_causal_token' => 'not a token'])->fetchOne('SELECT 1');
    }

    /** @param array<string, mixed> $params */
    private function replicated(array $params = []): Connection
    {
        return $this->connect('mysql', $params + ['tether_backend' => self::env('TETHER_IT_RMYSQL_BACKEND')]);
    }

    private function who(Connection $conn): string
    {
        return (string) $conn->fetchOne('SELECT who FROM ' . self::MARKER);
    }

    /** waitUntilReplicaServes polls, on new connections, until a plain read runs on the replica (at most 15 s). */
    private function waitUntilReplicaServes(): void
    {
        $deadline = \microtime(true) + 15;
        $streak = 0;
        do {
            $conn = $this->replicated();
            $who = $this->who($conn);
            $conn->close();
            // On the replica 3 times in a row, 250 ms apart: past any probe that saw its replication restart.
            $streak = $who === 'replica' ? $streak + 1 : 0;
            if ($streak === 3) {
                return;
            }
            \usleep(250_000);
        } while (\microtime(true) < $deadline);
        self::fail('no read reached the replica within 15 s');
    }
}
