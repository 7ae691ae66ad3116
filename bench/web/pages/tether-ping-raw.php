<?php
require __DIR__ . '/lib.php';
tether_raw_ping();
echo "pong\n";
