<?php

/*
 * bench/apps/setup-wordpress.php: installs the benchmark's WordPress into the run's database and adds its content.
 * Run by bench/apps/run.sh (CLI, any user), after MariaDB and config.php are in place:
 *
 *   php bench/apps/setup-wordpress.php CONFIG_PHP
 *
 * wp_install() as the installer runs it (site "Tether bench", the sample post, page and comment, the default theme
 * twentytwentythree), then 40 generated posts (POSTS below), one a day from 2026-01-02 09:00 (the sample post is
 * moved before them, to 2026-01-01), each in one of 5 categories, with 3 of 12 tags, 3 paragraphs and 0-3 approved
 * comments. Deterministic: bench.php knows the newest post's title (newest_post_title()). It writes through the
 * native site (WordPress's own wpdb); the tether site reads the same tables.
 */

declare(strict_types=1);

const POSTS = 40;

if ($argc !== 2) {
    fwrite(STDERR, "usage: php setup-wordpress.php CONFIG_PHP\n");
    exit(2);
}
$benchConfigFile = realpath($argv[1]);
$wwwDir = dirname($benchConfigFile);

// What a web request would have: wp-config.php builds WP_HOME from the host; no server listens on port 9, so the
// installer's pretty-permalink probe fails at once and the site keeps plain permalinks.
$_SERVER['HTTP_HOST'] = '127.0.0.1:9';
$_SERVER['REQUEST_URI'] = '/wp-native/wp-admin/install.php';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
$_SERVER['REQUEST_METHOD'] = 'GET';
define('BENCH_WP_SITE', 'native');
define('WP_INSTALLING', true);

/** wp_new_blog_notification is pluggable: the installer would mail the admin. */
function wp_new_blog_notification($blog_title, $blog_url, $user_id, $password): void
{
}

require $wwwDir . '/wp/wp-config.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';

$t0 = microtime(true);
$result = wp_install('Tether bench', 'admin', 'admin@example.invalid', false, '', 'bench-admin-password');
if (empty($result['user_id'])) {
    fwrite(STDERR, "setup-wordpress: wp_install failed\n");
    exit(1);
}
if (get_option('template') !== 'twentytwentythree') {
    fwrite(STDERR, 'setup-wordpress: the theme is ' . get_option('template') . ", want twentytwentythree (Debian's default)\n");
    exit(1);
}

// The sample post first in time.
$hello = get_page_by_path('hello-world', OBJECT, 'post');
if ($hello === null) {
    fwrite(STDERR, "setup-wordpress: the installer wrote no sample post\n");
    exit(1);
}
wp_update_post(['ID' => $hello->ID, 'post_date' => '2026-01-01 09:00:00', 'post_date_gmt' => '2026-01-01 09:00:00'], true);

$words = ['pool', 'socket', 'worker', 'latency', 'backend', 'replica', 'query', 'index', 'cache', 'connection',
    'daemon', 'request', 'schema', 'cursor', 'session', 'timeout', 'batch', 'shard', 'buffer', 'page'];
$categories = [];
foreach (['News', 'Reviews', 'Tutorials', 'Opinion', 'Releases'] as $name) {
    $term = wp_insert_term($name, 'category');
    if (is_wp_error($term)) {
        fwrite(STDERR, "setup-wordpress: category $name: " . $term->get_error_message() . "\n");
        exit(1);
    }
    $categories[] = (int) $term['term_id'];
}
$tags = [];
for ($t = 0; $t < 12; $t++) {
    $tags[] = 'tag-' . $words[$t];
}

for ($i = 1; $i <= POSTS; $i++) {
    $paragraphs = [];
    for ($p = 0; $p < 3; $p++) {
        $sentence = [];
        for ($w = 0; $w < 40; $w++) {
            $sentence[] = $words[($i * 7 + $p * 13 + $w * 3) % count($words)];
        }
        $paragraphs[] = "<!-- wp:paragraph -->\n<p>" . ucfirst(implode(' ', $sentence)) . ".</p>\n<!-- /wp:paragraph -->";
    }
    $date = gmdate('Y-m-d H:i:s', strtotime('2026-01-01 09:00:00 UTC') + $i * 86400);
    $id = wp_insert_post([
        'post_title' => bench_post_title($i),
        'post_content' => implode("\n\n", $paragraphs),
        'post_status' => 'publish',
        'post_author' => $result['user_id'],
        'post_date' => $date,
        'post_date_gmt' => $date,
        'post_category' => [$categories[$i % count($categories)]],
        'tags_input' => array_values(array_unique([$tags[$i % 12], $tags[($i * 5) % 12], $tags[($i * 7 + 3) % 12]])),
    ], true);
    if (is_wp_error($id)) {
        fwrite(STDERR, "setup-wordpress: post $i: " . $id->get_error_message() . "\n");
        exit(1);
    }
    for ($c = 0; $c < $i % 4; $c++) {
        wp_insert_comment([
            'comment_post_ID' => $id,
            'comment_author' => "Reader $c",
            'comment_author_email' => "reader$c@example.invalid",
            'comment_content' => "Comment $c on post $i: " . $words[($i + $c) % count($words)] . ' matters.',
            'comment_approved' => 1,
            'comment_date' => $date,
            'comment_date_gmt' => $date,
        ]);
    }
}

$count = (int) $GLOBALS['wpdb']->get_var("SELECT COUNT(*) FROM {$GLOBALS['wpdb']->posts} WHERE post_type = 'post' AND post_status = 'publish'");
if ($count !== POSTS + 1) {
    fwrite(STDERR, "setup-wordpress: $count published posts, want " . (POSTS + 1) . "\n");
    exit(1);
}
fprintf(STDERR, "  .. WordPress %s installed, %d posts, in %.1f s\n", $GLOBALS['wp_version'], $count, microtime(true) - $t0);

/** bench_post_title returns the title of generated post $i (bench.php checks the newest one on the front page). */
function bench_post_title(int $i): string
{
    return sprintf('Bench post %02d: notes on pooled connections', $i);
}
