<?php

declare(strict_types=1);

/*
 * bench/web/twohost-rows.php: what the two-host model measures (bench/web/twohost.sh, twohost.php; issue 20).
 *
 * rows, in the order shown:
 *   key, group, label   as in rows.php
 *   page    bench/web's page (pages/, with ?n=N) or bench/apps's (www/htdocs/), served from one document root
 *   role    baseline | tether
 *   expect  rows:N (render_row of ids 42.., bench/web's body check) | wordpress | laravel (bench/apps's checks)
 *   db      mariadb | postgres: where the row's connections are counted and whose CPU is the database host's
 *   user    the row's database user (a key of config.php's users): its connections are the row's conns
 *
 * rates: per group, the fixed rate (req/s) at which every row's p50 and p99 are measured: about a third of the
 * slowest row's saturated req/s at 0.5 ms (docs/benchmarks.md, 2026-11-27), so that no row of the group queues
 * (at 0.1 ms every row is faster still).
 *
 * targets: issue 20's, each a ratio of one row to another in the same phase: metric rps (req/s, web host
 * saturated), p50 (at the group's fixed rate) or db_cpu (database host CPU per page at -c 10); op and want what is
 * asked.
 */

$my = static fn (int $n): array => [
    ['key' => "mysqli-connect-n$n", 'group' => "mysql-n$n", 'label' => 'mysqli connect per request (TLS)', 'page' => "mysqli-connect-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'mariadb', 'user' => 'mysqli_connect_n'],
    ['key' => "mysqli-pconnect-n$n", 'group' => "mysql-n$n", 'label' => 'mysqli p: (TLS)', 'page' => "mysqli-pconnect-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'mariadb', 'user' => 'mysqli_pconnect_n'],
    ['key' => "pdo-persistent-n$n", 'group' => "mysql-n$n", 'label' => 'PDO persistent (TLS)', 'page' => "pdo-persistent-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'mariadb', 'user' => 'pdo_persistent_n'],
    ['key' => "tether-n$n", 'group' => "mysql-n$n", 'label' => $n === 1 ? 'Tether' : 'Tether, one call per read', 'page' => "tether-reads.php?n=$n", 'role' => 'tether', 'expect' => "rows:$n", 'db' => 'mariadb', 'user' => 'tetherd'],
];
$pg = static fn (int $n): array => [
    ['key' => "pg-connect-n$n", 'group' => "pg-n$n", 'label' => 'pg_connect per request (verify-full)', 'page' => "pg-connect-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'postgres', 'user' => 'pg_connect_n'],
    ['key' => "pg-pconnect-n$n", 'group' => "pg-n$n", 'label' => 'pg_pconnect (verify-full)', 'page' => "pg-pconnect-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'postgres', 'user' => 'pg_pconnect_n'],
    ['key' => "pgbouncer-n$n", 'group' => "pg-n$n", 'label' => 'pg_pconnect via PgBouncer on the web host', 'page' => "pgbouncer-pconnect-reads.php?n=$n", 'role' => 'baseline', 'expect' => "rows:$n", 'db' => 'postgres', 'user' => 'pgbouncer_pconnect_n'],
    ['key' => "tether-pg-n$n", 'group' => "pg-n$n", 'label' => $n === 1 ? 'Tether' : 'Tether, one call per read', 'page' => "tether-pg-reads.php?n=$n", 'role' => 'tether', 'expect' => "rows:$n", 'db' => 'postgres', 'user' => 'tetherd'],
];

return [
    'groups' => [
        'mysql-n1' => 'MariaDB, a page of one point read',
        'mysql-n20' => 'MariaDB, a page of 20 point reads',
        'pg-n1' => 'PostgreSQL, a page of one point read',
        'pg-n20' => 'PostgreSQL, a page of 20 point reads',
        'wp' => 'WordPress 6.1 front page (bench/apps)',
        'lv' => 'Laravel page, 20 posts with their authors (bench/apps)',
    ],
    'rates' => ['mysql-n1' => 100, 'mysql-n20' => 40, 'pg-n1' => 20, 'pg-n20' => 15, 'wp' => 4, 'lv' => 35],
    'rows' => [
        ...$my(1),
        ...$my(20),
        ['key' => 'tether-batch-n20', 'group' => 'mysql-n20', 'label' => 'Tether, one batch of 20', 'page' => 'tether-batch-reads.php?n=20', 'role' => 'tether', 'expect' => 'rows:20', 'db' => 'mariadb', 'user' => 'tetherd'],
        ['key' => 'tether-cached-n20', 'group' => 'mysql-n20', 'label' => 'Tether, one call per read, 95% from the cache', 'page' => 'tether-cached-reads.php?n=20', 'role' => 'tether', 'expect' => 'rows:20', 'db' => 'mariadb', 'user' => 'tetherd'],
        ['key' => 'tether-localcache-n20', 'group' => 'mysql-n20', 'label' => 'Tether, one call per read, 95% from the local cache (APCu in the worker)', 'page' => 'tether-localcache-reads.php?n=20', 'role' => 'tether', 'expect' => 'rows:20', 'db' => 'mariadb', 'user' => 'tetherd'],
        ...$pg(1),
        ...$pg(20),
        ['key' => 'tether-pg-batch-n20', 'group' => 'pg-n20', 'label' => 'Tether, one batch of 20', 'page' => 'tether-pg-batch-reads.php?n=20', 'role' => 'tether', 'expect' => 'rows:20', 'db' => 'postgres', 'user' => 'tetherd'],
        ['key' => 'wp-native', 'group' => 'wp', 'label' => "WordPress's own wpdb (mysqli, connect per request, TLS)", 'page' => 'wp-native/', 'role' => 'baseline', 'expect' => 'wordpress', 'db' => 'mariadb', 'user' => 'wp_native'],
        ['key' => 'wp-tether', 'group' => 'wp', 'label' => "Tether's drop-in", 'page' => 'wp-tether/', 'role' => 'tether', 'expect' => 'wordpress', 'db' => 'mariadb', 'user' => 'tetherd'],
        ['key' => 'wp-tether-cached', 'group' => 'wp', 'label' => "Tether's drop-in, result cache (TETHER_CACHE_TTL 5 s)", 'page' => 'wp-tether-cached/', 'role' => 'tether', 'expect' => 'wordpress', 'db' => 'mariadb', 'user' => 'tetherd'],
        ['key' => 'wp-tether-local', 'group' => 'wp', 'label' => "Tether's drop-in, result cache and local cache (TETHER_CACHE_TTL 5 s, TETHER_LOCAL_CACHE)", 'page' => 'wp-tether-local/', 'role' => 'tether', 'expect' => 'wordpress', 'db' => 'mariadb', 'user' => 'tetherd'],
        ['key' => 'lv-native', 'group' => 'lv', 'label' => 'PDO, connect per request (TLS): Laravel\'s default', 'page' => 'laravel-native.php', 'role' => 'baseline', 'expect' => 'laravel', 'db' => 'mariadb', 'user' => 'lv_native'],
        ['key' => 'lv-persistent', 'group' => 'lv', 'label' => 'PDO persistent (TLS)', 'page' => 'laravel-persistent.php', 'role' => 'baseline', 'expect' => 'laravel', 'db' => 'mariadb', 'user' => 'lv_persistent'],
        ['key' => 'lv-tether', 'group' => 'lv', 'label' => 'Tether driver', 'page' => 'laravel-tether.php', 'role' => 'tether', 'expect' => 'laravel', 'db' => 'mariadb', 'user' => 'tetherd'],
    ],
    'targets' => [
        ['label' => 'one read: Tether req/s over mysqli connect per request', 'row' => 'tether-n1', 'vs' => 'mysqli-connect-n1', 'metric' => 'rps', 'op' => '>=', 'want' => 2],
        ['label' => 'one read: Tether p50 over mysqli p:', 'row' => 'tether-n1', 'vs' => 'mysqli-pconnect-n1', 'metric' => 'p50', 'op' => '<=', 'want' => 1.0],
        ['label' => '20 reads, one call each: Tether p50 over p:', 'row' => 'tether-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'p50', 'op' => '<=', 'want' => 1.1],
        ['label' => '20 reads, one call each: Tether req/s over p: (with fewer conns than workers)', 'row' => 'tether-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'rps', 'op' => '>=', 'want' => 1.0],
        ['label' => '20 reads, one call each: Tether req/s over mysqli connect per request', 'row' => 'tether-n20', 'vs' => 'mysqli-connect-n20', 'metric' => 'rps', 'op' => '>=', 'want' => 2],
        ['label' => '20 reads, one batch: Tether p50 over p:', 'row' => 'tether-batch-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'p50', 'op' => '<=', 'want' => 0.25],
        ['label' => '20 reads, 95% from the cache: Tether p50 over p:', 'row' => 'tether-cached-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'p50', 'op' => '<=', 'want' => 0.25],
        ['label' => '20 reads, 95% from the local cache: Tether p50 over p:', 'row' => 'tether-localcache-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'p50', 'op' => '<=', 'want' => 0.25],
        ['label' => '20 reads, one call each: database host CPU per page, Tether over p:', 'row' => 'tether-n20', 'vs' => 'mysqli-pconnect-n20', 'metric' => 'db_cpu', 'op' => '<=', 'want' => 0.8],
        ['label' => 'WordPress: Tether req/s over its own connection', 'row' => 'wp-tether', 'vs' => 'wp-native', 'metric' => 'rps', 'op' => '>=', 'want' => 1.2],
        ['label' => 'WordPress with the cache: p50 over native', 'row' => 'wp-tether-cached', 'vs' => 'wp-native', 'metric' => 'p50', 'op' => '<=', 'want' => 0.6],
        ['label' => 'WordPress with the local cache: p50 over native', 'row' => 'wp-tether-local', 'vs' => 'wp-native', 'metric' => 'p50', 'op' => '<=', 'want' => 0.6],
        ['label' => 'Laravel: Tether req/s over native PDO', 'row' => 'lv-tether', 'vs' => 'lv-native', 'metric' => 'rps', 'op' => '>=', 'want' => 1.2],
        ['label' => 'PostgreSQL, one read: Tether req/s over PgBouncer', 'row' => 'tether-pg-n1', 'vs' => 'pgbouncer-n1', 'metric' => 'rps', 'op' => '>=', 'want' => 1.0],
        ['label' => 'PostgreSQL, 20 reads: Tether req/s over PgBouncer', 'row' => 'tether-pg-n20', 'vs' => 'pgbouncer-n20', 'metric' => 'rps', 'op' => '>=', 'want' => 1.0],
    ],
];
