<?php

/**
 * A point read of a random row out of 10,000 on Bigtable through tetherd: Client::get() on the row key, which
 * returns the row wide (`key`, then one `family:qualifier` column per column, each its latest value).
 *
 *   php clients/php/examples/bigtable_random_read.php           # read one random row
 *   php clients/php/examples/bigtable_random_read.php --load    # first write the 10,000 rows, then read one
 *
 * Environment (all optional):
 *   TETHER_BT_BACKEND  the Bigtable backend of tetherd (default "bt")
 *   TETHER_BT_TABLE    the table (default "bench"); it must exist with the column family TETHER_BT_FAMILY (an
 *                      emulator backend can create it: dsn "bigtable://p/i?emulator=inprocess&table=bench:f")
 *   TETHER_BT_FAMILY   the column family --load writes (default "f")
 *   TETHER_BT_ROWS     how many rows, keyed 1..N as decimal text (default 10000)
 *   TETHER_SOCKET      tetherd's socket (default ./var/tether.sock)
 *
 * Exits 1 with a message when tetherd, the backend, the table or the row is missing.
 */

declare(strict_types=1);

use Tether\Batch\Operation;
use Tether\Bigtable\Mutation;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\Server\ServerException;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$backend = getenv('TETHER_BT_BACKEND') ?: 'bt';
$table = getenv('TETHER_BT_TABLE') ?: 'bench';
$family = getenv('TETHER_BT_FAMILY') ?: 'f';
$rows = (int) (getenv('TETHER_BT_ROWS') ?: 10000);

$client = new Client();
try {
    if (in_array('--load', $argv, true)) {
        // 10,000 mutate_row operations, 500 per batch: tetherd runs each batch's operations concurrently.
        $start = hrtime(true);
        for ($first = 1; $first <= $rows; $first += 500) {
            $ops = [];
            for ($id = $first; $id < $first + 500 && $id <= $rows; $id++) {
                $ops[] = Operation::mutateRow($table, (string) $id, [
                    Mutation::set($family, 'name', "row $id"),
                    Mutation::set($family, 'score', (string) ($id * 7 % 1000)),
                ], $backend);
            }
            foreach ($client->batch($ops) as $result) {
                if ($result instanceof ServerException) {
                    throw $result;
                }
            }
        }
        printf("loaded %d rows into %s in %.2f s\n", $rows, $table, (hrtime(true) - $start) / 1e9);
    }

    $key = (string) random_int(1, $rows);
    $start = hrtime(true);
    $row = $client->get($table, $key, [], $backend);
    $micros = (hrtime(true) - $start) / 1e3;
    if ($row === null) {
        fail("table $table has no row $key: write the rows first (run with --load)");
    }
    printf("row %s of %s (%.0f us): %s\n", $key, $table, $micros, json_encode($row, JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE));
} catch (ServerException $e) {
    fail(match (true) {
        $e->getErrorCode() === ServerException::UNKNOWN_BACKEND => "tetherd has no backend named \"$backend\": configure a Bigtable backend in tetherd.toml "
            . "([backends.$backend] type = \"bigtable\", dsn = \"bigtable://PROJECT/INSTANCE\"), or set TETHER_BT_BACKEND",
        $e->getErrorCode() === ServerException::UNKNOWN_TABLE, $e->getBackendCode() === 'NotFound' => "table $table (with column family $family) does not exist on backend \"$backend\": {$e->getMessage()}",
        $e->getErrorCode() === ServerException::UNSUPPORTED => "backend \"$backend\" is not a Bigtable backend: {$e->getMessage()}",
        default => "tetherd answered {$e->getErrorCode()}: {$e->getMessage()}",
    });
} catch (CommunicationException $e) {
    fail('tetherd is not reachable (is it running? TETHER_SOCKET=' . (getenv('TETHER_SOCKET') ?: './var/tether.sock') . "): {$e->getMessage()}");
}

function fail(string $message): never
{
    fwrite(STDERR, basename(__FILE__) . ": $message\n");
    exit(1);
}
