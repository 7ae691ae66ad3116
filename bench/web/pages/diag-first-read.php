<?php
// bench/web/pages/diag-first-read.php: a diagnosis page, not a row (rows.php does not list it). It times, with hrtime,
// the phases of a Tether read as a page runs them, and answers them as JSON (ns): loading the client's classes
// (autoload.php, then Client, StreamConnection, Request, Reply), constructing the Client, opening the worker's
// persistent socket to tetherd (stream_socket_client on the client's own address, so the client reuses that socket),
// two pings, then two Bigtable reads of seed E2 (?id, else random). Asked from the fresh-worker copy of a server
// (bench/web/first-read.php, with run.sh --serve) it says where a fresh worker's first read spends its time; from
// the long-lived workers, what the same phases cost there.
require __DIR__ . '/lib.php';
$id = bench_id();
$t = [hrtime(true)];
require_once cfg()['tether_autoload'];
$t[] = hrtime(true);
foreach (['Tether\Client', 'Tether\Connection\StreamConnection', 'Tether\Protocol\Request', 'Tether\Protocol\Reply'] as $class) {
    class_exists($class) || throw new RuntimeException("no class $class");
}
$t[] = hrtime(true);
$client = new Tether\Client(['socket' => cfg()['tether_socket']]);
$t[] = hrtime(true);
$s = stream_socket_client('unix://' . cfg()['tether_socket'], $errno, $errstr, 5, STREAM_CLIENT_CONNECT | STREAM_CLIENT_PERSISTENT);
$s !== false || throw new RuntimeException("connect: $errstr");
$t[] = hrtime(true);
$client->ping();
$t[] = hrtime(true);
$client->ping();
$t[] = hrtime(true);
$row = $client->get(BT_TABLE, (string) $id, [], 'bt');
$t[] = hrtime(true);
$client->get(BT_TABLE, (string) mt_rand(1, TABLE_ROWS), [], 'bt');
$t[] = hrtime(true);
render_row(bt_row($row)); // the read is checked, not printed
$names = ['autoload.php', 'classes', 'new Client', 'connect', 'ping 1', 'ping 2', 'get 1', 'get 2'];
$out = ['pid' => getmypid()];
foreach ($names as $i => $name) {
    $out[$name] = $t[$i + 1] - $t[$i];
}
header('Content-Type: application/json');
echo json_encode($out), "\n";
