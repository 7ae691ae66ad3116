<?php

/**
 * Parallel HTTP calls through tetherd: a page sends a batch of calls to an HTTP upstream, does its own work while
 * tetherd runs them concurrently over its warm keep-alive pool, then collects the responses.
 *
 *   php clients/php/examples/http_batch.php [PATH...]
 *
 * Needs a tetherd with a backend of type http named "api" (env TETHER_HTTP_UPSTREAM), e.g.
 *
 *   [backends.api]
 *   type = "http"
 *   dsn = "http://127.0.0.1:8080"
 *
 * The PATHs (path and query below the upstream's base URL) default to internal/testupstream's, which sleep:
 *
 *   go run ./internal/testupstream -listen 127.0.0.1:8080
 *
 * The socket is env TETHER_SOCKET if set, else ./var/tether.sock. Exits 1 with a message when tetherd or the
 * upstream is missing.
 */

declare(strict_types=1);

use Tether\Batch\Operation;
use Tether\Client;
use Tether\Connection\CommunicationException;
use Tether\HttpResponse;
use Tether\Server\ServerException;

require is_file(__DIR__ . '/../vendor/autoload.php') ? __DIR__ . '/../vendor/autoload.php' : __DIR__ . '/../autoload.php';

$upstream = getenv('TETHER_HTTP_UPSTREAM') ?: 'api';
$paths = array_slice($argv, 1) ?: ['/sleep?ms=300&call=1', '/sleep?ms=300&call=2', '/sleep?ms=300&call=3', '/status/404'];

$client = new Client();
$ops = [];
foreach ($paths as $path) {
    // Each call may carry its own deadline; the batch's (below) bounds them all.
    $ops[$path] = Operation::http($upstream, 'GET', $path, ['accept' => 'text/plain'], timeoutMs: 2000);
}

try {
    $start = hrtime(true);
    $pending = $client->sendBatch($ops, 3000);    // written to tetherd; returns at once
    $sent = hrtime(true);

    // The page's own work, while tetherd calls the upstream: other calls on the same client work meanwhile.
    $client->ping();
    $local = hrtime(true);

    $responses = $pending->wait();                // what $client->batch($ops) would have returned
    $done = hrtime(true);
} catch (CommunicationException $e) {
    fwrite(STDERR, "tetherd is not reachable: {$e->getMessage()}\n");
    exit(1);
}

foreach ($responses as $path => $response) {
    if ($response instanceof ServerException) {
        // No response at all: unavailable (refused; nothing was sent), timeout, too_large, backend_error, ...
        printf("%-28s error %s: %s\n", $path, $response->getErrorCode(), $response->getMessage());
        if ($response->getErrorCode() === ServerException::UNKNOWN_BACKEND) {
            fwrite(STDERR, "tetherd has no upstream named $upstream (env TETHER_HTTP_UPSTREAM)\n");
            exit(1);
        }
        continue;
    }
    /** @var HttpResponse $response any status is a response, 4xx and 5xx included */
    printf("%-28s %d %s (%s)\n", $path, $response->status, json_encode(substr($response->body, 0, 40), JSON_INVALID_UTF8_SUBSTITUTE), $response->header('content-type') ?? '-');
}
printf(
    "sent in %.2f ms, own work done after %.2f ms, %d responses after %.2f ms\n",
    ($sent - $start) / 1e6,
    ($local - $start) / 1e6,
    count($responses),
    ($done - $start) / 1e6,
);
