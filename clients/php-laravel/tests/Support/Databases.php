<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Support;

use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Events\Dispatcher;
use Tether\Laravel\TetherDriver;

/**
 * Databases builds what the integration tests run on, from the environment scripts/integration-test.sh exports:
 * Capsule managers whose connections use the `tether` driver (through the tetherd at TETHER_SOCKET), and direct
 * PDO connections to the same MariaDB and PostgreSQL databases, to check what tetherd did. A variable missing is
 * a failure, never a skip.
 */
final class Databases
{
    public const MYSQL = 'mysql';
    public const PGSQL = 'pgsql';

    /** env returns the environment variable $name, failing with its name when it is not set. */
    public static function env(string $name): string
    {
        $value = \getenv($name);
        if ($value === false || $value === '') {
            throw new \RuntimeException(\sprintf('environment variable %s is not set: run the tests with scripts/integration-test.sh laravel', $name));
        }

        return $value;
    }

    /**
     * tetherConfig returns a `tether` connection config for $platform as an application would write it in
     * config/database.php, with $overrides merged in.
     *
     * @param array<string, mixed> $overrides
     * @return array<string, mixed>
     */
    public static function tetherConfig(string $platform, array $overrides = []): array
    {
        $config = $platform === self::MYSQL
            ? [
                'driver' => 'tether',
                'socket' => self::env('TETHER_SOCKET'),
                'backend' => self::env('TETHER_IT_MYSQL_BACKEND'),
                'platform' => 'mysql',
                'database' => self::env('TETHER_IT_DB'),
                'prefix' => '',
                'charset' => 'utf8mb4',
                'collation' => 'utf8mb4_unicode_ci',
                'strict' => true,
            ]
            : [
                'driver' => 'tether',
                'socket' => self::env('TETHER_SOCKET'),
                'backend' => self::env('TETHER_IT_PGSQL_BACKEND'),
                'platform' => 'pgsql',
                'database' => self::env('TETHER_IT_DB'),
                'prefix' => '',
                'charset' => 'utf8',
                'schema' => 'public',
            ];

        return \array_merge($config, $overrides);
    }

    /**
     * capsule returns a new Capsule manager with one `tether` connection named 'default' for $platform (plus
     * $extra connections by name), an event dispatcher, set as global and with Eloquent booted.
     *
     * @param array<string, mixed> $overrides
     * @param array<string, array<string, mixed>> $extra
     */
    public static function capsule(string $platform, array $overrides = [], array $extra = []): Capsule
    {
        $capsule = new Capsule(new Container());
        TetherDriver::register($capsule->getContainer());
        $capsule->addConnection(self::tetherConfig($platform, $overrides));
        foreach ($extra as $name => $config) {
            $capsule->addConnection($config, $name);
        }
        $capsule->setEventDispatcher(new Dispatcher($capsule->getContainer()));
        $capsule->setAsGlobal();
        $capsule->bootEloquent();

        return $capsule;
    }

    /** direct returns a PDO connection straight to $platform's test database, bypassing tetherd. */
    public static function direct(string $platform): \PDO
    {
        $options = [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION, \PDO::ATTR_DEFAULT_FETCH_MODE => \PDO::FETCH_ASSOC];
        if ($platform === self::MYSQL) {
            return new \PDO(
                \sprintf('mysql:unix_socket=%s;dbname=%s;charset=utf8mb4', self::env('TETHER_IT_MYSQL_SOCKET'), self::env('TETHER_IT_DB')),
                self::env('TETHER_IT_USER'),
                self::env('TETHER_IT_PASSWORD'),
                $options,
            );
        }

        return new \PDO(
            \sprintf('pgsql:host=%s;port=%s;dbname=%s', self::env('TETHER_IT_PGSQL_HOST'), self::env('TETHER_IT_PGSQL_PORT'), self::env('TETHER_IT_DB')),
            self::env('TETHER_IT_USER'),
            self::env('TETHER_IT_PASSWORD'),
            $options,
        );
    }

    /**
     * serverSessions counts the sessions the server has open on the test database for user `tether`, other than
     * the one $direct asks with: tetherd's pooled connections (other integrations use other databases).
     */
    public static function serverSessions(string $platform, \PDO $direct): int
    {
        $sql = $platform === self::MYSQL
            ? "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'tether' AND DB = ? AND ID <> CONNECTION_ID()"
            : "SELECT COUNT(*) FROM pg_stat_activity WHERE usename = 'tether' AND datname = ? AND pid <> pg_backend_pid()";
        $statement = $direct->prepare($sql);
        $statement->execute([self::env('TETHER_IT_DB')]);

        return (int) $statement->fetchColumn();
    }
}
