<?php

declare(strict_types=1);

/*
 * What unserialize()'s options cost a local-cache hit (Tether\Cache\LocalCache::fetch): a row of 3 columns, as
 * queryOne() keeps it, unserialized with no options, with allowed_classes false, and with the allow-list of the
 * client's two result classes that fetch() passes (APCu is shared by every pool of a php-fpm master). Per call, wall
 * time, one process.
 *
 *   php -d opcache.enable_cli=1 clients/php/tests/Benchmark/unserialize-options.php [--calls 1000000]
 */

$calls = (int) (getopt('', ['calls:'])['calls'] ?? 1000000);
$row = serialize(['id' => 1, 'name' => 'alice', 'score' => 42]);
$variants = [
    'no options' => null,
    'allowed_classes false' => ['allowed_classes' => false],
    'allowed_classes [NumericResult, ColumnarResult]' => ['allowed_classes' => ['Tether\\NumericResult', 'Tether\\ColumnarResult']],
];
foreach ($variants as $name => $options) {
    $t = hrtime(true);
    if ($options === null) {
        for ($i = 0; $i < $calls; $i++) {
            unserialize($row);
        }
    } else {
        for ($i = 0; $i < $calls; $i++) {
            unserialize($row, $options);
        }
    }
    printf("%-48s %.3f us\n", $name, (hrtime(true) - $t) / 1e3 / $calls);
}
