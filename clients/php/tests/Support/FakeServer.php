<?php

declare(strict_types=1);

namespace Tether\Tests\Support;

/**
 * FakeServer runs fake-server.php in a child process: a scripted tetherd that tests can make reply, stall,
 * close, or send garbage, and that logs every request and connection event it sees.
 */
final class FakeServer
{
    /** @var resource|null */
    private $process = null;
    /** @var array<int, resource> */
    private array $pipes = [];
    private string $dir;
    private string $log;
    private string $address;

    /**
     * start launches a server that runs $connections[i] (a list of steps, see fake-server.php) on the i-th
     * connection it accepts. $listen is 'unix' (a fresh socket path) or 'tcp' (an ephemeral port on 127.0.0.1).
     *
     * @param list<list<array<mixed>>> $connections
     */
    public static function start(array $connections, string $listen = 'unix'): self
    {
        $server = new self();
        $server->dir = sys_get_temp_dir() . '/tether-fake-' . bin2hex(random_bytes(6));
        mkdir($server->dir, 0700);
        $server->log = $server->dir . '/events.log';
        touch($server->log);
        file_put_contents($server->dir . '/script', serialize($connections));
        $address = $listen === 'tcp' ? 'tcp://127.0.0.1:0' : 'unix://' . $server->dir . '/s.sock';

        $process = proc_open(
            [PHP_BINARY, '-d', 'display_errors=stderr', __DIR__ . '/fake-server.php', $address, $server->dir . '/script', $server->log],
            [1 => ['pipe', 'w'], 2 => ['file', $server->dir . '/stderr', 'w']],
            $server->pipes,
        );
        $ready = false;
        if (is_resource($process)) {
            $server->process = $process;
            stream_set_timeout($server->pipes[1], 10);
            $ready = fgets($server->pipes[1]);
        }
        if (!is_string($ready) || strncmp($ready, 'ready ', 6) !== 0) {
            $stderr = $server->stderr();
            $server->stop();
            throw new \RuntimeException('fake server did not start: ' . $stderr);
        }
        $name = trim(substr($ready, 6));
        $server->address = $listen === 'tcp' ? $name : $server->dir . '/s.sock';

        return $server;
    }

    /** address returns the socket path (unix) or "127.0.0.1:port" (tcp). */
    public function address(): string
    {
        return $this->address;
    }

    /**
     * events returns what the server logged so far: [event, connection number, data] triples.
     *
     * @return list<array{0: string, 1: int, 2: mixed}>
     */
    public function events(): array
    {
        $events = [];
        foreach (file($this->log, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
            $events[] = unserialize(base64_decode($line));
        }

        return $events;
    }

    /**
     * requests returns the decoded request maps received so far, with the connection number that carried each.
     *
     * @return list<array{conn: int, map: mixed, raw: string}>
     */
    public function requests(): array
    {
        $requests = [];
        foreach ($this->events() as [$event, $conn, $data]) {
            if ($event === 'request') {
                $requests[] = ['conn' => $conn, 'map' => $data['map'], 'raw' => $data['raw']];
            }
        }

        return $requests;
    }

    /** count returns how many times $event was logged. */
    public function count(string $event): int
    {
        return count(array_filter($this->events(), static fn (array $e): bool => $e[0] === $event));
    }

    /** waitFor waits until $event was logged $times times; false after $timeout seconds. */
    public function waitFor(string $event, int $times = 1, float $timeout = 5.0): bool
    {
        $deadline = microtime(true) + $timeout;
        while ($this->count($event) < $times) {
            if (microtime(true) > $deadline) {
                return false;
            }
            usleep(5000);
        }

        return true;
    }

    /** stop kills the server process and removes its files. */
    public function stop(): void
    {
        if (is_resource($this->process)) {
            if (proc_get_status($this->process)['running']) {
                proc_terminate($this->process, 9);
            }
            fclose($this->pipes[1]);
            proc_close($this->process);
            $this->process = null;
        }
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    /** logFile returns the path of the event log, for child processes that watch it. */
    public function logFile(): string
    {
        return $this->log;
    }

    /** stderr returns what the server wrote to stderr, for failure messages. */
    public function stderr(): string
    {
        return (string) @file_get_contents($this->dir . '/stderr');
    }
}
