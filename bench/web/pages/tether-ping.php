<?php
require __DIR__ . '/lib.php';
tether()->ping();
echo "pong\n";
