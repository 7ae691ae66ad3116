<?php

declare(strict_types=1);

/*
 * bench/cli/seed-e1.php: the data of seed experiment E1 (docs/benchmarks.md), in the CQL model docs/cassandra.md
 * gives the seed's Thrift column families. Returned as a PHP array: load-cassandra.php writes it, the benchmarks read
 * it back (bench/cli/cassandra.php, bench/web/pages/*-cass-*.php) and check what they read against it.
 *
 *   keyspace test
 *   c1 (key text, column1 text, value blob, PRIMARY KEY (key, column1))
 *       rows a, b, c; 10 columns each: col01..col10
 *   s1 (key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column))
 *       rows a, b, c; super columns b1..b5, 5 columns each: c1..c5
 *
 * The reads of the seed: get('a') on c1 (the whole row, 10 cells) and get_super_column('a', 'b1') on s1 (5 cells).
 */

$c1 = [];
$s1 = [];
foreach (['a', 'b', 'c'] as $key) {
    for ($i = 1; $i <= 10; $i++) {
        $col = sprintf('col%02d', $i);
        $c1[$key][$col] = "value of $key/$col";
    }
    for ($sc = 1; $sc <= 5; $sc++) {
        for ($i = 1; $i <= 5; $i++) {
            $s1[$key]["b$sc"]["c$i"] = "value of $key/b$sc/c$i";
        }
    }
}

return [
    'keyspace' => 'test',
    'c1' => $c1,
    's1' => $s1,
    // The two reads of the seed, and what they return.
    'row_key' => 'a',
    'super_column' => 'b1',
];
