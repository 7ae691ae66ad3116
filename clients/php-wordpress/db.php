<?php
/**
 * Tether database drop-in for WordPress: copy or symlink this file to wp-content/db.php. WordPress then uses
 * Tether\WordPress\Wpdb (this package's src/) as $wpdb, which runs every query through tetherd.
 *
 * Configure it in wp-config.php (see README.md): TETHER_SOCKET, TETHER_BACKEND, and, when this file is copied
 * rather than symlinked, TETHER_WORDPRESS_AUTOLOAD (this package's autoload.php, or a Composer
 * vendor/autoload.php that loads tether/wordpress).
 */

declare(strict_types=1);

require_once defined('TETHER_WORDPRESS_AUTOLOAD') ? TETHER_WORDPRESS_AUTOLOAD : __DIR__ . '/autoload.php';

$GLOBALS['wpdb'] = Tether\WordPress\Wpdb::fromWordPressConfig();
