<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Illuminate\Contracts\Container\Container;
use Illuminate\Database\Connection;
use Tether\Laravel\Sql\SqlText;

/**
 * TetherDriver adds the `tether` driver to Illuminate\Database. register() does both halves Laravel needs:
 * - the container binding `db.connector.tether` (TetherConnector), which ConnectionFactory asks for the
 *   connection's "PDO" (a TetherSession, made lazily on first use and again on reconnect);
 * - Connection::resolverFor('tether'), which makes a TetherMySqlConnection or a TetherPostgresConnection by the
 *   config's 'platform', or, without one, by asking the server at once (one `SELECT version()`).
 *
 * TetherServiceProvider calls it in a Laravel application; elsewhere call it with the Capsule's container:
 * `TetherDriver::register($capsule->getContainer())`. Calling it again is harmless.
 */
final class TetherDriver
{
    public const NAME = 'tether';

    public static function register(Container $container): void
    {
        $container->bindIf('db.connector.' . self::NAME, static fn (): TetherConnector => new TetherConnector());

        Connection::resolverFor(self::NAME, static function ($connection, $database, $prefix, array $config): Connection {
            $platform = TetherConnector::configuredPlatform($config);
            if ($platform === null) {
                if ($connection instanceof \Closure) {
                    $connection = $connection();
                }
                if (!$connection instanceof TetherSession) {
                    throw new \LogicException(\sprintf('tether driver: the connector gave a %s, not a TetherSession; is db.connector.tether bound to another connector?', \get_debug_type($connection)));
                }
                $platform = $connection->platform();
            }

            return $platform === SqlText::PGSQL
                ? new TetherPostgresConnection($connection, (string) $database, (string) $prefix, $config)
                : new TetherMySqlConnection($connection, (string) $database, (string) $prefix, $config);
        });
    }
}
