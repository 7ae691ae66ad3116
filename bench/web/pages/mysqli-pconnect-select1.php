<?php
require __DIR__ . '/lib.php';
$db = mysqli_open(cfg()['users']['mysqli_pconnect'], true);
echo $db->query('SELECT 1')->fetch_row()[0], "\n";
