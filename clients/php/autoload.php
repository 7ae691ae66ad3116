<?php

declare(strict_types=1);

// autoload.php registers an autoloader for the Tether\ namespace, for use without Composer:
//     require '/path/to/clients/php/autoload.php';
// With Composer, require vendor/autoload.php instead.
//
// A class map, not a PSR-4 lookup: PSR-4 checks is_file() for every class on every PHP request, and those stats
// cost a page about 5 us (bench/web measured it: docs/benchmarks.md). tests/Unit/AutoloadTest.php keeps the map
// in step with src/.
spl_autoload_register(static function (string $class): void {
    static $map = [
        'Tether\\Batch\\Operation' => 'Batch/Operation.php',
        'Tether\\Batch\\PendingBatch' => 'Batch/PendingBatch.php',
        'Tether\\Bigtable\\Mutation' => 'Bigtable/Mutation.php',
        'Tether\\Cache\\LocalCache' => 'Cache/LocalCache.php',
        'Tether\\Client' => 'Client.php',
        'Tether\\ColumnarResult' => 'ColumnarResult.php',
        'Tether\\Connection\\CommunicationException' => 'Connection/CommunicationException.php',
        'Tether\\Connection\\RequestNotReadException' => 'Connection/RequestNotReadException.php',
        'Tether\\Connection\\StreamConnection' => 'Connection/StreamConnection.php',
        'Tether\\Connection\\UnknownOutcomeException' => 'Connection/UnknownOutcomeException.php',
        'Tether\\Exception\\InvalidArgumentException' => 'Exception/InvalidArgumentException.php',
        'Tether\\Exception\\LogicException' => 'Exception/LogicException.php',
        'Tether\\Exception\\TetherException' => 'Exception/TetherException.php',
        'Tether\\ExecResult' => 'ExecResult.php',
        'Tether\\HttpResponse' => 'HttpResponse.php',
        'Tether\\NumericResult' => 'NumericResult.php',
        'Tether\\Protocol\\MalformedReply' => 'Protocol/MalformedReply.php',
        'Tether\\Protocol\\Reply' => 'Protocol/Reply.php',
        'Tether\\Protocol\\Request' => 'Protocol/Request.php',
        'Tether\\ScanResult' => 'ScanResult.php',
        'Tether\\Sql\\SqlText' => 'Sql/SqlText.php',
        'Tether\\Server\\ServerException' => 'Server/ServerException.php',
        'Tether\\Transaction' => 'Transaction.php',
    ];
    if (isset($map[$class])) {
        require __DIR__ . '/src/' . $map[$class];
    }
});
