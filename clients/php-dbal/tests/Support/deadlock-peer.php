<?php

declare(strict_types=1);

// tests/Support/deadlock-peer.php KIND TABLE: the second transaction of ExceptionTest's deadlock, on its own DBAL
// connection through tetherd (env as for the tests). It locks row 2, prints "locked", waits for a line on stdin,
// then updates row 1 (held by the test's transaction), and prints "committed", or the DBAL exception class it got.
require __DIR__ . '/../bootstrap.php';

use Doctrine\DBAL\DriverManager;

[, $kind, $table] = $argv;
$conn = DriverManager::getConnection([
    'driverClass' => Tether\DBAL\Driver::class,
    'tether_socket' => getenv('TETHER_SOCKET'),
    'tether_backend' => getenv($kind === 'mysql' ? 'TETHER_IT_MYSQL_BACKEND' : 'TETHER_IT_PGSQL_BACKEND'),
]);
try {
    $conn->beginTransaction();
    $conn->executeStatement("UPDATE $table SET n = n + 1 WHERE id = 2");
    echo "locked\n";
    fgets(STDIN);
    $conn->executeStatement("UPDATE $table SET n = n + 1 WHERE id = 1");
    $conn->commit();
    echo "committed\n";
} catch (Throwable $e) {
    if ($conn->isTransactionActive()) {
        $conn->rollBack();
    }
    echo get_class($e), "\n";
}
