<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Events\Dispatcher;
use Illuminate\Support\ServiceProvider;
use Tether\Laravel\TetherMySqlConnection;
use Tether\Laravel\TetherPostgresConnection;
use Tether\Laravel\Tests\Support\Databases;

/**
 * ServiceProviderTest boots what a Laravel application boots for the database (config, events, Laravel's
 * DatabaseServiceProvider) plus the provider composer.json names for auto-discovery, with config/database.php's
 * connections as an application writes them, and runs queries through the `db` manager.
 */
final class ServiceProviderTest extends \PHPUnit\Framework\TestCase
{
    public function testTheAutoDiscoveredProviderServesConfiguredConnections(): void
    {
        $composer = \json_decode((string) \file_get_contents(\dirname(__DIR__, 2) . '/composer.json'), true, 16, \JSON_THROW_ON_ERROR);
        $providers = $composer['extra']['laravel']['providers'];
        self::assertCount(1, $providers);

        $app = new Container();
        $app->instance('config', new Repository(['database' => [
            'default' => 'mysql',
            'connections' => [
                'mysql' => Databases::tetherConfig(Databases::MYSQL),
                'pgsql' => Databases::tetherConfig(Databases::PGSQL),
            ],
        ]]));
        $app->instance('events', new Dispatcher($app));
        $booted = [];
        foreach ([DatabaseServiceProvider::class, ...$providers] as $class) {
            $provider = new $class($app);
            self::assertInstanceOf(ServiceProvider::class, $provider);
            $provider->register();
            $booted[] = $provider;
        }
        foreach ($booted as $provider) {
            if (\method_exists($provider, 'boot')) {
                $app->call([$provider, 'boot']);
            }
        }

        $db = $app->make('db');
        self::assertInstanceOf(TetherMySqlConnection::class, $db->connection());
        self::assertInstanceOf(TetherPostgresConnection::class, $db->connection('pgsql'));
        self::assertSame(Databases::env('TETHER_IT_DB'), $db->connection()->selectOne('select database() as name')->name);
        self::assertSame(Databases::env('TETHER_IT_DB'), $db->connection('pgsql')->selectOne('select current_database() as name')->name);
        $db->purge('mysql');
        $db->purge('pgsql');
    }
}
