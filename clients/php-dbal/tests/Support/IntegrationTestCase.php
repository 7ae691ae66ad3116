<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Support;

use Doctrine\DBAL\Connection;
use Doctrine\DBAL\DriverManager;
use PHPUnit\Framework\TestCase;
use Tether\DBAL\Driver;

/**
 * IntegrationTestCase runs each test on both backends of the integration's tetherd (scripts/lib/integration.sh):
 * `mysql` (MariaDB) and `pgsql` (PostgreSQL), through Tether\DBAL\Driver, with the same databases reached
 * directly over PDO as the baseline. A missing environment variable fails the test; nothing is skipped.
 */
abstract class IntegrationTestCase extends TestCase
{
    /** @var list<Connection> closed after each test */
    private array $opened = [];

    /** @return array<string, array{string}> */
    public static function backends(): array
    {
        return ['mariadb' => ['mysql'], 'postgresql' => ['pgsql']];
    }

    protected function tearDown(): void
    {
        foreach ($this->opened as $conn) {
            $conn->close();
        }
        $this->opened = [];
    }

    protected static function env(string $name): string
    {
        $value = getenv($name);
        if ($value === false || $value === '') {
            throw new \RuntimeException("environment variable $name is not set: run through scripts/integration-test.sh dbal");
        }

        return $value;
    }

    /** backendName returns the tetherd backend name of 'mysql' or 'pgsql'. */
    protected static function backendName(string $kind): string
    {
        return self::env($kind === 'mysql' ? 'TETHER_IT_MYSQL_BACKEND' : 'TETHER_IT_PGSQL_BACKEND');
    }

    /**
     * connect returns a DBAL connection through tetherd, with $params over the defaults.
     *
     * @param array<string, mixed> $params
     */
    protected function connect(string $kind, array $params = []): Connection
    {
        $conn = DriverManager::getConnection($params + [
            'driverClass' => Driver::class,
            'tether_socket' => self::env('TETHER_SOCKET'),
            'tether_backend' => self::backendName($kind),
        ]);
        $this->opened[] = $conn;

        return $conn;
    }

    /** pdo returns a direct PDO connection to the same database as $kind's backend. */
    protected static function pdo(string $kind): \PDO
    {
        $db = self::env('TETHER_IT_DB');
        $dsn = $kind === 'mysql'
            ? sprintf('mysql:unix_socket=%s;dbname=%s;charset=utf8mb4', self::env('TETHER_IT_MYSQL_SOCKET'), $db)
            : sprintf('pgsql:host=%s;port=%s;dbname=%s', self::env('TETHER_IT_PGSQL_HOST'), self::env('TETHER_IT_PGSQL_PORT'), $db);

        return new \PDO($dsn, self::env('TETHER_IT_USER'), self::env('TETHER_IT_PASSWORD'), [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
    }

    /** directDbal returns a DBAL connection over pdo_mysql / pdo_pgsql to the same database, for comparisons. */
    protected function directDbal(string $kind): Connection
    {
        $params = $kind === 'mysql'
            ? ['driver' => 'pdo_mysql', 'unix_socket' => self::env('TETHER_IT_MYSQL_SOCKET'), 'charset' => 'utf8mb4']
            : ['driver' => 'pdo_pgsql', 'host' => self::env('TETHER_IT_PGSQL_HOST'), 'port' => (int) self::env('TETHER_IT_PGSQL_PORT')];
        $conn = DriverManager::getConnection($params + [
            'dbname' => self::env('TETHER_IT_DB'),
            'user' => self::env('TETHER_IT_USER'),
            'password' => self::env('TETHER_IT_PASSWORD'),
        ]);
        $this->opened[] = $conn;

        return $conn;
    }

    /**
     * startTetherd starts a tetherd of the test's own: the integration's configuration (its backends, fresh
     * pools) on another socket, plus $extraToml. Returns the process and its socket; stop it with stopTetherd().
     *
     * @return array{resource, string}
     */
    protected static function startTetherd(string $name, string $extraToml = ''): array
    {
        $dir = self::env('TETHER_IT_DIR');
        $socket = "$dir/$name.sock";
        $config = "$dir/$name.toml";
        $toml = (string) file_get_contents("$dir/tetherd.toml");
        file_put_contents($config, preg_replace('/^socket = .*$/m', 'socket = "' . $socket . '"', $toml) . "\n" . $extraToml);
        @unlink($socket);
        $log = ['file', "$dir/$name.log", 'a'];
        $process = proc_open([dirname(__DIR__, 4) . '/bin/tetherd', '-config', $config], [0 => ['file', '/dev/null', 'r'], 1 => $log, 2 => $log], $pipes);
        self::assertIsResource($process, 'tetherd started');
        for ($i = 0; $i < 200 && !file_exists($socket); $i++) {
            usleep(25_000);
        }
        self::assertFileExists($socket, "tetherd $name did not open its socket (log: $dir/$name.log)");

        return [$process, $socket];
    }

    /**
     * stopTetherd stops a tetherd of startTetherd() with $signal (SIGKILL: gone at once, as in a crash; SIGTERM:
     * drains) and waits for it to exit.
     *
     * @param resource $process
     */
    protected static function stopTetherd($process, int $signal): void
    {
        proc_terminate($process, $signal);
        for ($i = 0; $i < 400 && proc_get_status($process)['running']; $i++) {
            usleep(25_000);
        }
        proc_close($process);
    }

    /** autoIncrement returns the column definition of an auto-generated integer primary key. */
    protected static function serialKey(string $kind): string
    {
        return $kind === 'mysql' ? 'id INT AUTO_INCREMENT PRIMARY KEY' : 'id SERIAL PRIMARY KEY';
    }

    /** recreate drops $table if it exists and creates it with $columns (SQL column definitions). */
    protected static function recreate(Connection $conn, string $table, string $columns, string $kind): void
    {
        $conn->executeStatement('DROP TABLE IF EXISTS ' . $table . ($kind === 'pgsql' ? ' CASCADE' : ''));
        $conn->executeStatement("CREATE TABLE $table ($columns)" . ($kind === 'mysql' ? ' ENGINE=InnoDB' : ''));
    }
}
