<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Illuminate\Database\Connection;
use Illuminate\Database\DatabaseManager;
use Illuminate\Http\Request;

/**
 * CausalTokens is an HTTP middleware that gives a user read-your-writes across requests on tether connections whose
 * backend has replicas: a page that follows the user's own write (a redirect after a POST, served by another
 * php-fpm worker or web host) reads that write, from a replica that has it or from the primary, never a replica that
 * is behind it. Turn it on per connection with `'causal' => true` in its config, and add the middleware after the
 * session starts (in the `web` group, after StartSession):
 *
 *     // bootstrap/app.php (Laravel 11)            // app/Http/Kernel.php (Laravel 8-10)
 *     ->withMiddleware(fn ($m) => $m->web(append: [\Tether\Laravel\CausalTokens::class]))
 *                                                 // 'web' => [..., \Tether\Laravel\CausalTokens::class],
 *
 * Before the request, the tokens kept in the Laravel session (key `tether_causal`: connection name => token) are
 * handed to those connections: each one's Client starts from its token (the Client option causal_token, so its
 * first call waits for nothing but tells tetherd what its reads must see). A connection already opened earlier in
 * the request (by the session's database driver, say) is reopened for that, outside a transaction. After the
 * request, each such connection that was used gives its Client::causalToken() (its writes, and the token it
 * started from), stored when it changed. A token is a few dozen bytes per backend; on a backend without replicas
 * it is never made.
 */
final class CausalTokens
{
    /** SESSION_KEY is the Laravel session key of the tokens, by connection name. */
    public const SESSION_KEY = 'tether_causal';

    /** @var array<string, string> the tokens of the request being handled, by connection name */
    private static array $pending = [];

    public function __construct(private readonly DatabaseManager $db)
    {
    }

    /**
     * pending returns the token the current request's session holds for connection $name, null when none: what
     * TetherConnector passes as the Client's causal_token for a connection with `causal` => true.
     */
    public static function pending(string $name): ?string
    {
        return self::$pending[$name] ?? null;
    }

    /**
     * handle runs the request with the session's tokens handed to the connections, and keeps their new tokens.
     *
     * @param \Closure(Request): mixed $next
     */
    public function handle(Request $request, \Closure $next): mixed
    {
        if (!$request->hasSession()) {
            return $next($request);
        }
        $session = $request->session();
        $stored = $session->get(self::SESSION_KEY);
        $tokens = [];
        foreach (\is_array($stored) ? $stored : [] as $name => $token) {
            if (\is_string($token) && $token !== '') {
                $tokens[(string) $name] = $token;
            }
        }
        self::$pending = $tokens;
        try {
            foreach ($this->db->getConnections() as $name => $connection) {
                if (isset($tokens[$name]) && self::causal($connection) && $connection->transactionLevel() === 0) {
                    $connection->disconnect(); // the next statement reconnects, with the token
                }
            }
            $response = $next($request);
            $kept = $tokens;
            foreach ($this->db->getConnections() as $name => $connection) {
                if (self::causal($connection)) {
                    $token = $connection->tetherCausalToken();
                    if ($token !== '') {
                        $kept[$name] = $token;
                    }
                }
            }
            if ($kept !== $tokens) {
                $session->put(self::SESSION_KEY, $kept);
            }

            return $response;
        } finally {
            self::$pending = [];
        }
    }

    /** causal tells whether $connection is a tether connection with `causal` => true in its config. */
    private static function causal(Connection $connection): bool
    {
        return $connection->getConfig('causal') === true && \method_exists($connection, 'tetherCausalToken');
    }
}
