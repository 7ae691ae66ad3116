<?php

// The local example's page: one write and one read through Tether, on tetherd's default backend.

declare(strict_types=1);

require __DIR__ . '/../../../clients/php/autoload.php';

$db = new Tether\Client(); // TETHER_SOCKET, persistent: the next page reuses the socket
$db->execute('CREATE TABLE IF NOT EXISTS local_visits (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT)');
$db->execute('INSERT INTO local_visits (at) VALUES (?)', [date('c')]);
$visits = $db->queryOne('SELECT COUNT(*) AS n FROM local_visits')['n'];
$micros = $db->serverMicrosTotal();
header('Content-Type: text/html; charset=utf-8');
?>
<!doctype html>
<title>Tether local example</title>
<h1>Hello from PHP through Tether</h1>
<p>visits: <?= (int) $visits ?></p>
<p>time in tetherd and SQLite for this page: <?= (int) $micros ?> µs</p>
