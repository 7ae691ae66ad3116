<?php

/*
 * bench/apps/www/wp/wp-config.php: the configuration of the benchmark's two WordPress sites, "native" (WordPress's
 * own wpdb on mysqli) and "tether" (the same, with Tether's db.php drop-in in its content directory). Both use the
 * same database and table prefix; only the way to the database differs. A third site, "tether-persistent", is the
 * tether one with TETHER_PERSISTENT (the drop-in keeps its socket to tetherd, and its session, across the requests of
 * a PHP worker; the drop-in's default is a socket per request); a fourth, "tether-cached", is the tether one with
 * TETHER_CACHE_TTL (reads answered from tetherd's shared result cache for up to 5 s, or until a write through
 * tetherd); a fifth, "tether-local", is tether-cached with TETHER_LOCAL_CACHE (those reads kept in APCu in the PHP
 * workers too, served without a call to tetherd while tetherd's table versions are unchanged). BENCH_WP_SITE names the site; the site's
 * front page (htdocs/wp-SITE/index.php) and bench/apps/setup-wordpress.php define it. WordPress itself is Debian's
 * package (/usr/share/wordpress), its themes and plugins shared by both content directories (symlinks).
 */

$bench = require __DIR__ . '/../config.php';
if (!defined('BENCH_WP_SITE') || !in_array(BENCH_WP_SITE, ['native', 'tether', 'tether-persistent', 'tether-cached', 'tether-local'], true)) {
    throw new LogicException('bench/apps wp-config.php: BENCH_WP_SITE must be native, tether, tether-persistent, tether-cached or tether-local');
}

define('DB_NAME', $bench['db_name']);
define('DB_USER', $bench['users']['wp_native']);
define('DB_PASSWORD', $bench['users']['wp_native']);
if (isset($bench['mysql_host'])) {
    // The two-host setting (bench/web/twohost.sh): TCP through the relay, with TLS. wpdb has no setting for a CA
    // (it calls mysqli_real_connect with MYSQL_CLIENT_FLAGS only): the server's certificate is not checked.
    define('DB_HOST', $bench['mysql_host'] . ':' . $bench['mysql_port']);
    define('MYSQL_CLIENT_FLAGS', MYSQLI_CLIENT_SSL | MYSQLI_CLIENT_SSL_DONT_VERIFY_SERVER_CERT);
} else {
    define('DB_HOST', 'localhost:' . $bench['mysql_socket']);
}
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
$table_prefix = 'wp_';

if (BENCH_WP_SITE !== 'native') {
    // The drop-in's settings (clients/php-wordpress/README.md): tetherd holds the credentials.
    define('TETHER_SOCKET', $bench['tether_socket']);
    define('TETHER_BACKEND', $bench['tether_backend']);
    define('TETHER_PERSISTENT', BENCH_WP_SITE === 'tether-persistent');
    if (BENCH_WP_SITE === 'tether-cached' || BENCH_WP_SITE === 'tether-local') {
        define('TETHER_CACHE_TTL', 5000);
    }
    define('TETHER_LOCAL_CACHE', BENCH_WP_SITE === 'tether-local');
}

define('WP_CONTENT_DIR', __DIR__ . '/content-' . (BENCH_WP_SITE === 'native' ? 'native' : 'tether'));
$bench_host = preg_replace('/[^A-Za-z0-9.:\-]/', '', $_SERVER['HTTP_HOST'] ?? '127.0.0.1');
define('WP_HOME', 'http://' . $bench_host . '/wp-' . BENCH_WP_SITE);
define('WP_SITEURL', WP_HOME);
define('WP_CONTENT_URL', WP_HOME . '/wp-content');

// As a site under load would run: cron from the system's crontab, no updates checked from the page, no debug.
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_AUTO_UPDATE_CORE', false);
define('WP_DEBUG', false);

// Fixed keys: the benchmark logs nobody in.
foreach (['AUTH_KEY', 'SECURE_AUTH_KEY', 'LOGGED_IN_KEY', 'NONCE_KEY', 'AUTH_SALT', 'SECURE_AUTH_SALT', 'LOGGED_IN_SALT', 'NONCE_SALT'] as $bench_key) {
    define($bench_key, "bench-apps-$bench_key-not-secret");
}
unset($bench, $bench_host, $bench_key);

define('ABSPATH', '/usr/share/wordpress/');
require_once ABSPATH . 'wp-settings.php';
