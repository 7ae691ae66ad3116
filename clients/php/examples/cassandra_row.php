<?php

/**
 * Cassandra's Thrift-era reads through tetherd: phpcassa's get('a') on the column family c1 (a whole row), and
 * get_super_column('a', 'b1') on the super column family s1 (one super column's slice). Both are key-API scans.
 *
 *   php clients/php/examples/cassandra_row.php [ROW_KEY [SUPER_COLUMN]]     # defaults: a b1
 *
 * Needs a tetherd with a Cassandra backend named "cass" (env TETHER_CASS_BACKEND) and the tables c1 and s1 in the
 * keyspace "test" (env TETHER_CASS_KEYSPACE), as docs/cassandra.md creates them:
 *
 *   CREATE TABLE test.c1 (key text, column1 text, value blob, PRIMARY KEY (key, column1));
 *   CREATE TABLE test.s1 (key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column));
 *
 * The socket is env TETHER_SOCKET if set, else ./var/tether.sock. Exits 1 with a message when tetherd, the backend or
 * a table is missing.
 */

declare(strict_types=1);

use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Server\ServerException;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$backend = getenv('TETHER_CASS_BACKEND') ?: 'cass';
$keyspace = getenv('TETHER_CASS_KEYSPACE') ?: 'test';
$key = $argv[1] ?? 'a';
$superColumn = $argv[2] ?? 'b1';

$client = new Client();
try {
    // phpcassa: $c1->get('a') -- every column of row 'a', in column order.
    $row = $client->scan("$keyspace.c1", prefix: [$key], backend: $backend);
    printf("%s.c1 row %s: %d column(s)%s\n", $keyspace, json_encode($key), count($row), $row->hasMore() ? ' (more follow)' : '');
    foreach ($row as $cell) {
        printf("  %-20s = %s\n", $cell['column1'], printable($cell['value']));
    }

    // phpcassa: $s1->get_super_column('a', 'b1') -- the columns under one super column of row 'a'.
    $slice = $client->scan("$keyspace.s1", prefix: [$key, $superColumn], columns: ['column', 'value'], backend: $backend);
    printf("%s.s1 row %s, super column %s: %d column(s)\n", $keyspace, json_encode($key), json_encode($superColumn), count($slice));
    foreach ($slice as $cell) {
        printf("  %-20s = %s\n", $cell['column'], printable($cell['value']));
    }
} catch (ServerException $e) {
    fail(match ($e->getErrorCode()) {
        ServerException::UNKNOWN_BACKEND => "tetherd has no backend named \"$backend\": configure a Cassandra backend in tetherd.toml "
            . "([backends.$backend] type = \"cassandra\", dsn = \"cassandra://host:9042/$keyspace\"), or set TETHER_CASS_BACKEND",
        ServerException::UNKNOWN_TABLE => "a table is missing: create $keyspace.c1 and $keyspace.s1 as docs/cassandra.md shows ({$e->getMessage()})",
        ServerException::UNSUPPORTED => "backend \"$backend\" is not a Cassandra backend: {$e->getMessage()}",
        default => "tetherd answered {$e->getErrorCode()}: {$e->getMessage()}",
    });
} catch (CommunicationException $e) {
    fail('tetherd is not reachable (is it running? TETHER_SOCKET=' . (getenv('TETHER_SOCKET') ?: './var/tether.sock') . "): {$e->getMessage()}");
}

/** printable shows a blob as text when it is printable UTF-8, else as hex. */
function printable(?string $value): string
{
    if ($value === null) {
        return 'null';
    }

    return preg_match('/^[\P{C}\t]*$/u', $value) === 1 ? json_encode($value, JSON_UNESCAPED_UNICODE) : '0x' . bin2hex($value);
}

function fail(string $message): never
{
    fwrite(STDERR, basename(__FILE__) . ": $message\n");
    exit(1);
}
