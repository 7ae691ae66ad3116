<?php

/**
 * A lookup join run by tetherd in one round trip: users, and their group looked up by key in another table, or on
 * another backend, with the result in column-oriented form.
 *
 *   make run                                # terminal 1, from the repo root: tetherd on its embedded SQLite default
 *   php clients/php/examples/join.php       # terminal 2, from the repo root
 *
 * With env TETHER_JOIN_RIGHT_BACKEND the groups table lives on that backend instead (a SQL one: this example
 * creates it there), e.g. users in SQLite and groups in MariaDB. The socket is env TETHER_SOCKET if set, else
 * ./var/tether.sock. Exits 0 when every step worked; any failure is an uncaught exception (exit 255).
 */

declare(strict_types=1);

use Tether\Batch\Operation;
use Tether\Client;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$client = new Client();
$rightBackend = getenv('TETHER_JOIN_RIGHT_BACKEND') ?: null;

// Two small tables, written with the key API (an upsert by primary key: the same statements on every backend).
$client->execute('CREATE TABLE IF NOT EXISTS example_users (id INTEGER PRIMARY KEY, name VARCHAR(64), group_code VARCHAR(16))');
$client->execute('CREATE TABLE IF NOT EXISTS example_groups (code VARCHAR(16) PRIMARY KEY, name VARCHAR(64), seats INTEGER)', [], $rightBackend);
foreach ([[1, 'ada', 'adm'], [2, 'bob', null], [3, 'cy', 'dev'], [4, 'dan', 'ops'], [5, 'eve', 'adm'], [6, 'fay', 'gone']] as [$id, $name, $code]) {
    $client->put('example_users', ['id' => $id, 'name' => $name, 'group_code' => $code]);
}
foreach ([['adm', 'Admins', 2], ['dev', 'Developers', 10], ['ops', 'Operations', 3]] as [$code, $name, $seats]) {
    $client->put('example_groups', ['code' => $code, 'name' => $name, 'seats' => $seats], $rightBackend);
}

// The left side is any query, scan, get, multiGet or readRows operation; its group_code values are looked up
// (distinct, in one batched multi_get) as keys of example_groups.
$users = Operation::query('SELECT id, name, group_code FROM example_users WHERE id <= ? ORDER BY id', [6]);

// A left join keeps every user; `name` is taken by the left, so the group's name is `example_groups.name`.
$result = $client->join($users, 'example_groups', on: ['group_code'], rightColumns: ['name', 'seats'], rightBackend: $rightBackend);
printf("columns: %s\n", implode(', ', $result->columns()));
foreach ($result as $row) {           // rows are built one at a time
    printf("  %d %-4s %-5s %s\n", $row['id'], $row['name'], $row['group_code'] ?? '-', $row['example_groups.name'] ?? '(no group)');
}

// By column: each column is the decoded array itself, no copy and no row arrays at all.
$seats = array_sum(array_filter($result->column('seats'), 'is_int'));
printf("%d users, %d seats in their groups\n", count($result), $seats);

// An inner join keeps the matched users; order_by sorts on any output column, `-` for descending.
$inner = $client->join($users, 'example_groups', ['group_code'], ['name'], $rightBackend, 'inner', ['-example_groups.name', 'id']);
echo json_encode($inner->rows()), "\n";

// A join is also a batch operation: here next to a plain count, in one round trip.
$results = $client->batch([
    'admins' => Operation::join(Operation::scan('example_users', start: [1], end: [4]), 'example_groups', ['group_code'], ['seats'], $rightBackend, 'inner'),
    'users' => Operation::query('SELECT COUNT(*) AS n FROM example_users'),
]);
printf("users 1..3 in a group: %s of %d users\n", implode(', ', $results['admins']->column('name')), $results['users'][0]['n']);

echo "join: OK\n";
