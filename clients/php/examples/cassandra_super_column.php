<?php

/**
 * phpcassa's super column reads on Cassandra through tetherd, on the super column family s1 (a CQL table
 * (key, super_column, column, value)):
 *
 *   get_super_column('a', 'b1')            one super column's columns       scan prefix [key, super_column]
 *   get('a', super_column: 'b1', ['c1'])   one column of a super column      get key [key, super_column, column]
 *   multiget(['a', 'b'], super_column 'b1')   the same slice of several rows   a batch of scans: one round trip
 *
 *   php clients/php/examples/cassandra_super_column.php [ROW_KEY [SUPER_COLUMN [OTHER_ROW_KEY...]]]  # a b1 b
 *
 * Needs a tetherd with a Cassandra backend named "cass" (env TETHER_CASS_BACKEND) and the table s1 in the keyspace
 * "test" (env TETHER_CASS_KEYSPACE), as docs/cassandra.md creates it:
 *
 *   CREATE TABLE test.s1 (key text, super_column text, column text, value blob, PRIMARY KEY (key, super_column, column));
 *
 * The socket is env TETHER_SOCKET if set, else ./var/tether.sock. Exits 1 with a message when tetherd, the backend or
 * the table is missing.
 */

declare(strict_types=1);

use Tether\Batch\Operation;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Server\ServerException;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$backend = getenv('TETHER_CASS_BACKEND') ?: 'cass';
$table = (getenv('TETHER_CASS_KEYSPACE') ?: 'test') . '.s1';
$key = $argv[1] ?? 'a';
$superColumn = $argv[2] ?? 'b1';
$otherKeys = array_slice($argv, 3) ?: ['b'];

$client = new Client();
try {
    // get_super_column('a', 'b1'): column => value, in column order.
    $slice = [];
    foreach ($client->scanAll($table, prefix: [$key, $superColumn], columns: ['column', 'value'], backend: $backend) as $cell) {
        $slice[$cell['column']] = $cell['value'];
    }
    printf("get_super_column(%s, %s): %s\n", json_encode($key), json_encode($superColumn), show($slice));

    // One column of the super column: the full primary key.
    $first = array_key_first($slice);
    if ($first !== null) {
        $cell = $client->get($table, [$key, $superColumn, (string) $first], ['value'], $backend);
        printf("get(%s, super_column: %s, columns: [%s]): %s\n", json_encode($key), json_encode($superColumn), json_encode((string) $first), show($cell ?? []));
    }

    // multiget: the same super column of several rows, every slice read concurrently in one round trip.
    $ops = [];
    foreach ([$key, ...$otherKeys] as $k) {
        $ops[$k] = Operation::scan($table, prefix: [$k, $superColumn], columns: ['column', 'value'], backend: $backend);
    }
    foreach ($client->batch($ops) as $k => $result) {
        if ($result instanceof ServerException) {
            throw $result;
        }
        printf("multiget row %s, super column %s: %s\n", json_encode((string) $k), json_encode($superColumn), show(array_column($result->rows, 'value', 'column')));
    }
} catch (ServerException $e) {
    fail(match ($e->getErrorCode()) {
        ServerException::UNKNOWN_BACKEND => "tetherd has no backend named \"$backend\": configure a Cassandra backend in tetherd.toml "
            . "([backends.$backend] type = \"cassandra\"), or set TETHER_CASS_BACKEND",
        ServerException::UNKNOWN_TABLE => "table $table is missing: create it as docs/cassandra.md shows ({$e->getMessage()})",
        ServerException::UNSUPPORTED => "backend \"$backend\" is not a Cassandra backend: {$e->getMessage()}",
        default => "tetherd answered {$e->getErrorCode()}: {$e->getMessage()}",
    });
} catch (CommunicationException $e) {
    fail('tetherd is not reachable (is it running? TETHER_SOCKET=' . (getenv('TETHER_SOCKET') ?: './var/tether.sock') . "): {$e->getMessage()}");
}

/**
 * show prints column => value pairs, blobs as text when they are printable UTF-8, else as hex.
 *
 * @param array<string|int, ?string> $columns
 */
function show(array $columns): string
{
    $out = [];
    foreach ($columns as $name => $value) {
        $out[] = $name . ' = ' . ($value === null ? 'null'
            : (preg_match('/^[\P{C}\t]*$/u', $value) === 1 ? json_encode($value, JSON_UNESCAPED_UNICODE) : '0x' . bin2hex($value)));
    }

    return $out === [] ? '(none)' : '{' . implode(', ', $out) . '}';
}

function fail(string $message): never
{
    fwrite(STDERR, basename(__FILE__) . ": $message\n");
    exit(1);
}
