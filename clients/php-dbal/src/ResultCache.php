<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Connection as DbalConnection;
use Tether\Client;

/**
 * ResultCache marks reads of a DBAL connection on this driver for tetherd's shared result cache (docs/operations.md,
 * "Result cache"): for the callback given, queries outside a transaction may be answered from tetherd's memory, for
 * at most the TTL; every write through tetherd to the backend drops the cached results first, so the application
 * reads its own writes.
 *
 *     $rows = ResultCache::with($conn, 5000, fn () => $conn->fetchAllAssociative('SELECT * FROM categories'));
 *
 * The connection parameter `tether_cache_ttl` does it for every query of a connection. (DBAL's own
 * QueryCacheProfile caches in PHP through a PSR-6 pool of the application's; it never reaches the driver.)
 */
final class ResultCache
{
    /**
     * with runs $callback with $conn's queries outside a transaction cached for $ttlMs milliseconds (0: not cached)
     * and returns what it returns. $conn must use Tether\DBAL\Driver; it connects if it has not yet.
     *
     * @template T
     * @param callable(): T $callback
     * @return T
     */
    public static function with(DbalConnection $conn, int $ttlMs, callable $callback): mixed
    {
        $native = $conn->getNativeConnection();
        $tether = $native instanceof Client ? Connection::forClient($native) : null;
        if ($tether === null) {
            throw new \LogicException(\sprintf('Tether DBAL: ResultCache::with() needs a connection on %s, got one whose native connection is a %s', Driver::class, \get_debug_type($native)));
        }
        $previous = $tether->setCacheTtl($ttlMs);
        try {
            return $callback();
        } finally {
            $tether->setCacheTtl($previous);
        }
    }
}
