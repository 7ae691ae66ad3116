<?php

/*
 * bench/apps: a must-use plugin of both WordPress sites. Asked with ?bench_queries=1 (only bench.php's body check
 * does), the page ends with an HTML comment saying how many queries WordPress ran for it ($wpdb->num_queries, the
 * same count whatever wpdb is underneath). Under ab it does nothing.
 */
if (isset($_GET['bench_queries'])) {
    add_action('shutdown', static function (): void {
        echo "\n<!-- bench-queries: " . get_num_queries() . " -->\n";
    }, 0);
}
