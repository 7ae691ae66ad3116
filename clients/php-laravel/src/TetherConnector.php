<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Illuminate\Database\Connectors\ConnectorInterface;
use Tether\Client;
use Tether\Laravel\Sql\SqlText;

/**
 * TetherConnector is the `tether` driver's connector (container binding `db.connector.tether`): Laravel's
 * ConnectionFactory calls connect($config) when a connection first needs its "PDO", and gets a TetherSession.
 *
 * connect() builds the Tether\Client from the config (socket or tcp + token, backend, timeout, persistent,
 * local_cache), then runs what Laravel's MySqlConnector / PostgresConnector run on a new PDO, so that the same
 * settings hold:
 * - MySQL/MariaDB: isolation_level; charset + collation, timezone and sql_mode (strict / modes) in ONE `SET`
 *   statement (`SET NAMES 'utf8mb4' COLLATE '...', time_zone = '+00:00', SESSION sql_mode = '...'`). The
 *   database is the tetherd backend's, never switched with USE (tetherd resets USE after its statement).
 * - PostgreSQL: isolation_level, charset (`set names`), timezone, schema / search_path, application_name,
 *   synchronous_commit, each its own `SET`, as Laravel runs them.
 * tetherd keeps these settings per client socket and applies them to every later statement of that socket.
 *
 * Sockets: Client sockets are persistent by default and shared by every Client of the process with the same
 * address, so two Laravel connections whose settings differ must not share one. Unless the config says
 * 'persistent', the first connection to an address and backend (per PHP request) takes the shared persistent
 * socket, later ones with the same settings share it, and one with other settings gets a socket of its own
 * (persistent => false), closed when its session goes.
 */
final class TetherConnector implements ConnectorInterface
{
    private const CLIENT_OPTIONS = ['socket', 'tcp', 'token', 'timeout'];

    /** @var array<string, string> the settings fingerprint that owns the shared socket, by address and backend */
    private static array $sharedSocketOwners = [];

    /**
     * connect opens the session of one Laravel connection and applies its session settings.
     *
     * @param array<string, mixed> $config the connection's config (driver tether)
     * @return TetherSession
     * @throws \InvalidArgumentException a bad option (named)
     * @throws TetherQueryError tetherd or the backend refused a setting, or could not be reached
     */
    public function connect(array $config)
    {
        $backend = $config['backend'] ?? null;
        if ($backend !== null && (!\is_string($backend) || $backend === '')) {
            throw new \InvalidArgumentException(\sprintf('tether driver: option backend: want a tetherd backend name, got %s', \var_export($backend, true)));
        }
        $platform = self::configuredPlatform($config);

        $options = ['backend' => $backend];
        foreach (self::CLIENT_OPTIONS as $option) {
            if (isset($config[$option])) {
                $options[$option] = $config[$option];
            }
        }
        if (isset($config['local_cache'])) {
            if (!\is_bool($config['local_cache'])) {
                throw new \InvalidArgumentException(\sprintf('tether driver: option local_cache: want a bool, got %s', \var_export($config['local_cache'], true)));
            }
            // Cacheable reads (cache_ttl, withCache()) kept in APCu and answered inside the worker while tetherd's
            // table versions say they are fresh (the Client's local_cache; tetherd needs [cache] local = true).
            $options['local_cache'] = $config['local_cache'];
        }
        if (isset($config['causal'])) {
            if (!\is_bool($config['causal'])) {
                throw new \InvalidArgumentException(\sprintf('tether driver: option causal: want a bool, got %s', \var_export($config['causal'], true)));
            }
            // Read-your-writes across requests: the token the CausalTokens middleware found in the user's session.
            if ($config['causal'] && ($token = CausalTokens::pending((string) ($config['name'] ?? ''))) !== null) {
                $options['causal_token'] = $token;
            }
        }
        $options['persistent'] = $this->choosePersistence($config, $options);
        // tetherd writes DATETIME/TIMESTAMP values as PDO does ("2024-02-29 23:59:59"), not in ISO 8601.
        $options['time_format'] = ($config['sql_datetimes'] ?? true) ? 'sql' : 'iso';

        $session = new TetherSession(new Client($options), $backend, $platform);
        if (isset($config['cache_ttl'])) {
            if (!\is_int($config['cache_ttl']) || $config['cache_ttl'] < 0) {
                throw new \InvalidArgumentException(\sprintf('tether driver: option cache_ttl: want milliseconds (an int, 0 or more), got %s', \var_export($config['cache_ttl'], true)));
            }
            $session->setCacheTtl($config['cache_ttl']);
        }
        foreach ($this->sessionStatements($config, $session) as $statement) {
            $session->exec($statement);
        }

        return $session;
    }

    /**
     * configuredPlatform returns the config's platform ('mysql', 'pgsql'; 'mariadb' and 'postgres' are accepted as
     * aliases), or null when it is to be read from the server.
     *
     * @param array<string, mixed> $config
     * @throws \InvalidArgumentException an unknown platform
     */
    public static function configuredPlatform(array $config): ?string
    {
        $platform = $config['platform'] ?? null;

        return match ($platform) {
            null, '' => null,
            'mysql', 'mariadb' => SqlText::MYSQL,
            'pgsql', 'postgres', 'postgresql' => SqlText::PGSQL,
            default => throw new \InvalidArgumentException(\sprintf("tether driver: option platform: want 'mysql' or 'pgsql' (or none, to ask the server), got %s", \var_export($platform, true))),
        };
    }

    /**
     * sessionStatements returns the statements Laravel's own connector would run on a new connection, for the
     * session's platform (combined into one SET on MySQL).
     *
     * @param array<string, mixed> $config
     * @return list<string>
     */
    public function sessionStatements(array $config, TetherSession $session): array
    {
        $statements = [];
        if ($session->platform() === SqlText::MYSQL) {
            if (isset($config['isolation_level'])) {
                $statements[] = "SET SESSION TRANSACTION ISOLATION LEVEL {$config['isolation_level']}";
            }
            $assignments = [];
            if (isset($config['charset'])) {
                $assignments[] = "NAMES '{$config['charset']}'" . (isset($config['collation']) ? " COLLATE '{$config['collation']}'" : '');
            }
            if (isset($config['timezone'])) {
                $assignments[] = "time_zone = '{$config['timezone']}'";
            }
            $modes = $this->mysqlModes($config, $session);
            if ($modes !== null) {
                $assignments[] = "SESSION sql_mode = '{$modes}'";
            }
            if ($assignments !== []) {
                $statements[] = 'SET ' . \implode(', ', $assignments);
            }

            return $statements;
        }

        if (isset($config['isolation_level'])) {
            $statements[] = "set session characteristics as transaction isolation level {$config['isolation_level']}";
        }
        if (isset($config['charset'])) {
            $statements[] = "set names '{$config['charset']}'";
        }
        if (isset($config['timezone'])) {
            $statements[] = "set time zone '{$config['timezone']}'";
        }
        $searchPath = $config['search_path'] ?? $config['schema'] ?? null;
        if ($searchPath !== null) {
            $statements[] = 'set search_path to ' . self::formatSearchPath($searchPath);
        }
        if (isset($config['application_name'])) {
            $statements[] = "set application_name to '{$config['application_name']}'";
        }
        if (isset($config['synchronous_commit'])) {
            $statements[] = "set synchronous_commit to '{$config['synchronous_commit']}'";
        }

        return $statements;
    }

    /**
     * mysqlModes returns the sql_mode Laravel's MySqlConnector sets: 'modes', or the strict set ('strict' => true;
     * the server version, or the config's 'version', decides NO_AUTO_CREATE_USER), or NO_ENGINE_SUBSTITUTION for
     * 'strict' => false; null when neither is configured.
     *
     * @param array<string, mixed> $config
     */
    private function mysqlModes(array $config, TetherSession $session): ?string
    {
        if (isset($config['modes'])) {
            return \implode(',', $config['modes']);
        }
        if (!isset($config['strict'])) {
            return null;
        }
        if (!$config['strict']) {
            return 'NO_ENGINE_SUBSTITUTION';
        }
        $version = $config['version'] ?? $session->serverVersion();

        return \version_compare($version, '8.0.11') >= 0
            ? 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'
            : 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION';
    }

    /**
     * @param string|array<string> $searchPath
     */
    private static function formatSearchPath(string|array $searchPath): string
    {
        if (\is_string($searchPath)) {
            $searchPath = \preg_split('/\s*,\s*/', \trim($searchPath)) ?: [];
        }

        return \implode(', ', \array_map(static fn (string $schema): string => '"' . \trim($schema, '\'"') . '"', $searchPath));
    }

    /**
     * choosePersistence decides whether this connection uses the process's shared persistent socket (see the
     * class comment).
     *
     * @param array<string, mixed> $config
     * @param array<string, mixed> $options
     */
    private function choosePersistence(array $config, array $options): bool
    {
        if (isset($config['persistent'])) {
            return (bool) $config['persistent'];
        }
        $address = ($options['tcp'] ?? null) !== null ? 'tcp:' . $options['tcp'] : 'unix:' . ($options['socket'] ?? (\getenv('TETHER_SOCKET') ?: './var/tether.sock'));
        $key = $address . '|' . ($options['backend'] ?? '');
        $settings = [];
        foreach (['platform', 'isolation_level', 'charset', 'collation', 'timezone', 'modes', 'strict', 'version', 'search_path', 'schema', 'application_name', 'synchronous_commit'] as $name) {
            $settings[$name] = $config[$name] ?? null;
        }
        $fingerprint = \serialize($settings);
        $owner = self::$sharedSocketOwners[$key] ??= $fingerprint;

        return $owner === $fingerprint;
    }
}
