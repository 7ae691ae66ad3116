<?php

declare(strict_types=1);

namespace Tether\Cache;

/**
 * LocalCache keeps the results of cacheable reads (a query with cacheTtlMs) in APCu, shared by every PHP worker of
 * the host (php-fpm pools and apache prefork alike: APCu's memory is mapped before the workers fork), and serves
 * them again without a call to tetherd and without a system call, while tetherd says they are fresh
 * (docs/operations.md, "Result cache", "Hits in the PHP worker").
 *
 * tetherd (with cache.local on) publishes per-table versions in a System V shared memory segment keyed by
 * ftok(<socket>.versions, 'T') (internal/shmversions; its layout is docs/protocol.md, "Table versions"). A read that
 * asks for versions gets, with its result, the slots the result depends on and their versions, read before the query
 * ran. An entry is served only while
 *  - its TTL (counted from before the read was sent) has not passed,
 *  - the segment's generation (a new one at every tetherd start, 0 once it stopped) and reset counter (a reload)
 *    are those the entry was read under,
 *  - tetherd's heartbeat in the segment is recent (a tetherd that died without closing it),
 *  - and every slot holds the version the entry was read with.
 * tetherd bumps a slot, after dropping its own cached results and before it answers the write that made them stale,
 * so a write acknowledged through tetherd is never followed by a stale hit in any worker; a write from elsewhere
 * is seen when tetherd's change stream reports it (or, without one, within the TTL), as with tetherd's own cache.
 *
 * A hit costs: one apcu_fetch (one string copied out of shared memory), a microtime() (vDSO, no system call), one
 * shmop_read per slot plus one for the header (each a memcpy from the segment attached once per PHP request), and
 * the reply's msgpack_unpack.
 * Counters (hits, misses, stale, expired, stores) are kept per process and added to APCu at the end of each PHP
 * request: stats() reads them.
 *
 * @internal used by Tether\Client with the option local_cache
 */
final class LocalCache
{
    /** The segment's layout (internal/shmversions). */
    private const MAGIC = 'TTHRVER1';
    private const LAYOUT = 1;
    private const HEADER_BYTES = 64;

    /** STATS are the counters stats() returns. */
    public const STATS = ['hits', 'misses', 'unknown', 'stale', 'expired', 'stores', 'too_large'];

    /** @var array<string, array{\Shmop, int, int, string}|false> key file => this PHP request's attachment: the
     *       segment, its heartbeat bound (ms), its slot count, the key namespace; false: none this request */
    private static array $segments = [];
    /** @var array<string, int> counters of this process not yet added to APCu */
    private static array $counts = ['hits' => 0, 'misses' => 0, 'unknown' => 0, 'stale' => 0, 'expired' => 0, 'stores' => 0, 'too_large' => 0];
    private static bool $flushing = false;

    private ?\Shmop $shm = null;
    private int $beatMaxMs = 0;
    private int $slots = 0;
    private float $beatCheckedAt = 0.0;
    private string $namespace = '';

    private readonly string $keyPath;

    /**
     * @param string $socket tetherd's socket path: the segment's key file is beside it
     * @param int $maxEntryBytes the largest entry kept (the value serialized, and 10 bytes a table)
     */
    public function __construct(string $socket, private readonly int $maxEntryBytes)
    {
        $this->keyPath = $socket . '.versions';
    }

    /** available tells whether this PHP can keep a local cache: APCu enabled (apc.enable_cli under the CLI) and shmop. */
    public static function available(): bool
    {
        return \function_exists('apcu_enabled') && \apcu_enabled() && \function_exists('shmop_open');
    }

    /**
     * key returns the APCu key of a query under the session settings identity $profile, or null when tetherd
     * publishes no versions (no segment: tetherd down, cache.local off, an older tetherd): then the read goes to
     * tetherd as it would without a local cache, and asks for no versions.
     *
     * The key holds what tetherd's own cache key holds: the backend as named ('' for tetherd's default), the
     * settings, the reply's form ($as: the Client method's, which also says columnar or not), the SQL text and the
     * typed parameters (serialize() tells 1 from "1" and 1.0; their keys too, as Request drops them: pass lists).
     *
     * @param array<mixed> $params
     */
    public function key(string $as, string $backend, string $sql, array $params, ?string $timeFormat, string $profile): ?string
    {
        if ($this->shm === null && !$this->attach()) {
            return null;
        }

        // one interpolated string: a third cheaper than a chain of concatenations
        return "{$this->namespace}{$backend}\0{$profile}\0{$as}\0{$timeFormat}\0{$sql}\0" . ($params === [] ? '' : \serialize($params));
    }

    /**
     * fetch returns whether the value kept under $key is fresh (see the class comment), and sets $value to it; false
     * when it is not kept, expired, or stale.
     *
     * An entry is one string, so that APCu copies it out with one memcpy (an array would be unserialized anyway):
     * expires (Unix ms, big-endian uint64), the generation and reset counter it was read under (16 bytes, as in the
     * segment), the number of slots n (a byte), n times the slot's number (uint16 LE) and its version (8 bytes, as in
     * the segment), then the value as serialize() wrote it: what the Client method returns, so that a hit decodes
     * nothing else. Measured with callgrind, a hit's parts cost (instructions): apcu_fetch 820, each unpack() 700,
     * each shmop_read 700, unserialize() of a row of 3 columns 2,400.
     */
    public function fetch(string $key, mixed &$value): bool
    {
        $e = \apcu_fetch($key);
        if (!\is_string($e)) {
            ++self::$counts['misses'];

            return false;
        }
        $now = \microtime(true) * 1000.0;
        if ($now >= \unpack('J', $e)[1]) {
            ++self::$counts['expired'];

            return false;
        }
        $shm = $this->shm;
        if ($shm === null && !($this->attach() && ($shm = $this->shm) !== null)) {
            return false;
        }
        // The generation and reset counter (and, at most every 250 ms, the heartbeat: an unpack() saved per hit).
        $head = \shmop_read($shm, 16, 24);
        if (\substr_compare($e, $head, 8, 16, false) !== 0
            || ($now > $this->beatCheckedAt + 250.0 && !$this->beating($head, $now))) {
            ++self::$counts['stale'];

            return false;
        }
        $n = \ord($e[24]);
        for ($i = 0, $at = 25; $i < $n; ++$i, $at += 10) {
            // the slot's offset from its two bytes: two ord() cost half an unpack()
            if (\substr_compare($e, \shmop_read($shm, 64 + 8 * (\ord($e[$at]) | \ord($e[$at + 1]) << 8), 8), $at + 2, 8) !== 0) {
                ++self::$counts['stale'];

                return false;
            }
        }
        // APCu is shared by every pool of a php-fpm master: only the result classes the client stores are made.
        $value = \unserialize(\substr($e, $at), ['allowed_classes' => [\Tether\NumericResult::class, \Tether\ColumnarResult::class]]);
        ++self::$counts['hits'];

        return true;
    }

    /** beating tells whether the heartbeat in $head (the header from offset 16) is within its bound of $now. */
    private function beating(string $head, float $now): bool
    {
        if (\unpack('P', $head, 16)[1] + $this->beatMaxMs < $now) {
            return false;
        }
        $this->beatCheckedAt = $now;

        return true;
    }

    /**
     * store keeps $value (what the Client method returns) under $key with the versions $versions tetherd sent with
     * it, until $expiresMs (Unix ms); nothing is kept when the versions are not of the segment's current generation,
     * or the entry is over the bound.
     *
     * @param array<mixed> $versions {generation, reset, slots, values}
     */
    public function store(string $key, mixed $value, array $versions, float $expiresMs, int $ttlMs): void
    {
        $shm = $this->shm;
        $slots = $versions['slots'] ?? null;
        $values = $versions['values'] ?? null;
        if ($shm === null || !\is_array($slots) || !\is_array($values) || \count($slots) !== \count($values) || \count($slots) > 255
            || !\is_int($versions['generation'] ?? null) || !\is_int($versions['reset'] ?? null)) {
            return;
        }
        $epoch = \pack('PP', $versions['generation'], $versions['reset']);
        $current = \shmop_read($shm, 16, 16);
        if (\strncmp($current, $epoch, 16) !== 0) {
            if (\strncmp($current, "\0\0\0\0\0\0\0\0", 8) === 0) {
                // This segment was closed (tetherd stopped, or replaced it): attach anew at the next read, so that a
                // long-running process finds the new one.
                unset(self::$segments[$this->keyPath]);
                $this->shm = null;
            }

            return; // read under another generation or before a reset: stale already
        }
        $entry = \pack('J', (int) $expiresMs) . $epoch . \chr(\count($slots));
        foreach ($slots as $i => $slot) {
            // A slot's number is kept in two bytes (pack 'v'): one past them would compare another slot's version.
            if (!\is_int($slot) || $slot < 0 || $slot >= $this->slots || $slot > 0xFFFF || !\is_int($values[$i] ?? null)) {
                return;
            }
            $entry .= \pack('vP', $slot, $values[$i]);
        }
        $entry .= \serialize($value);
        if (\strlen($entry) > $this->maxEntryBytes) {
            ++self::$counts['too_large'];

            return;
        }
        // APCu's own TTL only frees the memory; freshness is checked against the entry's expiry on every fetch.
        if (\apcu_store($key, $entry, \intdiv($ttlMs + 999, 1000) + 1)) {
            ++self::$counts['stores'];
        }
    }

    /** unknown counts a cacheable read sent to tetherd because the session's settings were not known yet. */
    public static function unknown(): void
    {
        ++self::$counts['unknown'];
    }

    /**
     * stats returns the host's counters: every worker's, as added to APCu at the end of its PHP requests, plus this
     * process's not added yet. hits: served here; misses: not kept; unknown: not looked up, the session's settings
     * on the socket not known yet (the first cacheable read after another request); stale: kept, refused because
     * tetherd's versions changed (or tetherd restarted, or its heartbeat stopped); expired: kept past its TTL;
     * stores: kept; too_large: over local_cache_max_entry_bytes.
     *
     * @return array<string, int>
     */
    public static function stats(): array
    {
        $out = [];
        foreach (self::STATS as $name) {
            $v = \function_exists('apcu_fetch') ? \apcu_fetch('tether:local:' . $name) : false;
            $out[$name] = (\is_int($v) ? $v : 0) + self::$counts[$name];
        }

        return $out;
    }

    /** flush adds this process's counters to APCu (a shutdown function, registered once per PHP request). */
    public static function flush(): void
    {
        self::$flushing = false;
        foreach (self::$counts as $name => $n) {
            if ($n > 0) {
                \apcu_add('tether:local:' . $name, 0);
                \apcu_inc('tether:local:' . $name, $n);
                self::$counts[$name] = 0;
            }
        }
    }

    /**
     * attach attaches this PHP request's segment read-only (once per request and key file, shared by the Clients of
     * the request) and checks its header; false when there is none to use.
     */
    private function attach(): bool
    {
        $seg = self::$segments[$this->keyPath] ?? null;
        if ($seg === null) {
            $seg = self::$segments[$this->keyPath] = self::open($this->keyPath);
            if (!self::$flushing) {
                self::$flushing = true;
                \register_shutdown_function([self::class, 'flush']);
            }
        }
        if ($seg === false) {
            return false;
        }
        [$this->shm, $this->beatMaxMs, $this->slots, $this->namespace] = $seg;

        return true;
    }

    /**
     * open attaches the segment of $keyPath and checks its header: the magic, the layout, a size that holds its
     * slots, and a tetherd serving (generation not 0).
     *
     * @return array{\Shmop, int, int, string}|false
     */
    private static function open(string $keyPath): array|false
    {
        $key = @\ftok($keyPath, 'T');
        if ($key === -1) {
            return false;
        }
        $shm = @\shmop_open($key, 'a', 0, 0);
        if ($shm === false) {
            return false;
        }
        $size = \shmop_size($shm);
        if ($size < self::HEADER_BYTES) {
            return false;
        }
        $head = \unpack('a8magic/Vlayout/Vslots/Pgeneration/Preset/Pbeat/VbeatMax', \shmop_read($shm, 0, 44));
        if ($head['magic'] !== self::MAGIC || $head['layout'] !== self::LAYOUT || $head['generation'] === 0
            || self::HEADER_BYTES + 8 * $head['slots'] > $size) {
            return false;
        }

        return [$shm, $head['beatMax'], $head['slots'], 'tether:' . $key . ':'];
    }

    /** forget drops this request's attachments (tests: a tetherd restarted under the same key file). */
    public static function forget(): void
    {
        self::$segments = [];
    }
}
