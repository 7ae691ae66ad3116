<?php

declare(strict_types=1);

namespace Tether\Tests\Support;

/**
 * PrivateTetherd is a tetherd of a test's own (the repository's bin/tetherd) with the configuration of the
 * integration's tetherd (scripts/lib/integration.sh: its backends `mysql` and `pgsql`, the same databases) on a
 * socket of its own: for a test that needs backend connections opened after it changed something server-wide (SET
 * GLOBAL sql_mode), which the integration's long-running tetherd has opened already. Framework integrations' tests
 * load it with require_once.
 */
final class PrivateTetherd
{
    /** @var resource */
    private $process;

    private function __construct(public readonly string $socket, public readonly string $dir, $process)
    {
        $this->process = $process;
    }

    /**
     * start writes a config under $TETHER_IT_DIR/private-$name and starts tetherd on it, returning once its socket
     * accepts a connection (tetherd logs in to its backend before it listens). $maxConns > 0 sets every backend's max_conns.
     *
     * @throws \RuntimeException bin/tetherd missing, an env variable missing, or tetherd did not come up in 10 s
     */
    public static function start(string $name, int $maxConns = 0): self
    {
        $env = static function (string $var): string {
            $value = \getenv($var);
            if ($value === false || $value === '') {
                throw new \RuntimeException("environment variable $var is not set: run through scripts/integration-test.sh");
            }

            return $value;
        };
        $binary = \dirname(__DIR__, 4) . '/bin/tetherd';
        if (!\is_executable($binary)) {
            throw new \RuntimeException("$binary is not built (go build -o bin/tetherd ./cmd/tetherd)");
        }
        $dir = $env('TETHER_IT_DIR') . '/private-' . $name;
        if (!\is_dir($dir)) {
            \mkdir($dir, 0777, true);
        }
        $socket = $dir . '/tether.sock';
        @\unlink($socket);
        // The integration's own configuration (its backends, on the same databases), on a socket of its own.
        $toml = (string) \file_get_contents($env('TETHER_IT_DIR') . '/tetherd.toml');
        $config = (string) \preg_replace('/^socket = .*$/m', 'socket = ' . \json_encode($socket, JSON_UNESCAPED_SLASHES), $toml);
        if ($maxConns > 0) {
            $config = (string) \preg_replace('/^max_conns = .*$/m', 'max_conns = ' . $maxConns, $config);
        }
        \file_put_contents($dir . '/tetherd.toml', $config);
        $process = \proc_open(
            [$binary, '-config', $dir . '/tetherd.toml'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $dir . '/tetherd.log', 'w'], 2 => ['file', $dir . '/tetherd.log', 'a']],
            $pipes,
        );
        if ($process === false) {
            throw new \RuntimeException("start $binary failed");
        }
        $self = new self($socket, $dir, $process);
        // Up once a connect succeeds: the socket file appears at bind(), a moment before listen(), and a client
        // that connects in between is refused.
        $deadline = \microtime(true) + 10;
        while (($probe = @\stream_socket_client('unix://' . $socket, $errno, $errstr, 1.0)) === false) {
            if (!\proc_get_status($process)['running'] || \microtime(true) > $deadline) {
                $self->stop();
                throw new \RuntimeException("tetherd did not come up on $socket: " . \file_get_contents($dir . '/tetherd.log'));
            }
            \usleep(10000);
        }
        \fclose($probe);

        return $self;
    }

    /** stop sends SIGTERM and waits for tetherd to exit (SIGKILL after 10 s). */
    public function stop(): void
    {
        if (!\proc_get_status($this->process)['running']) {
            \proc_close($this->process);

            return;
        }
        \proc_terminate($this->process, 15);
        $deadline = \microtime(true) + 10;
        while (\proc_get_status($this->process)['running'] && \microtime(true) < $deadline) {
            \usleep(10000);
        }
        if (\proc_get_status($this->process)['running']) {
            \proc_terminate($this->process, 9);
        }
        \proc_close($this->process);
    }

    /**
     * setGlobalSqlMode sets MariaDB's GLOBAL sql_mode (as the databases' root, who needs no password on the test
     * servers: scripts/lib/databases.sh) and returns the previous one. Sessions opened from now on start in it.
     */
    public static function setGlobalSqlMode(string $mode): string
    {
        $socket = \getenv('TETHER_IT_MYSQL_SOCKET') ?: throw new \RuntimeException('TETHER_IT_MYSQL_SOCKET is not set');
        \mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $root = new \mysqli('localhost', 'root', '', null, 0, $socket);
        $previous = (string) $root->query('SELECT @@GLOBAL.sql_mode')->fetch_row()[0];
        $root->query("SET GLOBAL sql_mode = '" . $root->real_escape_string($mode) . "'");

        return $previous;
    }

    /**
     * withGlobalSqlMode runs $fn with MariaDB's GLOBAL sql_mode extended by $mode (as the databases' root, who
     * needs no password on the test servers: scripts/lib/databases.sh), and a tetherd started after the change,
     * whose every backend connection starts in that mode; the global mode is restored and tetherd stopped after.
     *
     * @template T
     * @param callable(self): T $fn
     * @return T
     */
    public static function withGlobalSqlMode(string $mode, callable $fn): mixed
    {
        $socket = \getenv('TETHER_IT_MYSQL_SOCKET') ?: throw new \RuntimeException('TETHER_IT_MYSQL_SOCKET is not set');
        \mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $root = new \mysqli('localhost', 'root', '', null, 0, $socket);
        $previous = (string) $root->query('SELECT @@GLOBAL.sql_mode')->fetch_row()[0];
        $root->query("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',', '" . $root->real_escape_string($mode) . "')");
        $tetherd = null;
        try {
            $tetherd = self::start('global-sql-mode');

            return $fn($tetherd);
        } finally {
            $root->query("SET GLOBAL sql_mode = '" . $root->real_escape_string($previous) . "'");
            $tetherd?->stop();
        }
    }
}
