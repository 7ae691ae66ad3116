<?php

/*
 * bench/wpqueries/capture.php: renders the benchmark WordPress's front page once in the CLI (natively, WordPress's own
 * wpdb on mysqli, with SAVEQUERIES) and prints the statements it ran as JSON, one string per query, in order.
 *
 *   php bench/wpqueries/capture.php CONFIG_PHP > queries.json
 *
 * CONFIG_PHP is the config.php that bench/wpqueries/run.sh (or bench/apps/run.sh) writes next to the pages.
 */

declare(strict_types=1);

if ($argc !== 2) {
    fwrite(STDERR, "usage: php capture.php CONFIG_PHP\n");
    exit(2);
}
$wwwDir = dirname(realpath($argv[1]));
$_SERVER['HTTP_HOST'] = '127.0.0.1:9';
$_SERVER['REQUEST_URI'] = '/wp-native/';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
$_SERVER['REQUEST_METHOD'] = 'GET';
define('BENCH_WP_SITE', 'native');
define('WP_USE_THEMES', true);
define('SAVEQUERIES', true);
ob_start();
require $wwwDir . '/wp/wp-config.php';
wp();
require ABSPATH . WPINC . '/template-loader.php';
$page = ob_get_clean();
if (!str_contains($page, '</html>')) {
    fwrite(STDERR, "capture: the front page did not render\n");
    exit(1);
}
echo json_encode(array_map(static fn (array $q): string => $q[0], $GLOBALS['wpdb']->queries), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
