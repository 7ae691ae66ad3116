<?php

declare(strict_types=1);

/*
 * A plain PHP page (no Laravel application) that uses Illuminate\Database through tetherd with Capsule: the query
 * builder, the schema builder and Eloquent-ready globals. Configure it with the environment:
 *
 *   TETHER_SOCKET=/run/tether/tether.sock TETHER_BACKEND=mysql TETHER_PLATFORM=mysql php examples/capsule-page.php
 *
 * It prints, as JSON, the server's version, the session time zone it set, and a count of its table's rows.
 */

use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Schema\Blueprint;
use Tether\Laravel\TetherDriver;

// Composer's autoloader; without Composer, Debian's Illuminate packages and the two packages' own loaders.
if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    require __DIR__ . '/../tests/bootstrap.php';
}

$platform = getenv('TETHER_PLATFORM') ?: 'mysql';
$capsule = new Capsule();
TetherDriver::register($capsule->getContainer());          // the one line a non-Laravel app adds
$capsule->addConnection([
    'driver' => 'tether',
    'socket' => getenv('TETHER_SOCKET') ?: '/run/tether/tether.sock',
    'backend' => getenv('TETHER_BACKEND') ?: 'mysql',
    'platform' => $platform,
    'database' => '',                                        // empty: the backend's own, asked once when needed
    'prefix' => '',
    'charset' => $platform === 'mysql' ? 'utf8mb4' : 'utf8',
    'collation' => $platform === 'mysql' ? 'utf8mb4_unicode_ci' : null,
    'timezone' => '+00:00',
]);
$capsule->setAsGlobal();
$capsule->bootEloquent();

$schema = Capsule::schema();
if (!$schema->hasTable('page_visits')) {
    $schema->create('page_visits', static function (Blueprint $table): void {
        $table->id();
        $table->timestamp('seen_at')->useCurrent();
    });
}
Capsule::table('page_visits')->insert(['seen_at' => new DateTimeImmutable()]);

$zone = $platform === 'mysql' ? 'select @@session.time_zone as tz' : "select current_setting('TimeZone') as tz";
echo json_encode([
    'version' => Capsule::connection()->getPdo()->getAttribute(PDO::ATTR_SERVER_VERSION),
    'time_zone' => Capsule::selectOne($zone)->tz,
    'visits' => Capsule::table('page_visits')->count(),
]), "\n";
