<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Connection;

use PHPUnit\Framework\TestCase;
use Tether\Client;
use Tether\Connection\CommunicationException;

/**
 * ConnectErrorTest: when tetherd cannot be reached, the error says what to fix: the socket, the setting that chose
 * it, what the errno means (ENOENT, ECONNREFUSED, EACCES with socket_group / socket_mode), and where tetherd logs.
 */
final class ConnectErrorTest extends TestCase
{
    private string $dir;
    /** @var string|false the environment's TETHER_SOCKET, restored after each test */
    private string|false $envSocket;

    protected function setUp(): void
    {
        $this->envSocket = \getenv('TETHER_SOCKET');
        $this->dir = \sys_get_temp_dir() . '/tether-connect-error-' . \getmypid();
        @\mkdir($this->dir, 0755);
        \chmod($this->dir, 0755);
    }

    protected function tearDown(): void
    {
        foreach (\glob($this->dir . '/*') ?: [] as $file) {
            @\unlink($file);
        }
        @\rmdir($this->dir);
        \putenv($this->envSocket === false ? 'TETHER_SOCKET' : 'TETHER_SOCKET=' . $this->envSocket);
    }

    public function testNoSocketFile(): void
    {
        $socket = $this->dir . '/missing.sock';
        $message = self::connectError(new Client(['socket' => $socket, 'persistent' => false, 'timeout' => 1]));
        self::assertStringContainsString("connect to tetherd at unix://$socket: No such file or directory (errno 2)", $message);
        self::assertStringContainsString("No socket file at $socket: tetherd is not running, or its [server] socket in tetherd.toml is another path", $message);
        self::assertStringContainsString('The address comes from the Client option socket', $message);
        self::assertLogPointer($message);
    }

    public function testTheSettingNamedIsEnvTetherSocket(): void
    {
        $socket = $this->dir . '/from-env.sock';
        \putenv('TETHER_SOCKET=' . $socket);
        $message = self::connectError(new Client(['persistent' => false, 'timeout' => 1]));
        self::assertStringContainsString("unix://$socket", $message);
        self::assertStringContainsString('The address comes from env TETHER_SOCKET', $message);
    }

    public function testNothingListens(): void
    {
        $socket = $this->dir . '/stale.sock';
        $server = \stream_socket_server('unix://' . $socket);
        \fclose($server); // the file stays, nobody listens: what a crashed tetherd leaves
        self::assertFileExists($socket);
        $message = self::connectError(new Client(['socket' => $socket, 'persistent' => false, 'timeout' => 1]));
        self::assertStringContainsString('Connection refused (errno 111)', $message);
        self::assertStringContainsString("Nothing listens on $socket: tetherd stopped (or failed at start) and left its socket file", $message);
        self::assertLogPointer($message);
    }

    /**
     * Where the errno numbers differ from Linux's (macOS and the BSDs: ECONNREFUSED is 61, ...), or PHP reports 0,
     * the error's text says which: the hint is the same.
     */
    public function testTheHintFollowsTheErrorTextWhereTheNumberIsNotLinuxs(): void
    {
        $refused = CommunicationException::connectFailed('unix:///run/t.sock', 61, 'Connection refused', 'env TETHER_SOCKET')->getMessage();
        self::assertStringContainsString('Nothing listens on /run/t.sock', $refused);
        $noFile = CommunicationException::connectFailed('unix:///run/t.sock', 0, 'No such file or directory', 'env TETHER_SOCKET')->getMessage();
        self::assertStringContainsString('No socket file at /run/t.sock', $noFile);
        $denied = CommunicationException::connectFailed('unix:///run/t.sock', 0, 'Permission denied', 'env TETHER_SOCKET')->getMessage();
        self::assertStringContainsString('socket_group', $denied);
        $tcp = CommunicationException::connectFailed('tcp://127.0.0.1:7000', 61, 'Connection refused', 'the client\'s options')->getMessage();
        self::assertStringContainsString('Nothing listens on 127.0.0.1:7000', $tcp);
    }

    /** EACCES: the socket's mode and group keep this user out; the error names socket_group and socket_mode. */
    public function testPermissionDenied(): void
    {
        $socket = $this->dir . '/private.sock';
        $server = \stream_socket_server('unix://' . $socket);
        \chmod($socket, 0600);
        try {
            if (\posix_geteuid() !== 0) {
                \chmod($socket, 0000);
                $message = self::connectError(new Client(['socket' => $socket, 'persistent' => false, 'timeout' => 1]));
            } else {
                // root may open any socket: connect from a child process that runs as nobody.
                $message = self::asNobody(static fn (): string => self::connectError(new Client(['socket' => $socket, 'persistent' => false, 'timeout' => 1])));
            }
        } finally {
            \fclose($server);
        }
        self::assertStringContainsString('Permission denied (errno 13)', $message);
        self::assertMatchesRegularExpression('/This PHP process \(user [^)]*\) may not open ' . \preg_quote($socket, '/') . '/', $message);
        self::assertStringContainsString('set [server] socket_group to a group of that user and socket_mode to "0660" in tetherd.toml', $message);
        self::assertLogPointer($message);
    }

    private static function assertLogPointer(string $message): void
    {
        self::assertStringContainsString('[log] file in tetherd.toml', $message);
        self::assertStringContainsString('journalctl -u tetherd', $message);
    }

    private static function connectError(Client $client): string
    {
        try {
            $client->ping();
        } catch (CommunicationException $e) {
            return $e->getMessage();
        }
        self::fail('ping succeeded');
    }

    /** asNobody runs $fn in a forked child as user nobody and returns the string it returned. */
    private static function asNobody(callable $fn): string
    {
        $out = \tempnam(\sys_get_temp_dir(), 'tether-nobody');
        \chmod($out, 0666);
        $pid = \pcntl_fork();
        if ($pid === 0) {
            $nobody = \posix_getpwnam('nobody');
            \posix_setgid($nobody['gid']);
            \posix_setuid($nobody['uid']);
            try {
                \file_put_contents($out, $fn());
            } catch (\Throwable $e) {
                \file_put_contents($out, 'child failed: ' . $e->getMessage());
            }
            \posix_kill(\posix_getpid(), SIGKILL); // no PHPUnit shutdown in the child
        }
        \pcntl_waitpid($pid, $status);
        $result = (string) \file_get_contents($out);
        \unlink($out);

        return $result;
    }
}
