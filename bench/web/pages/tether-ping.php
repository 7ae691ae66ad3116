<?php
require __DIR__ . '/lib.php';
timed(static fn () => tether()->ping());
echo "pong\n";
