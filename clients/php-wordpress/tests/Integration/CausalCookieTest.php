<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Tether\WordPress\CausalCookie;
use Tether\WordPress\Tests\Support\Browser;
use Tether\WordPress\Tests\Support\Env;
use Tether\WordPress\Tests\Support\Response;
use Tether\WordPress\Tests\Support\WordPressSite;

/**
 * CausalCookieTest runs a real WordPress site with the drop-in on a tetherd backend with replicas (env
 * TETHER_IT_RMYSQL_BACKEND, the MariaDB pair's database; scripts/lib/integration.sh with
 * TETHER_IT_REPLICAS=1) and TETHER_CAUSAL: a logged-in user's write sets the cookie tether_causal to a token of the
 * backend's position, and the next request's client starts from it (causal_after before its first statement).
 *
 * The next request's read is not shown to come from a replica that was behind: the drop-in's connect runs SET NAMES
 * and SET SESSION sql_mode, and tetherd counts those as the client's writes, so every WordPress request reads the
 * primary until a replica has what the primary had after them (see the report of issue 21); the token's effect
 * on a late replica is shown by the PHP client's own tests (clients/php/tests/Replicas).
 *
 * @group replicas
 */
final class CausalCookieTest extends TestCase
{
    private static ?WordPressSite $site = null;

    public static function setUpBeforeClass(): void
    {
        // The pair's database, as its DSNs name it (scripts/lib/replicas.sh: TETHER_DB_NAME).
        $db = \preg_match('~\)/([^?]+)~', Env::get('TETHER_TEST_MYSQL_PRIMARY_DSN'), $m) === 1 ? $m[1] : throw new \RuntimeException('no database in TETHER_TEST_MYSQL_PRIMARY_DSN');
        $site = WordPressSite::create('causal', 'wpr_', true, null, 0, Env::get('TETHER_IT_RMYSQL_BACKEND'), $db, "\ndefine('TETHER_CAUSAL', true);");
        \register_shutdown_function(static fn () => $site->stop());
        $site->start(2);
        $mysqli = new \mysqli(null, 'root', '', $db, 0, self::replicaAdminSocket('PRIMARY'));
        foreach ($mysqli->query("SHOW TABLES LIKE 'wpr\\_%'")->fetch_all() as [$table]) {
            $mysqli->query("DROP TABLE `$table`");
        }
        $site->install(new Browser());
        self::$site = $site;
    }

    public static function tearDownAfterClass(): void
    {
        self::$site?->stop();
        self::$site = null;
    }

    public function testALoggedInUsersWriteIsCarriedToTheNextRequest(): void
    {
        $v = 'v' . \bin2hex(\random_bytes(4));
        $write = self::probe('causal_write', 'login=1&v=' . $v);
        self::assertTrue($write['json']['ok'], (string) $write['json']['error']);
        $token = self::cookie($write['response']);
        self::assertNotNull($token, 'a logged-in user\'s write sets the cookie ' . CausalCookie::NAME);
        $positions = \json_decode((string) \base64_decode(\strtr($token, '-_', '+/')), true);
        self::assertSame([Env::get('TETHER_IT_RMYSQL_BACKEND')], \array_keys($positions), 'the token holds the backend\'s position');
        self::assertMatchesRegularExpression('/^\d+-\d+-\d+/', $positions[Env::get('TETHER_IT_RMYSQL_BACKEND')], 'a MariaDB GTID position');

        $read = self::probe('causal_read', '', CausalCookie::NAME . '=' . $token);
        self::assertSame($positions, $read['json']['causal'], 'the next request\'s client starts from the cookie\'s token');
        self::assertSame($v, $read['json']['value']);
        self::assertNull(self::cookie($read['response']), 'a request that only read sets no cookie');
    }

    public function testNoCookieForAVisitorAndABadCookieIsIgnored(): void
    {
        $write = self::probe('causal_write', 'v=anonymous');
        self::assertTrue($write['json']['ok']);
        self::assertNull(self::cookie($write['response']), 'a visitor who is not logged in gets no cookie');

        foreach (['not-a-token', 'e30', \str_repeat('A', 3000)] as $bad) {
            $read = self::probe('causal_read', '', CausalCookie::NAME . '=' . $bad);
            self::assertSame([], $read['json']['causal'], "cookie $bad ignored");
            self::assertSame('anonymous', $read['json']['value'], (string) $read['json']['error']);
        }
    }

    /** @return array{response: Response, json: array<string, mixed>} */
    private static function probe(string $case, string $query, string $cookie = ''): array
    {
        $response = (new Browser())->get(self::$site->url('/tether-probe.php?case=' . $case . ($query !== '' ? '&' . $query : '')), $cookie !== '' ? ['Cookie' => $cookie] : []);
        if ($response->status !== 200) {
            self::fail("probe $case: HTTP {$response->status}: " . \substr($response->body, 0, 2000) . "\n" . \substr(self::$site->serverLog(), -3000));
        }

        return ['response' => $response, 'json' => $response->json()['result']];
    }

    private static function cookie(Response $response): ?string
    {
        $header = $response->headers['set-cookie'] ?? '';

        return \preg_match('/(?:^|[\s,;])' . CausalCookie::NAME . '=([A-Za-z0-9_-]+)/', $header, $m) === 1 ? $m[1] : null;
    }

    /** replicaAdminSocket returns the Unix socket of the pair's $role from its admin DSN (root@unix(...)/db). */
    private static function replicaAdminSocket(string $role): string
    {
        $dsn = Env::get("TETHER_TEST_MYSQL_{$role}_ADMIN_DSN");
        if (\preg_match('~@unix\(([^)]+)\)~', $dsn, $m) !== 1) {
            throw new \RuntimeException("TETHER_TEST_MYSQL_{$role}_ADMIN_DSN: no unix socket in $dsn");
        }

        return $m[1];
    }
}
