<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Connection as DBALConnection;
use Doctrine\DBAL\Driver\API\ExceptionConverter as ExceptionConverterInterface;
use Doctrine\DBAL\Platforms\AbstractPlatform;
use Tether\Client;
use Tether\DBAL\Exception\DriverError;
use Tether\DBAL\Exception\UnsupportedOption;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;

/**
 * Driver is the Doctrine DBAL driver for Tether: DBAL (and so Doctrine ORM and Symfony) runs its SQL on a MySQL/
 * MariaDB or PostgreSQL backend of tetherd, through the Tether PHP client, by configuration only:
 *
 *     DriverManager::getConnection([
 *         'driverClass'    => Tether\DBAL\Driver::class,
 *         'tether_socket'  => '/run/tether/tether.sock',  // default: env TETHER_SOCKET, else ./var/tether.sock
 *         'tether_backend' => 'maria',                    // default: tetherd's default_backend
 *     ]);
 *
 * Connection parameters (top level, or in `driverOptions`, which is where Symfony's doctrine.yaml `options` go):
 * - tether_socket (string), tether_backend (string), tether_timeout (seconds, default 30): the Tether client's;
 * - tether_pg_lastval (bool, default true): PostgreSQL, see Connection::lastInsertId();
 * - tether_cache_ttl (milliseconds, default 0: off): queries outside a transaction may be answered from tetherd's
 *   shared result cache for that long (ResultCache::with() sets it for a callback instead);
 * - tether_local_cache (bool, default false): keep the reads tether_cache_ttl or ResultCache::with() marks cacheable
 *   in the PHP workers' shared memory too (APCu, the Tether client's local_cache; tetherd needs [cache] local =
 *   true), and serve a repeated one inside the worker, without a call to tetherd, while tetherd's table versions
 *   say it is fresh;
 * - tether_sql_datetimes (bool, default true): DATETIME/TIMESTAMP values as PDO returns them ("2024-02-29
 *   23:59:59"; tetherd's time_format "sql"), or, false, in ISO 8601 ("2024-02-29T23:59:59");
 * - tether_primary (bool, default false): on a backend with replicas, this connection's reads outside a transaction
 *   run on the primary too (a "write connection"; Primary::with() and ::ensure() switch it at run time);
 * - tether_causal_token (string): a token Client::causalToken() gave in an earlier request (getNativeConnection()
 *   is the Client): this connection's reads see those writes (the Tether client's causal_token);
 * - persistent (bool, default false): share the PHP worker's persistent socket to tetherd; then every DBAL
 *   connection of the worker on that socket shares one set of session settings;
 * - charset: SET NAMES on connect (session settings are kept by tetherd for this connection's statements);
 * - driverOptions[PDO::MYSQL_ATTR_INIT_COMMAND] (1002): a statement run on connect (MySQL/MariaDB);
 * - platform, serverVersion: as for every DBAL driver. host, port, user, password, dbname, unix_socket are
 *   ignored: tetherd's configuration holds the database and its credentials.
 * Any other `tether_*` parameter or driver option is an UnsupportedOption.
 *
 * The dialect (MySQL or PostgreSQL) and the platform come from the backend's server: connect() asks SELECT
 * VERSION() through tetherd once per process and backend (or takes the dialect from a `platform` given), and the
 * version picks the platform by DBAL's own rules (MariaDb1027Platform, MySQL80Platform, PostgreSQL100Platform...).
 */
final class Driver implements Compat\VersionAwareDriver
{
    /** The parameters this driver reads, top level or in driverOptions. */
    private const TETHER_PARAMS = ['tether_socket', 'tether_backend', 'tether_timeout', 'tether_pg_lastval', 'tether_sql_datetimes', 'tether_cache_ttl', 'tether_local_cache', 'tether_primary', 'tether_causal_token'];
    /** PDO::MYSQL_ATTR_INIT_COMMAND, without requiring pdo_mysql. */
    private const MYSQL_ATTR_INIT_COMMAND = 1002;

    /** @var array<string, array{Dialect, string}> "socket\0backend" => [dialect, server version], per process */
    private static array $servers = [];

    /** The dialect of the last connect(), which tells createDatabasePlatformForVersion() which server it is. */
    private ?Dialect $dialect = null;

    /**
     * connect returns a connection to the backend. It makes one round trip to tetherd, so that an unreachable
     * tetherd fails here: SELECT VERSION() the first time this process meets the backend, a ping afterwards.
     *
     * @param array<string, mixed> $params
     * @throws UnsupportedOption an unknown tether_* parameter or driver option, or an invalid value
     * @throws DriverError tetherd or the backend cannot be reached (DBAL: ConnectionException), or a session
     *                     setting failed
     */
    public function connect(#[\SensitiveParameter] array $params): Connection
    {
        $options = self::options($params);
        $socket = $options['tether_socket'] ?? (\getenv('TETHER_SOCKET') ?: './var/tether.sock');
        $backend = $options['tether_backend'] ?? null;
        try {
            $client = new Client([
                'socket' => $socket,
                'backend' => $backend,
                'persistent' => $options['persistent'],
                'timeout' => $options['tether_timeout'] ?? 30.0,
                // DATETIME/TIMESTAMP values written by tetherd as PDO gives them, from the column's type.
                'time_format' => ($options['tether_sql_datetimes'] ?? true) ? 'sql' : 'iso',
                'local_cache' => $options['tether_local_cache'] ?? false,
                'causal_token' => $options['tether_causal_token'] ?? null,
            ]);
        } catch (TetherException $e) {
            throw new UnsupportedOption('invalid Tether client option: ' . $e->getMessage(), null, 0, $e);
        }

        $key = $socket . "\0" . ($backend ?? '');
        $platform = $params['platform'] ?? null;
        $dialect = $platform instanceof AbstractPlatform ? Dialect::fromPlatform($platform) : null;
        try {
            if ($dialect === null && !isset(self::$servers[$key])) {
                self::$servers[$key] = self::detect($client, $backend);
            } else {
                $client->ping();
            }
        } catch (TetherException $e) {
            throw DriverError::fromTether($e, $dialect, null, true);
        }
        $dialect ??= self::$servers[$key][0];
        $this->dialect = $dialect;

        $connection = new Connection(
            $client,
            $backend,
            $dialect,
            static function () use ($key, $client, $backend): string {
                try {
                    return (self::$servers[$key] ??= self::detect($client, $backend))[1];
                } catch (TetherException $e) {
                    throw DriverError::fromTether($e, null, 'SELECT VERSION()');
                }
            },
            $options['tether_pg_lastval'] ?? true,
            $options['tether_cache_ttl'] ?? 0,
            $options['tether_primary'] ?? false,
        );
        foreach (self::sessionStatements($options, $dialect) as $sql) {
            $connection->exec($sql);
        }

        return $connection;
    }

    /**
     * getDatabasePlatform returns the platform of the backend. DBAL 4 passes the ServerVersionProvider (the
     * connection, which connects to tell the version); DBAL 3 calls it without one only when no version is known,
     * and then gets the dialect's base platform.
     *
     * @param mixed $versionProvider DBAL 4: Doctrine\DBAL\ServerVersionProvider
     * @throws DriverError DBAL 3: the dialect is not known yet (no connect() and no version)
     */
    public function getDatabasePlatform($versionProvider = null): AbstractPlatform
    {
        if ($versionProvider !== null) {
            $version = $versionProvider->getServerVersion();
            $dialect = $this->dialect ?? Dialect::fromServerVersion($version);

            return $dialect->platformDriver()->getDatabasePlatform($versionProvider);
        }
        $dialect = $this->dialect ?? throw new DriverError('the platform is not known before connecting: give serverVersion or platform, or connect first');

        return $dialect->platformDriver()->getDatabasePlatform();
    }

    /**
     * createDatabasePlatformForVersion returns the platform for a server version (DBAL 3): the one connect()
     * detected, or the serverVersion parameter, whose dialect Dialect::fromServerVersion() reads.
     *
     * @param string $version
     */
    public function createDatabasePlatformForVersion($version): AbstractPlatform
    {
        $dialect = $this->dialect ?? Dialect::fromServerVersion($version);

        return $dialect->platformDriver()->createDatabasePlatformForVersion($dialect->normalizeServerVersion($version));
    }

    /**
     * getSchemaManager returns the platform's schema manager (DBAL 3; deprecated there in favour of
     * AbstractPlatform::createSchemaManager(), which DBAL calls itself).
     */
    public function getSchemaManager(DBALConnection $conn, AbstractPlatform $platform)
    {
        return $platform->createSchemaManager($conn);
    }

    public function getExceptionConverter(): ExceptionConverterInterface
    {
        return new ExceptionConverter();
    }

    /**
     * detect asks the backend's server its version through tetherd.
     *
     * @return array{Dialect, string} the dialect and the version as DBAL's native drivers report it
     * @throws TetherException tetherd could not be reached or answered with a tetherd error
     * @throws DriverError the backend could not run SELECT VERSION(): it is not MySQL/MariaDB or PostgreSQL
     */
    private static function detect(Client $client, ?string $backend): array
    {
        try {
            $row = $client->queryOne('SELECT VERSION() AS v', [], $backend);
        } catch (ServerException $e) {
            if ($e->getErrorCode() !== ServerException::BACKEND_ERROR) {
                throw $e;
            }
            throw new DriverError(\sprintf(
                'cannot tell the server of tetherd backend %s: SELECT VERSION() failed (%s); this driver serves MySQL/MariaDB and PostgreSQL backends',
                $backend ?? '(default)',
                $e->getMessage(),
            ), null, 0, $e);
        }
        $version = (string) ($row['v'] ?? '');
        $dialect = Dialect::fromServerVersion($version);

        return [$dialect, $dialect->normalizeServerVersion($version)];
    }

    /**
     * options reads the parameters this driver knows, from the top level and from driverOptions.
     *
     * @param array<string, mixed> $params
     * @return array{persistent: bool, tether_socket?: string, tether_backend?: string, tether_timeout?: float|int,
     *               tether_pg_lastval?: bool, tether_sql_datetimes?: bool, tether_cache_ttl?: int,
     *               tether_local_cache?: bool, charset?: string, init_command?: string}
     * @throws UnsupportedOption
     */
    private static function options(array $params): array
    {
        $known = [...self::TETHER_PARAMS, 'PDO::MYSQL_ATTR_INIT_COMMAND (1002)'];
        $options = [];
        $driverOptions = $params['driverOptions'] ?? [];
        if (!\is_array($driverOptions)) {
            throw UnsupportedOption::invalid('driverOptions', $driverOptions, 'an array');
        }
        foreach ($driverOptions as $name => $value) {
            if ($name === self::MYSQL_ATTR_INIT_COMMAND) {
                $options['init_command'] = \is_string($value) ? $value : throw UnsupportedOption::invalid('PDO::MYSQL_ATTR_INIT_COMMAND', $value, 'an SQL statement');
            } elseif (\in_array($name, self::TETHER_PARAMS, true)) {
                $options[$name] = $value;
            } else {
                throw UnsupportedOption::unknown('driver option', $name, $value, $known);
            }
        }
        foreach ($params as $name => $value) {
            if (!\is_string($name) || !\str_starts_with($name, 'tether_')) {
                continue;
            }
            if (!\in_array($name, self::TETHER_PARAMS, true)) {
                throw UnsupportedOption::unknown('connection parameter', $name, $value, self::TETHER_PARAMS);
            }
            if (\array_key_exists($name, $options) && $options[$name] !== $value) {
                throw UnsupportedOption::invalid($name, $value, \sprintf('one value, not another one in driverOptions (%s)', \var_export($options[$name], true)));
            }
            $options[$name] = $value;
        }
        foreach (['tether_socket', 'tether_backend'] as $name) {
            if (isset($options[$name]) && (!\is_string($options[$name]) || $options[$name] === '')) {
                throw UnsupportedOption::invalid($name, $options[$name], 'a non-empty string');
            }
        }
        if (isset($options['tether_timeout']) && (!\is_int($options['tether_timeout']) && !\is_float($options['tether_timeout']) || $options['tether_timeout'] <= 0)) {
            throw UnsupportedOption::invalid('tether_timeout', $options['tether_timeout'], 'seconds > 0');
        }
        if (isset($options['tether_cache_ttl']) && (!\is_int($options['tether_cache_ttl']) || $options['tether_cache_ttl'] < 0)) {
            throw UnsupportedOption::invalid('tether_cache_ttl', $options['tether_cache_ttl'], 'milliseconds (an int, 0 or more)');
        }
        if (isset($options['tether_causal_token']) && !\is_string($options['tether_causal_token'])) {
            throw UnsupportedOption::invalid('tether_causal_token', $options['tether_causal_token'], 'a token from Client::causalToken() (a string)');
        }
        foreach (['tether_pg_lastval', 'tether_sql_datetimes', 'tether_local_cache', 'tether_primary'] as $name) {
            if (isset($options[$name]) && !\is_bool($options[$name])) {
                throw UnsupportedOption::invalid($name, $options[$name], 'a bool');
            }
        }
        $persistent = $params['persistent'] ?? false;
        $options['persistent'] = \is_bool($persistent) ? $persistent : throw UnsupportedOption::invalid('persistent', $persistent, 'a bool');
        if (isset($params['charset'])) {
            $charset = $params['charset'];
            $options['charset'] = \is_string($charset) && \preg_match('/^[A-Za-z0-9_-]+$/', $charset) === 1
                ? $charset
                : throw UnsupportedOption::invalid('charset', $charset, 'a character set name');
        }

        return $options;
    }

    /**
     * sessionStatements returns the statements connect() runs: SET NAMES for `charset`, then the init command.
     *
     * @param array<string, mixed> $options
     * @return list<string>
     */
    private static function sessionStatements(array $options, Dialect $dialect): array
    {
        $statements = [];
        if (isset($options['charset'])) {
            $statements[] = $dialect === Dialect::MySQL ? 'SET NAMES ' . $options['charset'] : "SET NAMES '" . $options['charset'] . "'";
        }
        if (isset($options['init_command'])) {
            if ($dialect !== Dialect::MySQL) {
                throw UnsupportedOption::invalid('PDO::MYSQL_ATTR_INIT_COMMAND', $options['init_command'], 'a MySQL/MariaDB backend (this one is PostgreSQL)');
            }
            $statements[] = $options['init_command'];
        }

        return $statements;
    }
}
