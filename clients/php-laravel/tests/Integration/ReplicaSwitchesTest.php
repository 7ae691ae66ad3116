<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Http\Request;
use Illuminate\Session\ArraySessionHandler;
use Illuminate\Session\Store;
use Tether\Laravel\CausalTokens;
use Tether\Laravel\Tests\Support\Databases;
use Tether\Tests\Support\ReplicaAdmin;

require_once __DIR__ . '/../../../php/tests/Support/ReplicaAdmin.php';

/**
 * ReplicaSwitchesTest maps Laravel's read/write switches onto a tetherd backend with replicas (env
 * TETHER_IT_RMYSQL_BACKEND: the MariaDB pair, scripts/lib/integration.sh with TETHER_IT_REPLICAS=1). Where a read ran
 * is read from a marker table whose row differs on the primary and the replica (ReplicaAdmin::markHosts()). Every
 * connection has a socket of its own (persistent off), so that tetherd's own read-your-writes for a socket's writes
 * plays no part.
 *
 * @group replicas
 */
final class ReplicaSwitchesTest extends TestCase
{
    private const MARKER = 'php_whoami';

    /**
     * REPLICATED: the replicated backend, a socket of its own, and no session settings: a SET counts, on tetherd,
     * as a write of the client's, whose reads then go to the primary until a replica has what the primary had
     * after it (at least one monitor interval), which would hide where a plain read goes.
     */
    private const REPLICATED = ['backend' => 'rmysql', 'database' => '', 'persistent' => false, 'charset' => null, 'collation' => null, 'strict' => null];

    private ReplicaAdmin $admin;
    private bool $delayed = false;

    protected function setUp(): void
    {
        parent::setUp();
        $this->admin = new ReplicaAdmin('mysql');
        $this->admin->markHosts(self::MARKER);
        $this->waitUntilReplicaServes();
    }

    protected function tearDown(): void
    {
        parent::tearDown();
        if ($this->delayed) {
            $this->admin->delay(0);
        }
    }

    public function testPlainSelectReadsTheReplica(): void
    {
        $db = $this->replicated();
        self::assertSame('replica', $this->who($db));
    }

    public function testSelectWithoutReadPdoRunsOnThePrimary(): void
    {
        $db = $this->replicated();
        self::assertSame('primary', $db->selectOne('SELECT who FROM ' . self::MARKER, [], false)->who);
        self::assertSame('primary', $db->table(self::MARKER)->useWritePdo()->value('who'), "the query builder's useWritePdo()");
    }

    public function testStickyReadsThePrimaryAfterAWrite(): void
    {
        $sticky = $this->replicated(['sticky' => true]);
        self::assertSame('replica', $this->who($sticky), 'before any write');
        $sticky->recordsHaveBeenModified();
        self::assertSame('primary', $this->who($sticky), 'sticky: the rest of the request reads the primary');

        $plain = $this->replicated(['sticky' => false], 'plain');
        $plain->recordsHaveBeenModified();
        self::assertSame('replica', $this->who($plain), 'not sticky: the replica still serves reads');
    }

    public function testCausalTokenFollowsTheUserToTheNextRequest(): void
    {
        $table = 'causal_' . \bin2hex(\random_bytes(4));
        $db = $this->replicated();
        $db->statement("CREATE TABLE $table (id INT PRIMARY KEY, v INT NOT NULL)");
        try {
            $this->admin->waitCaughtUp();
            $this->admin->delay(2);
            $this->delayed = true;
            $this->waitUntilReplicaServes();

            $session = new Store('laravel_session', new ArraySessionHandler(10));
            $request = Request::create('/posts', 'POST');
            $request->setLaravelSession($session);

            // Request 1 writes through a causal connection; the middleware keeps its token in the session.
            $first = $this->replicated(['causal' => true], 'default', fresh: true);
            (new CausalTokens($this->capsule->getDatabaseManager()))->handle($request, static function () use ($first, $table) {
                $first->table($table)->insert(['id' => 1, 'v' => 42]);

                return 'created';
            });
            $tokens = $session->get(CausalTokens::SESSION_KEY);
            self::assertIsArray($tokens);
            self::assertNotSame('', $tokens['default'] ?? '');

            // Request 2, on another socket (another worker): with the session's token it reads the write.
            $this->replicated(['causal' => true], 'default', fresh: true);
            $next = Request::create('/posts/1');
            $next->setLaravelSession($session);
            $seen = (new CausalTokens($this->capsule->getDatabaseManager()))->handle($next, fn () => $this->capsule->getConnection()->table($table)->where('id', 1)->value('v'));
            self::assertSame(42, $seen);

            // The same read without the middleware: the late replica answers (what the token prevents).
            $without = $this->replicated(['causal' => true], 'default', fresh: true);
            self::assertNull($without->table($table)->where('id', 1)->value('v'), 'without the token the replica is behind: else this test proves nothing; read ran on ' . $this->who($without));
        } finally {
            $this->replicated([], 'cleanup', fresh: true)->statement("DROP TABLE IF EXISTS $table");
        }
    }

    /**
     * replicated returns a connection named $name to the replicated backend, with a socket of its own (setUp()
     * waited until the replica serves reads).
     *
     * @param array<string, mixed> $overrides
     */
    private function replicated(array $overrides = [], string $name = 'default', bool $fresh = false): Connection
    {
        $config = Databases::tetherConfig(Databases::MYSQL, $overrides + self::REPLICATED);
        if ($this->capsule === null || $fresh) {
            if ($this->capsule !== null) {
                foreach ($this->capsule->getDatabaseManager()->getConnections() as $connection) {
                    $connection->disconnect();
                }
            }
            $this->capsule = Databases::capsule(Databases::MYSQL, $config);
        }
        if ($name !== 'default') {
            $this->capsule->addConnection($config, $name);
        }
        return $this->capsule->getConnection($name);
    }

    /** waitUntilReplicaServes polls, on fresh sockets, until a plain read runs on the replica (at most 15 s). */
    private function waitUntilReplicaServes(): void
    {
        $config = Databases::tetherConfig(Databases::MYSQL, self::REPLICATED);
        $deadline = \microtime(true) + 15;
        $streak = 0;
        do {
            $probe = Databases::capsule(Databases::MYSQL, $config);
            $who = $probe->getConnection()->selectOne('SELECT who FROM ' . self::MARKER)->who;
            $probe->getConnection()->disconnect();
            // On the replica 3 times in a row, 250 ms apart: past any probe that saw its replication restart.
            $streak = $who === 'replica' ? $streak + 1 : 0;
            if ($streak === 3) {
                if ($this->capsule !== null) {
                    $this->capsule->setAsGlobal();
                }

                return;
            }
            \usleep(250_000);
        } while (\microtime(true) < $deadline);
        self::fail('no read reached the replica within 15 s');
    }

    private function who(Connection $db): string
    {
        return $db->selectOne('SELECT who FROM ' . self::MARKER)->who;
    }
}
