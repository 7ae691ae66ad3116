<?php
require __DIR__ . '/lib.php';
echo tether()->query('SELECT 1 AS one', [], 'maria')[0]['one'], "\n";
