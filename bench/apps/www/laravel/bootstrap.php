<?php

declare(strict_types=1);

/*
 * bench/apps/www/laravel/bootstrap.php: the Laravel page of the benchmark, as an app using Illuminate\Database 8.83
 * (Debian's php-laravel-framework) through Capsule\Manager runs it: the models, the connection, and the page that
 * lists the 20 newest posts with their author, eager-loaded (two queries: the posts, then their authors by id).
 * The three pages htdocs/laravel-*.php differ only in the connection they pass to laravel_page().
 */

require_once '/usr/share/php/Illuminate/Database/autoload.php';
require_once '/usr/share/php/Illuminate/Events/autoload.php';

use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Eloquent\Model;
use Illuminate\Database\Eloquent\Relations\BelongsTo;

/** Author is a row of `authors`. */
final class Author extends Model
{
    protected $table = 'authors';
}

/** Post is a row of `posts`, written by one Author. */
final class Post extends Model
{
    protected $table = 'posts';

    public function author(): BelongsTo
    {
        return $this->belongsTo(Author::class);
    }
}

/** bench_config returns the run's config.php (written by bench/apps/run.sh). */
function bench_config(): array
{
    static $cfg = null;
    return $cfg ??= require __DIR__ . '/../config.php';
}

/**
 * laravel_mysql_connection returns the connection config of config/database.php's `mysql` entry, as a new Laravel
 * 8 application has it (charset utf8mb4, utf8mb4_unicode_ci, strict mode), for $user over the Unix socket (in the
 * two-host setting over TCP with TLS, config.php 'mysql_host'), with the extra PDO $options.
 */
function laravel_mysql_connection(string $user, array $options = []): array
{
    $cfg = bench_config();
    // The two-host setting (bench/web/twohost.sh): MariaDB over TCP through the relay, TLS with the server's CA.
    $where = isset($cfg['mysql_host'])
        ? ['host' => $cfg['mysql_host'], 'port' => $cfg['mysql_port']]
        : ['unix_socket' => $cfg['mysql_socket']];
    if (isset($cfg['mysql_host'])) {
        $options += [PDO::MYSQL_ATTR_SSL_CA => $cfg['mysql_tls_ca'], PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT => true];
    }
    return $where + [
        'driver' => 'mysql',
        'database' => $cfg['db_name'],
        'username' => $user,
        'password' => $user,
        'charset' => 'utf8mb4',
        'collation' => 'utf8mb4_unicode_ci',
        'prefix' => '',
        'prefix_indexes' => true,
        'strict' => true,
        'engine' => null,
        'options' => $options,
    ];
}

/**
 * laravel_page boots Eloquent on $connection ($register, when given, is called with the Capsule first: a driver's
 * registration) and prints the page: the 20 newest posts, each with its author's name.
 */
function laravel_page(array $connection, ?callable $register = null): void
{
    $capsule = new Capsule();
    if ($register !== null) {
        $register($capsule);
    }
    $capsule->addConnection($connection);
    $capsule->setAsGlobal();
    $capsule->bootEloquent();
    // Only bench.php's body check asks (?bench_queries=1): how many queries Eloquent ran, in an HTML comment.
    $countQueries = isset($_GET['bench_queries']);
    if ($countQueries) {
        $capsule->getConnection()->enableQueryLog();
    }

    $posts = Post::with('author')->latest()->limit(20)->get();

    $e = static fn (string $s): string => htmlspecialchars($s, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');
    echo "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Latest posts</title></head><body>\n<h1>Latest posts</h1>\n<ul>\n";
    foreach ($posts as $post) {
        printf("<li><a href=\"/posts/%d\">%s</a> by %s, %s</li>\n", $post->id, $e($post->title), $e($post->author->name),
            $post->created_at->format('Y-m-d H:i'));
    }
    echo "</ul>\n</body></html>\n";
    if ($countQueries) {
        echo '<!-- bench-queries: ' . count($capsule->getConnection()->getQueryLog()) . " -->\n";
    }
}
