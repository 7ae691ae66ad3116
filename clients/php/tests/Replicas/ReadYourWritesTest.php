<?php

declare(strict_types=1);

namespace Tether\Tests\Replicas;

use PHPUnit\Framework\TestCase;
use Tether\Client;
use Tether\Tests\Support\ReplicaAdmin;
use Tether\Transaction;

/**
 * ReadYourWritesTest runs the client's read/write-split switches against a real tetherd whose backends have replicas
 * (scripts/php-replicas-test.sh: env TETHER_SOCKET, and TETHER_TEST_REPLICA_BACKENDS "rmaria=mysql,rpg=postgres"),
 * with each replica made 2 s late (MASTER_DELAY, recovery_min_apply_delay). Each PHP "request" is a Client on a
 * socket of its own (persistent off), as another php-fpm worker or web host would be:
 *  - a writer's causalToken() handed to a new client makes it read the write (0 stale reads);
 *  - a new client without the token reads the late replica: the write is missing (the stale reads the token
 *    prevents; without any, the test could not tell);
 *  - a read with primary: true sees the write at once.
 */
final class ReadYourWritesTest extends TestCase
{
    private const PAIRS = 20;
    private const DELAY_SECONDS = 2;

    private ?ReplicaAdmin $admin = null;
    private ?string $table = null;
    private ?string $backend = null;

    /** @return iterable<string, array{string, string}> */
    public static function backends(): iterable
    {
        $spec = \getenv('TETHER_TEST_REPLICA_BACKENDS') ?: '';
        foreach (\array_filter(\explode(',', $spec)) as $pair) {
            [$name, $type] = \explode('=', $pair, 2) + [1 => ''];
            yield $name => [$name, $type];
        }
        if ($spec === '') {
            yield 'TETHER_TEST_REPLICA_BACKENDS unset' => ['', ''];
        }
    }

    /** @dataProvider backends */
    public function testTokenCarriesWritesAcrossClients(string $backend, string $type): void
    {
        $this->prepare($backend, $type);
        $table = $this->table;
        $param = $type === 'postgres' ? '$1' : '?';
        $insert = $type === 'postgres' ? "INSERT INTO $table (id, v) VALUES ($1, $2)" : "INSERT INTO $table (id, v) VALUES (?, ?)";
        $read = "SELECT v FROM $table WHERE id = $param";

        $staleWith = $staleWithout = $stalePrimary = 0;
        $tokens = [];
        for ($i = 1; $i <= self::PAIRS; $i++) {
            $id = 1000 + $i;
            // Request 1: writes (a plain exec, or a committed transaction every other time) and keeps the token.
            $writer = self::newClient($backend);
            if ($i % 2 === 0) {
                $writer->execute($insert, [$id, $i]);
            } else {
                $writer->transaction(static fn (Transaction $tx) => $tx->execute($insert, [$id, $i]));
            }
            $token = $writer->causalToken();
            $writer->close();
            self::assertNotSame('', $token, 'a write on a replicated backend gives a token');
            $tokens[] = $token;

            // Request 2, elsewhere, with the token.
            $with = self::newClient($backend, $token);
            $staleWith += $with->queryOne($read, [$id]) === null ? 1 : 0;
            $with->close();

            // Request 2' without it: the late replica answers.
            $without = self::newClient($backend);
            $staleWithout += $without->queryOne($read, [$id]) === null ? 1 : 0;
            $without->close();

            // And a read that asks for the primary.
            $primary = self::newClient($backend);
            $stalePrimary += $primary->queryOne($read, [$id], primary: true) === null ? 1 : 0;
            $primary->close();
        }

        $summary = \sprintf('%s: %d pairs, stale reads with the token %d, without %d, with primary: true %d', $backend, self::PAIRS, $staleWith, $staleWithout, $stalePrimary);
        self::assertSame(0, $staleWith, $summary);
        self::assertSame(0, $stalePrimary, $summary);
        self::assertGreaterThan(0, $staleWithout, "$summary: without the token the replica must be seen late, else this test proves nothing");
        self::assertCount(self::PAIRS, \array_unique($tokens), 'each write moves the position');
    }

    /** @dataProvider backends */
    public function testTokenIsHandedOnByAClientThatOnlyRead(string $backend, string $type): void
    {
        $this->prepare($backend, $type);
        $table = $this->table;
        $param = $type === 'postgres' ? '$1' : '?';
        $writer = self::newClient($backend);
        $writer->execute($type === 'postgres' ? "INSERT INTO $table (id, v) VALUES (7, 7)" : "INSERT INTO $table (id, v) VALUES (7, 7)");
        $token = $writer->causalToken();
        $writer->close();

        // Request 2 only reads, and stores the token it hands on; request 3 reads with that.
        $reader = self::newClient($backend, $token);
        self::assertNotNull($reader->queryOne("SELECT v FROM $table WHERE id = $param", [7]));
        $next = $reader->causalToken();
        $reader->close();
        self::assertNotSame('', $next);

        $third = self::newClient($backend, $next);
        self::assertSame(['v' => 7], $third->queryOne("SELECT v FROM $table WHERE id = $param", [7]));
        $third->close();
    }

    protected function tearDown(): void
    {
        if ($this->admin !== null) {
            $this->admin->delay(0);
            $this->admin = null;
        }
        if ($this->table !== null) {
            $client = self::newClient($this->backend);
            $client->execute("DROP TABLE IF EXISTS {$this->table}");
            $client->close();
            $this->table = null;
        }
    }

    /**
     * prepare creates the test's table, waits until the replica has it, makes the replica late, and waits until a
     * client without a token reads the late replica (the monitor may have taken it out of reads while its
     * replication restarted), and keeps doing so: an event, not a sleep.
     */
    private function prepare(string $backend, string $type): void
    {
        $socket = \getenv('TETHER_SOCKET');
        self::assertNotFalse($socket, 'TETHER_SOCKET is not set: scripts/php-replicas-test.sh starts the tetherd these tests need');
        self::assertContains($type, ['mysql', 'postgres'], "backend $backend: want type mysql or postgres (TETHER_TEST_REPLICA_BACKENDS)");
        $this->backend = $backend;
        $this->table = $table = 'ryw_' . \bin2hex(\random_bytes(4));
        $client = self::newClient($backend);
        $client->execute("CREATE TABLE $table (id INT PRIMARY KEY, v INT NOT NULL)");
        $client->close();
        $this->admin = new ReplicaAdmin($type);
        $this->admin->waitCaughtUp();
        self::assertTrue($this->admin->replicaHasTable($table));
        $this->admin->delay(self::DELAY_SECONDS);

        $insert = $type === 'postgres' ? "INSERT INTO $table (id, v) VALUES ($1, 0)" : "INSERT INTO $table (id, v) VALUES (?, 0)";
        $read = $type === 'postgres' ? "SELECT v FROM $table WHERE id = $1" : "SELECT v FROM $table WHERE id = ?";
        // Stale in 4 checks in a row, 250 ms apart: more than a monitor interval (200 ms) after any probe that saw
        // the replication stopped, so the replica is not about to be taken out of reads.
        $deadline = \microtime(true) + 15;
        $streak = 0;
        for ($id = 1; \microtime(true) < $deadline; $id++) {
            $writer = self::newClient($backend);
            $writer->execute($insert, [$id]);
            $writer->close();
            $reader = self::newClient($backend);
            $stale = $reader->queryOne($read, [$id]) === null;
            $reader->close();
            $streak = $stale ? $streak + 1 : 0;
            if ($streak === 4) {
                return;
            }
            \usleep(250_000);
        }
        self::fail("$backend: no read without a token reached the late replica within 15 s (is it taken out of reads?)");
    }

    private static function newClient(?string $backend, ?string $token = null): Client
    {
        return new Client(['socket' => \getenv('TETHER_SOCKET'), 'persistent' => false, 'backend' => $backend, 'timeout' => 10.0, 'causal_token' => $token]);
    }
}
