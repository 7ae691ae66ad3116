<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Connection as DbalConnection;
use Tether\Client;

/**
 * Primary holds the switches of DBAL's PrimaryReadReplicaConnection for a connection on this driver whose tetherd
 * backend has replicas (`replicas = [...]`): there, one plain DBAL connection does what PrimaryReadReplicaConnection
 * did with two, tetherd sending each read outside a transaction that may run on a replica to one that qualifies
 * (reachable, replicating, within max_replica_lag) and everything else to the primary.
 *
 * | PrimaryReadReplicaConnection                    | on this driver                                            |
 * |-------------------------------------------------|-----------------------------------------------------------|
 * | `primary` / `replica` params                    | the backend's `dsn` and `replicas` in tetherd.toml        |
 * | writes, transactions go to the primary          | the same, by tetherd (a transaction's reads too)          |
 * | ensureConnectedToPrimary()                      | Primary::ensure($conn): reads on the primary from now on  |
 * | ensureConnectedToReplica() (keepReplica)        | Primary::release($conn): reads may go to replicas again   |
 * | isConnectedToPrimary()                          | Primary::isForced($conn)                                  |
 * | reads after a write stay on the primary         | tetherd sends this connection's reads to the primary      |
 * |                                                 | until a replica has its writes (read-your-writes)         |
 * | a second connection for reads that must be fresh| Primary::with($conn, fn), or `tether_primary` => true     |
 *
 * Across PHP requests: keep `$conn->getNativeConnection()->causalToken()` (a Tether\Client) in the user's session
 * and give it to the next request's connection as `tether_causal_token`.
 */
final class Primary
{
    /**
     * with runs $callback with $conn's reads outside a transaction sent to the primary, and returns what it
     * returns. $conn must use Tether\DBAL\Driver; it connects if it has not yet.
     *
     * @template T
     * @param callable(): T $callback
     * @return T
     */
    public static function with(DbalConnection $conn, callable $callback): mixed
    {
        $tether = self::driverConnection($conn);
        $previous = $tether->setPrimary(true);
        try {
            return $callback();
        } finally {
            $tether->setPrimary($previous);
        }
    }

    /** ensure sends $conn's reads to the primary from now on (PrimaryReadReplicaConnection::ensureConnectedToPrimary()). */
    public static function ensure(DbalConnection $conn): void
    {
        self::driverConnection($conn)->setPrimary(true);
    }

    /** release lets tetherd send $conn's reads to replicas again (ensureConnectedToReplica()). */
    public static function release(DbalConnection $conn): void
    {
        self::driverConnection($conn)->setPrimary(false);
    }

    /** isForced tells whether $conn's reads are sent to the primary (ensure(), with(), `tether_primary`). */
    public static function isForced(DbalConnection $conn): bool
    {
        return self::driverConnection($conn)->isPrimary();
    }

    private static function driverConnection(DbalConnection $conn): Connection
    {
        $native = $conn->getNativeConnection();
        $tether = $native instanceof Client ? Connection::forClient($native) : null;

        return $tether ?? throw new \LogicException(\sprintf('Tether DBAL: Primary needs a connection on %s, got one whose native connection is a %s', Driver::class, \get_debug_type($native)));
    }
}
