<?php
// bench/web/pages/diag-first-read.php: a diagnosis page, not a row (rows.php does not list it). It times, with hrtime,
// the phases of a Tether read as a page runs them, and answers them as JSON (ns): loading the client's classes
// (autoload.php, then Client, StreamConnection, Request, Reply), constructing the Client, opening the worker's
// persistent socket to tetherd (stream_socket_client on the client's own address, so the client reuses that socket),
// two pings, then two Bigtable reads of seed E2 (?id, else random), each with the minor page faults it took; and
// tetherd's own time for each read, from its reply (Client::lastServerMicros()). Asked from the fresh-worker copy of a server
// (bench/web/first-read.php, with run.sh --serve) it says where a fresh worker's first read spends its time; from
// the long-lived workers, what the same phases cost there.
require __DIR__ . '/lib.php';
$id = bench_id();
// Each mark: hrtime and the process's minor page faults so far (a fresh process faults in the memory it touches).
$f = [getrusage()['ru_minflt']];
$t = [hrtime(true)];
require_once cfg()['tether_autoload'];
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
foreach (['Tether\Client', 'Tether\Connection\StreamConnection', 'Tether\Protocol\Request', 'Tether\Protocol\Reply'] as $class) {
    class_exists($class) || throw new RuntimeException("no class $class");
}
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
// ?np=1: a client with a socket of its own, opened by its first call (new to tetherd in every request, even in a
// long-lived worker): tells what a new connection costs from what a new process does.
$np = isset($_GET['np']);
$client = new Tether\Client(['socket' => cfg()['tether_socket'], 'persistent' => !$np]);
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
if (!$np) {
    $s = stream_socket_client('unix://' . cfg()['tether_socket'], $errno, $errstr, 5, STREAM_CLIENT_CONNECT | STREAM_CLIENT_PERSISTENT);
    $s !== false || throw new RuntimeException("connect: $errstr");
}
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
$client->ping();
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
$client->ping();
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
$row = $client->get(BT_TABLE, (string) $id, [], 'bt');
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
$server1 = $client->lastServerMicros();
$client->get(BT_TABLE, (string) mt_rand(1, TABLE_ROWS), [], 'bt');
$t[] = hrtime(true);
$f[] = getrusage()['ru_minflt'];
$server2 = $client->lastServerMicros();
render_row(bt_row($row)); // the read is checked, not printed
$names = ['autoload.php', 'classes', 'new Client', 'connect', 'ping 1', 'ping 2', 'get 1', 'get 2'];
$out = ['pid' => getmypid()];
foreach ($names as $i => $name) {
    $out[$name] = $t[$i + 1] - $t[$i];
    $out["faults:$name"] = $f[$i + 1] - $f[$i];
}
// tetherd's own time for each read, from its reply (us), as ns like the rest.
$out['get 1 in tetherd'] = $server1 * 1000;
$out['get 2 in tetherd'] = $server2 * 1000;
header('Content-Type: application/json');
echo json_encode($out), "\n";
