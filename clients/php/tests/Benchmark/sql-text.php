<?php

/**
 * sql-text.php measures what Tether\Sql\SqlText's per-statement checks cost: setsSqlMode() (run on every statement
 * by the WordPress drop-in and the DBAL driver, and by the client for its escaping-mode cache),
 * transactionControl() (every statement of the WordPress, Laravel and DBAL integrations) and leadingWords(), on an
 * INSERT of about 290 bytes, one of 10 KB and one of 2.6 MB (a post body of quotes and backslashes in its string
 * literals), and on a short `SET sql_mode` statement. Each figure is microseconds per call, the best of --rounds
 * runs (on a shared machine other processes only ever add time). Not a test: run it by hand:
 *
 *     taskset -c 1 php -d opcache.enable_cli=1 clients/php/tests/Benchmark/sql-text.php [--src clients/php] [--rounds 21]
 *
 * --src is the client checkout to load (its autoload.php), so that two versions run under the same command.
 */

declare(strict_types=1);

$options = getopt('', ['src:', 'rounds:']);
require ($options['src'] ?? dirname(__DIR__, 2)) . '/autoload.php';
$rounds = (int) ($options['rounds'] ?? 21);

use Tether\Sql\SqlText;

/** insert returns an INSERT whose content literal holds about $bytes bytes of text with quotes and backslashes. */
$insert = static function (int $bytes): string {
    $text = \substr(\str_repeat("It\\'s a \\\"post\\\" with C:\\\\path and ''doubled'' quotes. ", (int) \ceil($bytes / 56)), 0, $bytes);

    return "INSERT INTO `wp_posts` (`post_author`, `post_date`, `post_content`, `post_title`, `post_status`) VALUES (1, '2024-02-29 23:59:59', '"
        . $text . "', 'Hello world', 'publish')";
};
$statements = [
    '290 B insert' => $insert(140),
    '10 KB insert' => $insert(10_000),
    '2.6 MB insert' => $insert(2_600_000),
    'SET sql_mode' => "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ZERO_DATE'",
];
$calls = [
    'setsSqlMode()' => static fn (string $sql) => SqlText::setsSqlMode($sql),
    "transactionControl('mysql')" => static fn (string $sql) => SqlText::transactionControl($sql, SqlText::MYSQL),
    'leadingWords(3)' => static fn (string $sql) => SqlText::leadingWords($sql, 3, SqlText::MYSQL),
];

$times = [];
for ($round = 0; $round < $rounds; $round++) {
    foreach ($statements as $kind => $sql) {
        $iterations = \max(3, (int) (2e6 / \strlen($sql)));
        foreach ($calls as $name => $fn) {
            $t = \hrtime(true);
            for ($k = 0; $k < $iterations; $k++) {
                $fn($sql);
            }
            $times[$name][$kind][] = (\hrtime(true) - $t) / 1e3 / $iterations;
        }
    }
}
\printf("PHP %s, opcache %s, JIT %s; best of %d rounds; us per call\n\n", PHP_VERSION, \ini_get('opcache.enable_cli') ? 'on' : 'off',
    (int) \ini_get('opcache.jit_buffer_size') > 0 ? 'on' : 'off', $rounds);
echo '| call | ' . \implode(' | ', \array_map(static fn (string $k) => \sprintf('%s (%d B)', $k, \strlen($statements[$k])), \array_keys($statements))) . " |\n";
echo '|---|' . \str_repeat('---:|', \count($statements)) . "\n";
foreach ($times as $name => $byKind) {
    echo '| ' . $name . ' | ' . \implode(' | ', \array_map(static fn (array $t) => \sprintf('%.2f', \min($t)), $byKind)) . " |\n";
}
