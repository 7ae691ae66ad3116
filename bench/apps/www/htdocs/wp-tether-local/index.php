<?php

/*
 * bench/apps: the front page of the WordPress site "tether-local" (WordPress's own index.php and wp-blog-header.php, with
 * the benchmark's wp-config.php in place of Debian's, which would pick its config by host name from /etc/wordpress).
 */
define('BENCH_WP_SITE', 'tether-local');
define('WP_USE_THEMES', true);
require __DIR__ . '/../../wp/wp-config.php';
wp();
require ABSPATH . WPINC . '/template-loader.php';
