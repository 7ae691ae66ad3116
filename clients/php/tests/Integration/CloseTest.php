<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use Tether\Client;

/**
 * CloseTest: Client::close() ends the client's transactions at once: another session takes the row the closed one
 * had locked without waiting (its lock wait is 2 s, so a lock still held fails it), whether the socket is the
 * worker's persistent one (kept, shared) or the client's own (closed).
 */
final class CloseTest extends IntegrationTestCase
{
    /** @return iterable<string, array{string, string, bool}> */
    public static function lockingBackends(): iterable
    {
        foreach (self::backends() as $label => [$name, $type]) {
            if ($type === 'mysql' || $type === 'postgres') {
                yield "$label, persistent" => [$name, $type, true];
                yield "$label, own socket" => [$name, $type, false];
            }
        }
    }

    /** @dataProvider lockingBackends */
    public function testCloseRollsBackAndFreesTheLocksAtOnce(string $backend, string $type, bool $persistent): void
    {
        $table = $this->table($backend, $type);
        $this->client->execute(self::sql($type, "INSERT INTO $table (name, i) VALUES ('row', 10)"), [], $backend);
        $id = $this->client->queryOne("SELECT MAX(id) AS id FROM $table", [], $backend)['id'];

        $a = new Client(['socket' => (string) getenv('TETHER_SOCKET'), 'persistent' => $persistent, 'timeout' => 10.0]);
        $tx = $a->begin($backend);
        self::assertSame(1, $tx->execute(self::sql($type, "UPDATE $table SET i = i + 1 WHERE id = ?"), [$id])->affectedRows);
        $a->close();
        self::assertFalse($tx->isOpen());

        // Session B: another client (its own socket), with a 2 s lock wait.
        $b = new Client(['socket' => (string) getenv('TETHER_SOCKET'), 'persistent' => false, 'timeout' => 10.0]);
        $txB = $b->begin($backend);
        $txB->execute($type === 'mysql' ? 'SET SESSION innodb_lock_wait_timeout = 2' : "SET LOCAL lock_timeout = '2s'");
        $t0 = microtime(true);
        self::assertSame(1, $txB->execute(self::sql($type, "UPDATE $table SET i = i + 100 WHERE id = ?"), [$id])->affectedRows, 'the row lock was released by close()');
        self::assertLessThan(1.5, microtime(true) - $t0, 'no lock wait');
        $txB->commit();
        self::assertSame(110, (int) $b->queryOne(self::sql($type, "SELECT i FROM $table WHERE id = ?"), [$id], $backend)['i'], 'the closed client\'s transaction was rolled back');
        $b->close();
        $a->ping(); // usable again
    }

    /** Non-persistent clients opened, used in a transaction and closed, over and over: no socket left open. */
    public function testOpenCloseCyclesLeakNoSocket(): void
    {
        $count = static fn (): int => \count(\array_filter(
            \scandir('/proc/self/fd') ?: [],
            static fn (string $fd): bool => \str_starts_with((string) @\readlink("/proc/self/fd/$fd"), 'socket:'),
        ));
        $backend = self::backendNames()[0];
        $before = $count();
        for ($i = 0; $i < 50; $i++) {
            $client = new Client(['socket' => (string) getenv('TETHER_SOCKET'), 'persistent' => false]);
            $tx = $client->begin($backend);
            $tx->query('SELECT 1');
            $client->close();
        }
        self::assertSame($before, $count(), '50 clients closed in a transaction leave no socket open');
    }
}
