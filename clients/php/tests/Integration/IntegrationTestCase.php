<?php

declare(strict_types=1);

namespace Tether\Tests\Integration;

use PHPUnit\Framework\TestCase;
use PHPUnit\Framework\TestSuite;
use Tether\Client;
use Tether\Exception\TetherException;

/**
 * IntegrationTestCase runs tests against a real tetherd, reached at env TETHER_SOCKET. Without it, or when it does
 * not answer a ping, every test FAILS: an integration suite that silently skips proves nothing.
 *
 * Backends under test: env TETHER_TEST_BACKENDS (comma-separated names, default "main"), each with its type from
 * env TETHER_TEST_BACKEND_TYPES ("main=sqlite,maria=mysql,pg=postgres,cass=cassandra,bt=bigtable"; default
 * "main=sqlite"). SQL tests run on every backend that is not of type cassandra or bigtable (one of an undeclared
 * type fails); the Cassandra and Bigtable suites run on the backends of their type, and are not built at all when
 * there is none (see suiteForBackendsOf()), so that they are neither skipped nor counted.
 * Tables are created with unique names and dropped after each test.
 */
abstract class IntegrationTestCase extends TestCase
{
    protected Client $client;

    /** @var list<array{string, string}> [backend, table] to drop in tearDown */
    private array $tables = [];

    protected function setUp(): void
    {
        $socket = getenv('TETHER_SOCKET');
        if ($socket === false || $socket === '') {
            self::fail('TETHER_SOCKET is not set: the integration suite needs a running tetherd (see clients/php/README.md)');
        }
        $this->client = $this->createClient(['socket' => $socket]);
        try {
            $this->client->ping();
        } catch (TetherException $e) {
            self::fail(sprintf('tetherd at TETHER_SOCKET=%s does not answer: %s', $socket, $e->getMessage()));
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->tables as [$backend, $table]) {
            try {
                $this->client->execute("DROP TABLE IF EXISTS $table", [], $backend);
            } catch (TetherException) {
                // best effort; the names are unique anyway
            }
        }
        $this->tables = [];
    }

    /**
     * createClient builds the client under test. A suite for another transport overrides it.
     *
     * @param array<string, mixed> $options
     */
    protected function createClient(array $options): Client
    {
        return new Client($options + ['timeout' => 10.0]);
    }

    /** NOT_SQL are the backend types that have no SQL: the SQL tests do not run on them. */
    protected const NOT_SQL = ['cassandra', 'bigtable'];

    /**
     * backends is the data provider of the SQL backends under test: [name, dialect type]. A backend of an
     * undeclared or unknown type is included, so that its tests fail instead of being left out.
     *
     * @return iterable<string, array{string, string}>
     */
    public static function backends(): iterable
    {
        foreach (self::allBackends() as $label => [$name, $type]) {
            if (!\in_array($type, self::NOT_SQL, true)) {
                yield $label => [$name, $type];
            }
        }
    }

    /**
     * backendsOfType is a data provider's body: the backends under test whose type is $type, [name, type].
     *
     * @return iterable<string, array{string, string}>
     */
    protected static function backendsOfType(string $type): iterable
    {
        foreach (self::allBackends() as $label => [$name, $backendType]) {
            if ($backendType === $type) {
                yield $label => [$name, $backendType];
            }
        }
    }

    /** @return iterable<string, array{string, string}> every backend under test: [name, type] */
    private static function allBackends(): iterable
    {
        $types = self::backendTypes();
        foreach (self::backendNames() as $name) {
            $type = $types[$name] ?? 'undeclared';
            yield "$name ($type)" => [$name, $type];
        }
    }

    /**
     * suiteForBackendsOf builds the test suite of $className (PHPUnit calls a test class' static suite()) when a
     * backend of $type is under test, and an empty suite otherwise. PHPUnit 9 turns a data provider that yields
     * nothing into a *skipped* test; an empty suite is no test at all, so a run without such a backend has
     * neither a skip nor a vacuous pass for it.
     */
    protected static function suiteForBackendsOf(string $className, string $type): TestSuite
    {
        foreach (self::backendsOfType($type) as $_) {
            return new TestSuite(new \ReflectionClass($className));
        }
        $suite = new TestSuite();
        $suite->setName($className);

        return $suite;
    }

    /** @return list<string> */
    protected static function backendNames(): array
    {
        $names = getenv('TETHER_TEST_BACKENDS') ?: 'main';

        return array_values(array_filter(array_map('trim', explode(',', $names)), 'strlen'));
    }

    /** @return array<string, string> backend name => sqlite | mysql | postgres | cassandra | bigtable */
    protected static function backendTypes(): array
    {
        $types = [];
        foreach (explode(',', getenv('TETHER_TEST_BACKEND_TYPES') ?: 'main=sqlite') as $pair) {
            [$name, $type] = array_map('trim', explode('=', $pair, 2)) + [1 => ''];
            $types[$name] = $type;
        }

        return $types;
    }

    /**
     * table creates a table with a unique name on $backend, dropped after the test, and returns its name. Columns:
     * id (auto-increment key), name (text), i (64-bit int), f (double), b (binary), d (exact decimal, 2 places;
     * plain text on SQLite, which has no exact decimal type).
     */
    protected function table(string $backend, string $type): string
    {
        $table = 'tether_it_' . bin2hex(random_bytes(5));
        $columns = match ($type) {
            'sqlite' => 'id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, i INTEGER, f REAL, b BLOB, d TEXT',
            'mysql' => 'id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(191), i BIGINT, f DOUBLE, b VARBINARY(1024), d DECIMAL(10,2)',
            'postgres' => 'id BIGSERIAL PRIMARY KEY, name TEXT, i BIGINT, f DOUBLE PRECISION, b BYTEA, d NUMERIC(10,2)',
            default => self::fail("backend $backend has no known type ($type) in TETHER_TEST_BACKEND_TYPES"),
        };
        $suffix = $type === 'mysql' ? ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4' : '';
        $this->client->execute("CREATE TABLE $table ($columns)$suffix", [], $backend);
        $this->tables[] = [$backend, $table];

        return $table;
    }

    /**
     * keyTable creates a table for the key API with a unique name on a SQL backend, dropped after the test, and
     * returns its name. $columns is the column list, e.g. "k VARCHAR(64) PRIMARY KEY, a TEXT, b TEXT".
     */
    protected function keyTable(string $backend, string $type, string $columns): string
    {
        $table = 'tether_kv_' . \bin2hex(\random_bytes(5));
        $suffix = $type === 'mysql' ? ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4' : '';
        $this->client->execute("CREATE TABLE $table ($columns)$suffix", [], $backend);
        $this->dropAfterTest($backend, $table);

        return $table;
    }

    /** dropAfterTest has tearDown() run `DROP TABLE IF EXISTS $table` on $backend (SQL or CQL). */
    protected function dropAfterTest(string $backend, string $table): void
    {
        $this->tables[] = [$backend, $table];
    }

    /** sql rewrites `?` placeholders to `$1`, `$2`, ... for PostgreSQL. */
    protected static function sql(string $type, string $sql): string
    {
        if ($type !== 'postgres') {
            return $sql;
        }
        $n = 0;

        return (string) preg_replace_callback('/\?/', static function () use (&$n): string {
            return '$' . ++$n;
        }, $sql);
    }
}
