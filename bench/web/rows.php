<?php

declare(strict_types=1);

/*
 * bench/web/rows.php: what the web benchmark measures. bench.php iterates these lists; adding an experiment is a
 * matter of adding a page in pages/ and a row here (bench/web/README.md, "Adding a row").
 *
 * groups: rows compared with each other. Each row's "x best baseline" is its req/s over that of the fastest
 * baseline row of its group, in the same round, server and load setting.
 *
 * rows, in the order they are shown:
 *   key      unique id (results, plots)
 *   group    a key of groups
 *   label    what the tables and plots call it
 *   page     file in pages/, with its query string if any (?n=20); requested as is under load, with id=42 added for
 *            the body check
 *   role     baseline  - what PHP sites do today; the best of them is the group's yardstick
 *            tether    - through tetherd
 *            reference - kept for comparison (the Go service of seeds E1, E2); the yardstick only of a group
 *                        without baselines (Cassandra, Bigtable: PHP has no maintained native client for them)
 *   expect   the body the check wants: empty | pong | one ("1\n") | row (render_row of id 42) |
 *            rows:N (render_row of ids 42 .. 42+N-1, one line each) |
 *            cass-row, cass-super (render_cells of seed E1's two reads, bench/cli/seed-e1.php)
 *   needs    services the page talks to (run.sh starts them; the driver checks they are up):
 *            mariadb | postgres | pgbouncer | tetherd | goservice | cassandra | bigtable (its emulator)
 *   conns    [database, user key] whose connections to count (user keys: config.php 'users'), or null; on
 *            Cassandra counted in system_views.clients, so they include a driver's control connection
 *   daemon   the process between PHP and the database whose CPU and RSS are reported, or null
 *   db       the database whose CPU per request is reported, or null
 */

/*
 * Pages of N point reads by primary key, N = 1, 5 and 20 (a WordPress or Laravel page runs 10-50 queries, so what
 * each one costs adds up): one page per way in, requested with ?n=N, one group per database and N. Each way in has
 * its own database user, shared by its three rows: a worker keeps one persistent link per user, as a site's would.
 */
$reads = static fn (int $n): string => $n === 1 ? 'one point read' : "$n point reads";
$mysqlReads = static fn (int $n): array => [
    ['key' => "mysqli-connect-n$n", 'group' => "mysql-n$n", 'label' => 'mysqli connect per request, plain queries', 'page' => "mysqli-connect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_connect_n'], 'daemon' => null, 'db' => 'mariadb'],
    ['key' => "mysqli-pconnect-n$n", 'group' => "mysql-n$n", 'label' => 'mysqli p:, plain queries', 'page' => "mysqli-pconnect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_pconnect_n'], 'daemon' => null, 'db' => 'mariadb'],
    ['key' => "pdo-persistent-n$n", 'group' => "mysql-n$n", 'label' => 'PDO persistent, one statement (emulated prepare)', 'page' => "pdo-persistent-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['mariadb'], 'conns' => ['mariadb', 'pdo_persistent_n'], 'daemon' => null, 'db' => 'mariadb'],
    ['key' => "tether-n$n", 'group' => "mysql-n$n", 'label' => 'Tether, one call per read', 'page' => "tether-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],
    ['key' => "tether-batch-n$n", 'group' => "mysql-n$n", 'label' => 'Tether, one batch', 'page' => "tether-batch-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],
    ['key' => "tether-cached-n$n", 'group' => "mysql-n$n", 'label' => 'Tether, one call per read, result cache (95% hits)', 'page' => "tether-cached-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],
    ['key' => "tether-localcache-n$n", 'group' => "mysql-n$n", 'label' => 'Tether, one call per read, local cache in APCu (95% hits)', 'page' => "tether-localcache-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],
    ['key' => "tether-cached-batch-n$n", 'group' => "mysql-n$n", 'label' => 'Tether, one batch, result cache (95% hits)', 'page' => "tether-cached-batch-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],
];
$pgReads = static fn (int $n): array => [
    ['key' => "pg-connect-n$n", 'group' => "pg-n$n", 'label' => 'pg_connect per request', 'page' => "pg-connect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['postgres'], 'conns' => ['postgres', 'pg_connect_n'], 'daemon' => null, 'db' => 'postgres'],
    ['key' => "pg-pconnect-n$n", 'group' => "pg-n$n", 'label' => 'pg_pconnect', 'page' => "pg-pconnect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['postgres'], 'conns' => ['postgres', 'pg_pconnect_n'], 'daemon' => null, 'db' => 'postgres'],
    ['key' => "pgbouncer-connect-n$n", 'group' => "pg-n$n", 'label' => 'pg_connect per request via pgbouncer', 'page' => "pgbouncer-connect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['pgbouncer', 'postgres'], 'conns' => ['postgres', 'pgbouncer_connect_n'], 'daemon' => 'pgbouncer', 'db' => 'postgres'],
    ['key' => "pgbouncer-pconnect-n$n", 'group' => "pg-n$n", 'label' => 'pg_pconnect via pgbouncer', 'page' => "pgbouncer-pconnect-reads.php?n=$n", 'role' => 'baseline',
        'expect' => "rows:$n", 'needs' => ['pgbouncer', 'postgres'], 'conns' => ['postgres', 'pgbouncer_pconnect_n'], 'daemon' => 'pgbouncer', 'db' => 'postgres'],
    ['key' => "tether-pg-n$n", 'group' => "pg-n$n", 'label' => 'Tether, one call per read', 'page' => "tether-pg-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'postgres'], 'conns' => ['postgres', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'postgres'],
    ['key' => "tether-pg-batch-n$n", 'group' => "pg-n$n", 'label' => 'Tether, one batch', 'page' => "tether-pg-batch-reads.php?n=$n", 'role' => 'tether',
        'expect' => "rows:$n", 'needs' => ['tetherd', 'postgres'], 'conns' => ['postgres', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'postgres'],
];

return [
    'groups' => [
        'floor' => 'Floor: an empty page, and a bare round trip to a local daemon',
        'mysql-select1' => 'MariaDB, SELECT 1 (seed E3)',
        'mysql-point' => 'MariaDB, point read by primary key from 10,000 rows (seeds E2, E3)',
        'pg-point' => 'PostgreSQL, point read by primary key from 10,000 rows',
        'mysql-n1' => "MariaDB, {$reads(1)} per page by primary key (random distinct ids)",
        'mysql-n5' => "MariaDB, {$reads(5)} per page by primary key (random distinct ids)",
        'mysql-n20' => "MariaDB, {$reads(20)} per page by primary key (random distinct ids)",
        'pg-n1' => "PostgreSQL, {$reads(1)} per page by primary key (random distinct ids)",
        'pg-n5' => "PostgreSQL, {$reads(5)} per page by primary key (random distinct ids)",
        'pg-n20' => "PostgreSQL, {$reads(20)} per page by primary key (random distinct ids)",
        'cass-row' => "Cassandra, get('a'): a row of 10 columns (seed E1)",
        'cass-super' => "Cassandra, get_super_column('a', 'b1'): a slice of 5 columns (seed E1)",
        'bt-point' => 'Bigtable (emulator), random single-row read from 10,000 rows (seed E2)',
    ],

    'rows' => [
        ['key' => 'empty', 'group' => 'floor', 'label' => 'empty page', 'page' => 'empty.php', 'role' => 'baseline',
            'expect' => 'empty', 'needs' => [], 'conns' => null, 'daemon' => null, 'db' => null],
        ['key' => 'tether-ping', 'group' => 'floor', 'label' => 'Tether ping (PHP client)', 'page' => 'tether-ping.php', 'role' => 'tether',
            'expect' => 'pong', 'needs' => ['tetherd'], 'conns' => null, 'daemon' => 'tetherd', 'db' => null],
        ['key' => 'tether-ping-raw', 'group' => 'floor', 'label' => 'Tether ping (raw frames, no client)', 'page' => 'tether-ping-raw.php', 'role' => 'tether',
            'expect' => 'pong', 'needs' => ['tetherd'], 'conns' => null, 'daemon' => 'tetherd', 'db' => null],
        ['key' => 'go-ping-keepalive', 'group' => 'floor', 'label' => 'Go service /ping (keep-alive)', 'page' => 'go-ping-keepalive.php', 'role' => 'reference',
            'expect' => 'pong', 'needs' => ['goservice'], 'conns' => null, 'daemon' => 'goservice', 'db' => null],

        ['key' => 'mysqli-connect-select1', 'group' => 'mysql-select1', 'label' => 'mysqli connect per request', 'page' => 'mysqli-connect-select1.php', 'role' => 'baseline',
            'expect' => 'one', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_connect'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'mysqli-pconnect-select1', 'group' => 'mysql-select1', 'label' => 'mysqli p: (persistent)', 'page' => 'mysqli-pconnect-select1.php', 'role' => 'baseline',
            'expect' => 'one', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_pconnect'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'pdo-persistent-select1', 'group' => 'mysql-select1', 'label' => 'PDO persistent', 'page' => 'pdo-persistent-select1.php', 'role' => 'baseline',
            'expect' => 'one', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'pdo_persistent'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'tether-select1', 'group' => 'mysql-select1', 'label' => 'Tether', 'page' => 'tether-select1.php', 'role' => 'tether',
            'expect' => 'one', 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],

        ['key' => 'mysqli-connect-point', 'group' => 'mysql-point', 'label' => 'mysqli connect per request, prepared', 'page' => 'mysqli-connect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_connect'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'mysqli-pconnect-point', 'group' => 'mysql-point', 'label' => 'mysqli p:, prepared', 'page' => 'mysqli-pconnect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'mysqli_pconnect'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'pdo-persistent-point', 'group' => 'mysql-point', 'label' => 'PDO persistent (emulated prepare)', 'page' => 'pdo-persistent-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['mariadb'], 'conns' => ['mariadb', 'pdo_persistent'], 'daemon' => null, 'db' => 'mariadb'],
        ['key' => 'go-point-curl', 'group' => 'mysql-point', 'label' => 'Go service (curl, new connection per page)', 'page' => 'go-point-curl.php', 'role' => 'reference',
            'expect' => 'row', 'needs' => ['goservice', 'mariadb'], 'conns' => ['mariadb', 'goservice'], 'daemon' => 'goservice', 'db' => 'mariadb'],
        ['key' => 'go-point-keepalive', 'group' => 'mysql-point', 'label' => 'Go service (persistent keep-alive socket)', 'page' => 'go-point-keepalive.php', 'role' => 'reference',
            'expect' => 'row', 'needs' => ['goservice', 'mariadb'], 'conns' => ['mariadb', 'goservice'], 'daemon' => 'goservice', 'db' => 'mariadb'],
        ['key' => 'tether-point', 'group' => 'mysql-point', 'label' => 'Tether', 'page' => 'tether-point.php', 'role' => 'tether',
            'expect' => 'row', 'needs' => ['tetherd', 'mariadb'], 'conns' => ['mariadb', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'mariadb'],

        ['key' => 'pg-connect-point', 'group' => 'pg-point', 'label' => 'pg_connect per request', 'page' => 'pg-connect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['postgres'], 'conns' => ['postgres', 'pg_connect'], 'daemon' => null, 'db' => 'postgres'],
        ['key' => 'pg-pconnect-point', 'group' => 'pg-point', 'label' => 'pg_pconnect', 'page' => 'pg-pconnect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['postgres'], 'conns' => ['postgres', 'pg_pconnect'], 'daemon' => null, 'db' => 'postgres'],
        ['key' => 'pgbouncer-connect-point', 'group' => 'pg-point', 'label' => 'pg_connect per request via pgbouncer', 'page' => 'pgbouncer-connect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['pgbouncer', 'postgres'], 'conns' => ['postgres', 'pgbouncer_connect'], 'daemon' => 'pgbouncer', 'db' => 'postgres'],
        ['key' => 'pgbouncer-pconnect-point', 'group' => 'pg-point', 'label' => 'pg_pconnect via pgbouncer', 'page' => 'pgbouncer-pconnect-point.php', 'role' => 'baseline',
            'expect' => 'row', 'needs' => ['pgbouncer', 'postgres'], 'conns' => ['postgres', 'pgbouncer_pconnect'], 'daemon' => 'pgbouncer', 'db' => 'postgres'],
        ['key' => 'tether-pg-point', 'group' => 'pg-point', 'label' => 'Tether', 'page' => 'tether-pg-point.php', 'role' => 'tether',
            'expect' => 'row', 'needs' => ['tetherd', 'postgres'], 'conns' => ['postgres', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'postgres'],

        ...$mysqlReads(1), ...$mysqlReads(5), ...$mysqlReads(20),
        ...$pgReads(1), ...$pgReads(5), ...$pgReads(20),

        ['key' => 'go-cass-row', 'group' => 'cass-row', 'label' => 'Go service (persistent keep-alive socket)', 'page' => 'go-cass-row.php', 'role' => 'reference',
            'expect' => 'cass-row', 'needs' => ['goservice', 'cassandra'], 'conns' => ['cassandra', 'goservice'], 'daemon' => 'goservice', 'db' => 'cassandra'],
        ['key' => 'tether-cass-row', 'group' => 'cass-row', 'label' => 'Tether', 'page' => 'tether-cass-row.php', 'role' => 'tether',
            'expect' => 'cass-row', 'needs' => ['tetherd', 'cassandra'], 'conns' => ['cassandra', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'cassandra'],

        ['key' => 'go-cass-super', 'group' => 'cass-super', 'label' => 'Go service (persistent keep-alive socket)', 'page' => 'go-cass-super.php', 'role' => 'reference',
            'expect' => 'cass-super', 'needs' => ['goservice', 'cassandra'], 'conns' => ['cassandra', 'goservice'], 'daemon' => 'goservice', 'db' => 'cassandra'],
        ['key' => 'tether-cass-super', 'group' => 'cass-super', 'label' => 'Tether', 'page' => 'tether-cass-super.php', 'role' => 'tether',
            'expect' => 'cass-super', 'needs' => ['tetherd', 'cassandra'], 'conns' => ['cassandra', 'tetherd'], 'daemon' => 'tetherd', 'db' => 'cassandra'],

        ['key' => 'go-bt-point', 'group' => 'bt-point', 'label' => 'Go service (persistent keep-alive socket)', 'page' => 'go-bt-point.php', 'role' => 'reference',
            'expect' => 'row', 'needs' => ['goservice', 'bigtable'], 'conns' => null, 'daemon' => 'goservice', 'db' => 'bigtable'],
        ['key' => 'tether-bt-point', 'group' => 'bt-point', 'label' => 'Tether', 'page' => 'tether-bt-point.php', 'role' => 'tether',
            'expect' => 'row', 'needs' => ['tetherd', 'bigtable'], 'conns' => null, 'daemon' => 'tetherd', 'db' => 'bigtable'],
    ],

    /*
     * targets: judged in every server and load setting; a target may name the servers it applies to.
     *   row / vs   req/s of row over req/s of vs (the best of vs when it lists several), per round, median
     *   min        the ratio wanted
     *   max_conns  also: the row's backend connections at peak must not exceed tetherd's pool size
     */
    'targets' => [
        ['label' => 'Tether ping page >= 65% of the empty page', 'row' => 'tether-ping', 'vs' => ['empty'], 'min' => 0.65, 'servers' => ['apache']],
        ['label' => 'Tether point read >= 1.3x mysqli p:', 'row' => 'tether-point', 'vs' => ['mysqli-pconnect-point'], 'min' => 1.3, 'max_conns' => true],
        ['label' => 'Tether point read >= 2x mysqli connect per request', 'row' => 'tether-point', 'vs' => ['mysqli-connect-point'], 'min' => 2.0],
        ['label' => 'Tether PostgreSQL point read >= pgbouncer', 'row' => 'tether-pg-point', 'vs' => ['pgbouncer-connect-point', 'pgbouncer-pconnect-point'], 'min' => 1.0],
        ['label' => '20 reads a page: Tether, one call per read >= mysqli connect per request', 'row' => 'tether-n20', 'vs' => ['mysqli-connect-n20'], 'min' => 1.0],
        ['label' => '20 reads a page: Tether, one call per read >= 0.85x the best of mysqli p: and PDO persistent', 'row' => 'tether-n20',
            'vs' => ['mysqli-pconnect-n20', 'pdo-persistent-n20'], 'min' => 0.85],
        ['label' => '20 reads a page: Tether, one batch >= 1.3x the best of mysqli p: and PDO persistent', 'row' => 'tether-batch-n20',
            'vs' => ['mysqli-pconnect-n20', 'pdo-persistent-n20'], 'min' => 1.3],
        ['label' => '20 reads a page, 95% from the result cache: Tether >= 2x the best of mysqli connect, mysqli p: and PDO persistent', 'row' => 'tether-cached-n20',
            'vs' => ['mysqli-connect-n20', 'mysqli-pconnect-n20', 'pdo-persistent-n20'], 'min' => 2.0],
        ['label' => '20 reads a page, 95% from the result cache, in one batch: Tether >= 2x the best of mysqli connect, mysqli p: and PDO persistent', 'row' => 'tether-cached-batch-n20',
            'vs' => ['mysqli-connect-n20', 'mysqli-pconnect-n20', 'pdo-persistent-n20'], 'min' => 2.0],
        ['label' => '20 PostgreSQL reads a page: Tether, one call per read >= pgbouncer', 'row' => 'tether-pg-n20',
            'vs' => ['pgbouncer-connect-n20', 'pgbouncer-pconnect-n20'], 'min' => 1.0],
        ['label' => '20 PostgreSQL reads a page: Tether, one call per read >= 0.85x pg_pconnect', 'row' => 'tether-pg-n20', 'vs' => ['pg-pconnect-n20'], 'min' => 0.85],
    ],

    /*
     * probes: the latency of the read inside the page (seed E2: "latency of each read"), measured after the rounds
     * with one request at a time, each page reporting its own read time (timed() in pages/lib.php: hrtime from
     * getting the client to holding the decoded row). Rows are requested in turn, with random ids. Each probe also
     * times a Tether ping the same way (tether-ping: the PHP client's ping, from getting the client to holding the
     * pong), the unit of the hop targets below.
     *   steady  reads per row from the web server's long-lived workers; a read by a worker that had not yet served
     *           that page in the probe is left out (it would be a first read)
     *   fresh   first reads per row in freshly started workers (php-fpm pool with pm.max_requests = 1; an apache2
     *           with MaxConnectionsPerChild 1), one new connection per request; every answer must come from a
     *           worker pid seen nowhere else. 0: none
     * --quick takes a tenth of each (at least 10).
     */
    'probes' => [
        'cass' => ['label' => 'Cassandra reads (seed E1)', 'rows' => ['tether-cass-row', 'go-cass-row', 'tether-cass-super', 'go-cass-super', 'tether-ping'],
            'steady' => 500, 'fresh' => 0],
        'bt' => ['label' => 'Bigtable random single-row read (seed E2)', 'rows' => ['tether-bt-point', 'go-bt-point', 'tether-ping'],
            'steady' => 1000, 'fresh' => 150],
    ],

    /*
     * probe_targets: judged on each server's probe results, from steady mean read latencies (lower is better):
     *   fresh  the fresh mean of row over its steady mean
     *   hop    the hop's own cost, in pings: (mean of row - mean of held's database time) / mean of ping. held is
     *          the same read by a client held in a process: the Go service's own database call (its Server-Timing,
     *          X-Db-Us), made with the Go library tetherd uses for that backend; ping the Tether ping timed the
     *          same way inside the page. So the hop is what a Tether read costs over that held client: the PHP
     *          client's encode and decode, the socket round trip, tetherd's dispatch
     *   max    the ratio wanted, at most
     * Seeds E1 and E2 first set "a Tether page >= 1.5x the Go service's page" and "a Tether read <= 1/2 of the Go
     * service's": both pay the same Cassandra or Bigtable call, and a hop of about the same cost, so issue 20
     * replaced them by the hop's own cost.
     */
    'probe_targets' => [
        ['label' => "E1: hop of a Tether Cassandra row read, get('a'), <= 2 pings", 'kind' => 'hop', 'row' => 'tether-cass-row',
            'held' => 'go-cass-row', 'ping' => 'tether-ping', 'max' => 2.0],
        ['label' => "E1: hop of a Tether Cassandra super column read, get_super_column('a', 'b1'), <= 2 pings", 'kind' => 'hop',
            'row' => 'tether-cass-super', 'held' => 'go-cass-super', 'ping' => 'tether-ping', 'max' => 2.0],
        ['label' => 'E2: hop of a Tether Bigtable read <= 2 pings', 'kind' => 'hop', 'row' => 'tether-bt-point', 'held' => 'go-bt-point',
            'ping' => 'tether-ping', 'max' => 2.0],
        ['label' => "E2: a fresh worker's first Tether read <= 2x the steady state (means)", 'kind' => 'fresh', 'row' => 'tether-bt-point', 'max' => 2.0],
    ],

    /* settings: ab's load, in the seeds' terms: -c 10 and -c 100, each without and with keep-alive (-k). */
    'settings' => [
        'c10' => ['c' => 10, 'k' => false, 'label' => '-c 10'],
        'c10k' => ['c' => 10, 'k' => true, 'label' => '-c 10 -k'],
        'c100' => ['c' => 100, 'k' => false, 'label' => '-c 100'],
        'c100k' => ['c' => 100, 'k' => true, 'label' => '-c 100 -k'],
    ],

    /*
     * group_settings: the groups measured in only some of the settings (the others: in all). The pages of N reads
     * run only at -c 10, with and without -k: so their 33 rows add about 13 minutes to the full run (25 in all four
     * settings).
     */
    'group_settings' => array_fill_keys(['mysql-n1', 'mysql-n5', 'mysql-n20', 'pg-n1', 'pg-n5', 'pg-n20'], ['c10', 'c10k']),
];
