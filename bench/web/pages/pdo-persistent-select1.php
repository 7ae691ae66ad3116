<?php
require __DIR__ . '/lib.php';
$db = pdo_open(cfg()['users']['pdo_persistent']);
echo $db->query('SELECT 1')->fetchColumn(), "\n";
