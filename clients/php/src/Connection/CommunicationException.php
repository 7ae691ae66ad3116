<?php

declare(strict_types=1);

namespace Tether\Connection;

use Tether\Exception\TetherException;

/**
 * CommunicationException reports that the socket to tetherd failed or carried something that is not a valid
 * reply. The client has already closed the socket when this is thrown; the next call opens a new one.
 *
 * Thrown as this class itself, it means the request was NOT executed: tetherd could not be reached, the socket
 * was found dead before the request was written and reopening it failed too, or the transaction the request
 * belonged to was lost with its connection (tetherd rolls such a transaction back). Such a call is safe to retry.
 * The subclass UnknownOutcomeException covers failures after the request was written.
 */
class CommunicationException extends TetherException
{
    /**
     * shouldResetConnection tells whether the connection must be dropped after this error (predis' contract).
     * Always true: the client has already dropped it.
     */
    public function shouldResetConnection(): bool
    {
        return true;
    }

    /**
     * connectFailed describes a failed connect to tetherd so that its reader knows what to fix: the address, the
     * setting that chose it ($setting), and by the error: no socket file (ENOENT: tetherd not running, or another
     * socket path), nobody listening (ECONNREFUSED: tetherd stopped and left its socket file), no permission
     * (EACCES: socket_group / socket_mode in tetherd.toml); and where tetherd logs why it is not up.
     *
     * @param string $address "unix:///path", "tcp://host:port" or "tls://host:port"
     * @param string $setting what chose the address, e.g. "env TETHER_SOCKET"
     */
    public static function connectFailed(string $address, int $errno, string $error, string $setting): self
    {
        $unix = \str_starts_with($address, 'unix://');
        $where = $unix ? \substr($address, 7) : \substr($address, 6);
        // By the errno (Linux: 2, 111, 13, 1) or else by its text, whose words are the same on every system where
        // the numbers differ (macOS and the BSDs: ECONNREFUSED 61; PHP may also report errno 0 with the text only).
        $text = \strtolower($error);
        $noFile = $errno === 2 || \str_contains($text, 'no such file');
        $refused = $errno === 111 || \str_contains($text, 'refused');
        $denied = $errno === 13 || $errno === 1 || \str_contains($text, 'permission denied') || \str_contains($text, 'not permitted');
        $hint = match (true) {
            $unix && $noFile => \sprintf('no socket file at %s: tetherd is not running, or its [server] socket in tetherd.toml is another path', $where),
            $refused => $unix
                ? \sprintf('nothing listens on %s: tetherd stopped (or failed at start) and left its socket file', $where)
                : \sprintf('nothing listens on %s: tetherd is not running, or its [server] tcp in tetherd.toml is another address', $where),
            $unix && $denied => \sprintf(
                'this PHP process (user %s) may not open %s: set [server] socket_group to a group of that user and socket_mode to "0660" in tetherd.toml (and make the socket\'s directory reachable), then restart tetherd',
                self::processUser(),
                $where,
            ),
            default => 'tetherd may not be running',
        };

        return new self(\sprintf(
            'connect to tetherd at %s: %s (errno %d); the request was not sent. %s. The address comes from %s. tetherd logs why it is not up, or did not start, to [log] file in tetherd.toml, else to its stderr (journalctl -u tetherd under systemd)',
            $address,
            $error !== '' ? $error : 'failed',
            $errno,
            \ucfirst($hint),
            $setting,
        ));
    }

    /** processUser names the user this PHP process runs as, for a permission error. */
    private static function processUser(): string
    {
        if (\function_exists('posix_geteuid') && \function_exists('posix_getpwuid')) {
            $uid = \posix_geteuid();
            $name = \posix_getpwuid($uid)['name'] ?? null;

            return $name !== null ? \sprintf('%s, uid %d', $name, $uid) : \sprintf('uid %d', $uid);
        }

        return \get_current_user();
    }
}
