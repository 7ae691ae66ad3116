<?php

declare(strict_types=1);

/*
 * bench/cli/load-cassandra.php: create seed E1's keyspace, tables and data (seed-e1.php) on a throwaway Cassandra,
 * and one login role per client of the benchmark, each allowed to read the keyspace. Used by bench/cli/run.sh and
 * bench/web/run.sh after start_cassandra (scripts/lib/cassandra.sh); speaks CQL through cql.php.
 *
 *   php bench/cli/load-cassandra.php HOST:PORT ADMIN_USER ADMIN_PASSWORD ROLE...
 *
 * Each ROLE is a name, and its password is the same (throwaway node, loopback only). It reads both of the seed's
 * reads back and exits 1 unless they return exactly the data. Prints one line on stderr.
 */

require __DIR__ . '/cql.php';

[, $addr, $adminUser, $adminPassword] = $argv + [null, null, null, null];
$roles = array_slice($argv, 4);
if ($addr === null || $adminPassword === null || !preg_match('/^(.+):(\d+)$/', $addr, $m)) {
    fwrite(STDERR, "usage: php load-cassandra.php HOST:PORT ADMIN_USER ADMIN_PASSWORD ROLE...\n");
    exit(2);
}
$t0 = hrtime(true);
$seed = require __DIR__ . '/seed-e1.php';
$ks = $seed['keyspace'];

$c = new CqlConnection($m[1], (int) $m[2]);
if ($c->startup()) {
    $c->authenticate($adminUser, $adminPassword);
}
$c->query("CREATE KEYSPACE IF NOT EXISTS $ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
$c->query("CREATE TABLE IF NOT EXISTS $ks.c1 (key text, column1 text, value blob, PRIMARY KEY (key, column1))");
$c->query("CREATE TABLE IF NOT EXISTS $ks.s1 (key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column))");
$cells = 0;
foreach ($seed['c1'] as $key => $columns) {
    foreach ($columns as $col => $value) {
        $c->query("INSERT INTO $ks.c1 (key, column1, value) VALUES (?, ?, ?)", [$key, $col, $value]);
        $cells++;
    }
}
foreach ($seed['s1'] as $key => $supers) {
    foreach ($supers as $sc => $columns) {
        foreach ($columns as $col => $value) {
            $c->query("INSERT INTO $ks.s1 (key, super_column, column, value) VALUES (?, ?, ?, ?)", [$key, $sc, $col, $value]);
            $cells++;
        }
    }
}
foreach ($roles as $role) {
    if (!preg_match('/^[a-z_][a-z0-9_]*$/', $role)) {
        fwrite(STDERR, "load-cassandra.php: bad role name $role\n");
        exit(2);
    }
    // Each role's password is hashed with bcrypt once here, and checked with bcrypt at every login.
    $c->query("CREATE ROLE IF NOT EXISTS $role WITH PASSWORD = '$role' AND LOGIN = true");
    $c->query("GRANT SELECT ON KEYSPACE $ks TO $role");
}

// Both reads of the seed must return the data, through a role of the benchmark when there is one.
$check = $c;
if ($roles) {
    $check = new CqlConnection($m[1], (int) $m[2]);
    if ($check->startup()) {
        $check->authenticate($roles[0], $roles[0]);
    }
}
$k = $seed['row_key'];
$sc = $seed['super_column'];
$row = array_column($check->query("SELECT column1, value FROM $ks.c1 WHERE key = ?", [$k]), 'value', 'column1');
$slice = array_column($check->query("SELECT column, value FROM $ks.s1 WHERE key = ? AND super_column = ?", [$k, $sc]), 'value', 'column');
if ($row !== $seed['c1'][$k] || $slice !== $seed['s1'][$k][$sc]) {
    fwrite(STDERR, "load-cassandra.php: reading back the seed's rows gave:\n" . json_encode([$row, $slice], JSON_PRETTY_PRINT) . "\n");
    exit(1);
}
$check->close();
$c->close();
fwrite(STDERR, sprintf("==> cassandra: loaded keyspace %s (c1, s1: %d cells) and %d role(s) in %.1f s\n",
    $ks, $cells, count($roles), (hrtime(true) - $t0) / 1e9));
