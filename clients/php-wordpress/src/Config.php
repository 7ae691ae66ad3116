<?php

declare(strict_types=1);

namespace Tether\WordPress;

/**
 * Config is the drop-in's configuration, read from wp-config.php constants by fromConstants():
 *
 *   TETHER_SOCKET      tetherd's Unix socket (absolute path); default: env TETHER_SOCKET, else the client's default
 *   TETHER_BACKEND     the tetherd backend (a MySQL/MariaDB one) that holds the WordPress tables; default: tetherd's
 *                      default_backend
 *   TETHER_TIMEOUT     seconds the client waits for tetherd (connect and each reply); default 30
 *   TETHER_PERSISTENT  keep the socket (and so the tetherd client session: SET time_zone, ...) across the PHP
 *                      requests of a worker; default false: each request starts a session of its own, as it gets
 *                      a mysqli connection of its own without the drop-in
 *   TETHER_BUSY_WAIT   seconds a statement keeps asking for a pooled connection while tetherd answers `busy`
 *                      (every connection in use for the backend's acquire_timeout); default 30, 0: fail at once
 *   TETHER_CACHE_TTL   milliseconds tetherd may answer a plain SELECT outside a transaction from its shared result
 *                      cache (tetherd's [cache]); every write through tetherd to the backend drops what it cached, a
 *                      write from elsewhere is seen within this TTL; default 0: no caching
 *   TETHER_LOCAL_CACHE with TETHER_CACHE_TTL, keep those reads in the PHP workers' shared memory too (APCu; the
 *                      client option local_cache): a hit is served without a call to tetherd, while tetherd's
 *                      published table versions say nothing it read has changed (docs/operations.md, "Hits in
 *                      the PHP worker"); default false
 *   TETHER_CAUSAL      on a backend with replicas, carry a logged-in user's writes to their next request in the
 *                      cookie tether_causal (CausalCookie): the page after a save reads it, on a replica that has
 *                      it or on the primary; default false
 *
 * DB_NAME must name the database the backend connects to (it is checked on connect); DB_USER, DB_PASSWORD and
 * DB_HOST are not used: tetherd holds the credentials.
 */
final class Config
{
    public function __construct(
        public readonly ?string $socket = null,
        public readonly ?string $backend = null,
        public readonly float $timeout = 30.0,
        public readonly bool $persistent = false,
        public readonly float $busyWait = 30.0,
        public readonly int $cacheTtlMs = 0,
        public readonly bool $localCache = false,
        public readonly bool $causal = false,
    ) {
    }

    /** fromConstants reads the TETHER_* constants; an unset one takes its default. */
    public static function fromConstants(): self
    {
        $socket = \defined('TETHER_SOCKET') ? (string) \constant('TETHER_SOCKET') : (\getenv('TETHER_SOCKET') ?: null);

        return new self(
            socket: $socket,
            backend: \defined('TETHER_BACKEND') ? (string) \constant('TETHER_BACKEND') : null,
            timeout: \defined('TETHER_TIMEOUT') ? (float) \constant('TETHER_TIMEOUT') : 30.0,
            persistent: \defined('TETHER_PERSISTENT') ? (bool) \constant('TETHER_PERSISTENT') : false,
            busyWait: \defined('TETHER_BUSY_WAIT') ? (float) \constant('TETHER_BUSY_WAIT') : 30.0,
            cacheTtlMs: \defined('TETHER_CACHE_TTL') ? \max(0, (int) \constant('TETHER_CACHE_TTL')) : 0,
            localCache: \defined('TETHER_LOCAL_CACHE') ? (bool) \constant('TETHER_LOCAL_CACHE') : false,
            causal: \defined('TETHER_CAUSAL') ? (bool) \constant('TETHER_CAUSAL') : false,
        );
    }

    /** clientOptions returns the options of the Tether\Client the drop-in uses. */
    public function clientOptions(): array
    {
        // time_format sql: DATETIME/TIMESTAMP values as mysqli gives them ("2024-02-29 23:59:59", and MySQL's zero
        // date "0000-00-00 00:00:00", which WordPress compares with), written by tetherd from the column's type.
        $options = ['timeout' => $this->timeout, 'persistent' => $this->persistent, 'backend' => $this->backend, 'time_format' => 'sql'];
        if ($this->socket !== null) {
            $options['socket'] = $this->socket;
        }
        if ($this->localCache && $this->cacheTtlMs > 0) {
            $options['local_cache'] = true;
        }

        return $options;
    }
}
