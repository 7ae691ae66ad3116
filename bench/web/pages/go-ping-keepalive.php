<?php
require __DIR__ . '/lib.php';
echo go_keepalive('/ping')['ok'] === true ? "pong\n" : "error\n";
