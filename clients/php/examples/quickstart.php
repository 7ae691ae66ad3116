<?php

/**
 * Quickstart: the Tether PHP client against tetherd on its embedded default (one SQLite backend, "main").
 *
 *   make run                                   # terminal 1, from the repo root: tetherd on ./var/tether.sock
 *   php clients/php/examples/quickstart.php    # terminal 2, from the repo root
 *
 * The socket is env TETHER_SOCKET if set, else ./var/tether.sock relative to the working directory.
 * Exits 0 when every step worked; any failure is an uncaught exception (exit 255).
 */

declare(strict_types=1);

use Tether\Batch\Operation;
use Tether\Client;
use Tether\Server\ServerException;
use Tether\Transaction;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$client = new Client(); // persistent socket, TETHER_SOCKET or ./var/tether.sock, tetherd's default backend
$client->ping();
echo "tetherd answers\n";

// execute() runs a statement for its effect; placeholders are always bound, never interpolated.
$client->execute('CREATE TABLE IF NOT EXISTS quickstart_notes (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, stars INTEGER)');
$inserted = $client->execute('INSERT INTO quickstart_notes (body, stars) VALUES (?, ?)', ['hello from PHP', 3]);
printf("inserted note %d (%d row)\n", $inserted->lastInsertId, $inserted->affectedRows);

// query() returns a list of rows, each column name => value.
$note = $client->queryOne('SELECT id, body, stars FROM quickstart_notes WHERE id = ?', [$inserted->lastInsertId]);
printf("read it back: %s\n", json_encode($note));

// transaction() commits when the callback returns and rolls back when it throws.
$total = $client->transaction(static function (Transaction $tx) use ($inserted): int {
    $tx->execute('UPDATE quickstart_notes SET stars = stars + 1 WHERE id = ?', [$inserted->lastInsertId]);
    $tx->execute('INSERT INTO quickstart_notes (body, stars) VALUES (?, ?)', ['written in a transaction', 5]);

    return (int) $tx->queryOne('SELECT SUM(stars) AS total FROM quickstart_notes')['total'];
});
printf("committed a transaction; stars in total: %d\n", $total);

try {
    $client->transaction(static function (Transaction $tx): void {
        $tx->execute('DELETE FROM quickstart_notes');
        throw new RuntimeException('changed my mind');
    });
} catch (RuntimeException $e) {
    printf("rolled back (%s); notes still there: %d\n", $e->getMessage(), $client->queryOne('SELECT COUNT(*) AS n FROM quickstart_notes')['n']);
}

// batch() sends several operations in one round trip; a failing one is returned as a ServerException, not thrown.
$results = $client->batch([
    'count' => Operation::query('SELECT COUNT(*) AS n FROM quickstart_notes'),
    'best' => Operation::query('SELECT body FROM quickstart_notes ORDER BY stars DESC LIMIT 1'),
    'typo' => Operation::query('SELEC 1'),
    'ping' => Operation::ping(),
]);
foreach ($results as $name => $result) {
    printf("batch %-5s => %s\n", $name, $result instanceof ServerException
        ? "error {$result->getErrorCode()}: {$result->getMessage()}"
        : json_encode($result));
}

// A SQL error is a ServerException with the protocol's code and the backend's own code.
try {
    $client->query('SELECT * FROM no_such_table');
} catch (ServerException $e) {
    printf("SQL error: %s (backend code %s): %s\n", $e->getErrorCode(), $e->getBackendCode() ?? '-', $e->getMessage());
}

echo "quickstart: OK\n";
