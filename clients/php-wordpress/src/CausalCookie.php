<?php

declare(strict_types=1);

namespace Tether\WordPress;

use Tether\Client;
use Tether\Exception\TetherException;

/**
 * CausalCookie carries read-your-writes from one WordPress request of a logged-in user to the next (TETHER_CAUSAL):
 * on a tetherd backend with replicas, the page after a user's write (the redirect after saving a post, served by
 * another php-fpm worker or web host) reads that write, from a replica that has it or from the primary.
 *
 *  - When a request wrote through $wpdb, right before PHP sends its headers (header_register_callback(): after
 *    every write made before the page's first output, a redirect after a save included), when a user is logged in,
 *    the cookie `tether_causal` is set to the client's causalToken() (its writes' positions, and the token it
 *    started from), for TTL seconds. Nothing is set when there is no token (a backend without replicas), nor for a
 *    write made after the headers went out. The drop-in takes PHP's one header callback of the request: a plugin
 *    that registers its own after the first write replaces it.
 *  - At connect, the drop-in passes the cookie, when it looks like a token, as the client's causal_token: the
 *    request's reads run on a replica that has those writes, or on the primary. A cookie the client refuses is
 *    ignored (the request reads as without it).
 *
 * A visitor can send any cookie: the worst a made-up one does is send that visitor's own reads to the primary.
 */
final class CausalCookie
{
    /** NAME is the cookie's name. */
    public const NAME = 'tether_causal';

    /** TTL is how long the cookie lives, in seconds: far longer than any replica lag tetherd lets a replica serve. */
    public const TTL = 300;

    /** MAX_BYTES bounds what is read from the cookie (a token of one backend is under 100 bytes). */
    private const MAX_BYTES = 2048;

    /**
     * fromCookies returns the token in $cookies ($_COOKIE), or null when there is none or it cannot be one.
     *
     * @param array<mixed> $cookies
     */
    public static function fromCookies(array $cookies): ?string
    {
        $token = $cookies[self::NAME] ?? null;
        if (!\is_string($token) || $token === '' || \strlen($token) > self::MAX_BYTES || \preg_match('/^[A-Za-z0-9_-]+$/', $token) !== 1) {
            return null;
        }

        return $token;
    }

    /**
     * send sets the cookie to $client's causalToken() when a user is logged in, the headers are not sent yet, and
     * there is a token. Never throws (it runs as the headers go out): returns whether it set the cookie.
     */
    public static function send(Client $client): bool
    {
        if (\headers_sent() || !\function_exists('is_user_logged_in') || !is_user_logged_in()) {
            return false;
        }
        try {
            $token = $client->causalToken();
        } catch (TetherException) {
            return false;
        }
        if ($token === '') {
            return false;
        }

        return \setcookie(self::NAME, $token, [
            'expires' => \time() + self::TTL,
            'path' => \defined('COOKIEPATH') && \constant('COOKIEPATH') !== '' ? (string) \constant('COOKIEPATH') : '/',
            'secure' => \function_exists('is_ssl') && is_ssl(),
            'httponly' => true,
            'samesite' => 'Lax',
        ]);
    }
}
