<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Connection;
use Illuminate\Database\Events\StatementPrepared;
use Illuminate\Database\Schema\Blueprint;
use Tether\Laravel\TetherMySqlConnection;
use Tether\Laravel\TetherPostgresConnection;
use Tether\Laravel\Tests\Support\Databases;

/**
 * QueryBuilderTest runs Laravel's query builder through the tether driver and checks the rows against the
 * database read directly.
 */
final class QueryBuilderTest extends TestCase
{
    private function seed(Connection $db): void
    {
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('qb_orders');
        $schema->dropIfExists('qb_customers');
        $schema->create('qb_customers', static function (Blueprint $t): void {
            $t->id();
            $t->string('name');
            $t->string('city');
            $t->boolean('vip')->default(false);
        });
        $schema->create('qb_orders', static function (Blueprint $t): void {
            $t->id();
            $t->foreignId('customer_id')->constrained('qb_customers');
            $t->decimal('total', 8, 2);
            $t->dateTime('placed_at');
        });
        $db->table('qb_customers')->insert([
            ['name' => 'ada', 'city' => 'London', 'vip' => true],
            ['name' => 'bob', 'city' => 'Paris', 'vip' => false],
            ['name' => 'cyd', 'city' => 'London', 'vip' => false],
        ]);
        $ids = $db->table('qb_customers')->orderBy('id')->pluck('id', 'name');
        $db->table('qb_orders')->insert([
            ['customer_id' => $ids['ada'], 'total' => '10.50', 'placed_at' => new \DateTimeImmutable('2024-02-29 23:59:59')],
            ['customer_id' => $ids['ada'], 'total' => '4.25', 'placed_at' => new \DateTimeImmutable('2024-03-01 08:00:00')],
            ['customer_id' => $ids['bob'], 'total' => '100.00', 'placed_at' => new \DateTimeImmutable('2024-03-02 12:30:00')],
        ]);
    }

    /** @dataProvider platforms */
    public function testTheConnectionIsTheNativeOneOfItsPlatform(string $platform): void
    {
        $db = $this->connect($platform);
        self::assertInstanceOf($platform === Databases::MYSQL ? TetherMySqlConnection::class : TetherPostgresConnection::class, $db);
        self::assertSame($platform, $db->getDriverName());
        self::assertSame('tether', $db->getConfig('driver'));
        self::assertSame(Databases::env('TETHER_IT_DB'), $db->getDatabaseName());
    }

    /** @dataProvider platforms */
    public function testPlatformAndDatabaseAreReadFromTheServerWhenNotConfigured(string $platform): void
    {
        $db = $this->connect($platform, ['platform' => null, 'database' => '']);
        self::assertInstanceOf($platform === Databases::MYSQL ? TetherMySqlConnection::class : TetherPostgresConnection::class, $db);
        self::assertSame(Databases::env('TETHER_IT_DB'), $db->getDatabaseName());
        self::assertSame(1, $db->selectOne('select 1 as one')->one);
    }

    /** @dataProvider platforms */
    public function testWhereJoinOrderLimitOffsetAndAggregates(string $platform): void
    {
        $db = $this->connect($platform);
        $this->seed($db);

        $london = $db->table('qb_customers')->where('city', 'London')->orderBy('name')->pluck('name')->all();
        self::assertSame(['ada', 'cyd'], $london);

        $page = $db->table('qb_customers')->orderBy('name')->offset(1)->limit(1)->get();
        self::assertCount(1, $page);
        self::assertSame('bob', $page[0]->name);
        self::assertSame(3, $db->table('qb_customers')->count());

        $joined = $db->table('qb_orders as o')
            ->join('qb_customers as c', 'c.id', '=', 'o.customer_id')
            ->where('c.vip', true)
            ->whereBetween('o.placed_at', [new \DateTimeImmutable('2024-02-29 00:00:00'), new \DateTimeImmutable('2024-03-01 23:00:00')])
            ->orderByDesc('o.total')
            ->select('c.name', 'o.total', 'o.placed_at')
            ->get();
        self::assertSame(['10.50', '4.25'], $joined->pluck('total')->map(static fn ($v): string => (string) $v)->all());
        self::assertSame('2024-02-29 23:59:59', $joined[0]->placed_at, 'datetimes come back as PDO gives them');

        $sums = $db->table('qb_orders')->selectRaw('customer_id, count(*) as n, sum(total) as s')->groupBy('customer_id')->orderBy('customer_id')->get();
        self::assertSame([2, 1], $sums->pluck('n')->map(static fn ($v): int => (int) $v)->all());
        self::assertEqualsWithDelta(114.75, (float) $db->table('qb_orders')->sum('total'), 0.001);
        self::assertEqualsWithDelta(100.0, (float) $db->table('qb_orders')->max('total'), 0.001);
        self::assertTrue($db->table('qb_orders')->where('total', '>', 99)->exists());
        self::assertSame(['bob'], $db->table('qb_customers')->whereIn('id', $db->table('qb_orders')->select('customer_id')->where('total', '>', 50))->pluck('name')->all());

        $rows = [];
        foreach ($db->table('qb_customers')->orderBy('id')->cursor() as $row) {
            $rows[] = $row->name;
        }
        self::assertSame(['ada', 'bob', 'cyd'], $rows);
    }

    /** @dataProvider platforms */
    public function testInsertGetIdUpdateDeleteAndUpsert(string $platform): void
    {
        $db = $this->connect($platform);
        $this->seed($db);
        $direct = Databases::direct($platform);

        $id = $db->table('qb_customers')->insertGetId(['name' => 'dee', 'city' => 'Rome']);
        self::assertIsInt($id);
        self::assertSame('dee', $direct->query("SELECT name FROM qb_customers WHERE id = $id")->fetchColumn());
        $next = $db->table('qb_customers')->insertGetId(['name' => 'eve', 'city' => 'Oslo']);
        self::assertSame($id + 1, $next);

        // Statements outside a transaction may run on different pooled connections: each id is its own INSERT's.
        $ids = [];
        for ($i = 0; $i < 20; $i++) {
            $ids["many$i"] = $db->table('qb_customers')->insertGetId(['name' => "many$i", 'city' => 'Many']);
        }
        $inTransaction = $db->transaction(static fn (Connection $db): int => $db->table('qb_customers')->insertGetId(['name' => 'inside', 'city' => 'Many']));
        $ids['inside'] = $inTransaction;
        $stored = $direct->query("SELECT name, id FROM qb_customers WHERE city = 'Many'")->fetchAll(\PDO::FETCH_KEY_PAIR);
        \ksort($stored);
        \ksort($ids);
        self::assertSame($stored, $ids);

        self::assertSame(2, $db->table('qb_customers')->where('city', 'London')->update(['city' => 'Leeds']));
        self::assertSame('2', (string) $direct->query("SELECT COUNT(*) FROM qb_customers WHERE city = 'Leeds'")->fetchColumn());

        self::assertSame(1, $db->table('qb_customers')->where('name', 'eve')->delete());
        self::assertSame(0, $db->table('qb_customers')->where('name', 'nobody')->delete());
        self::assertSame(1, $db->table('qb_orders')->where('total', '100.00')->increment('total', 5));
        self::assertSame('105.00', (string) $direct->query('SELECT total FROM qb_orders WHERE total > 100')->fetchColumn());

        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('qb_stock');
        $schema->create('qb_stock', static function (Blueprint $t): void {
            $t->string('sku')->primary();
            $t->integer('qty');
        });
        $db->table('qb_stock')->insert(['sku' => 'a', 'qty' => 1]);
        $affected = $db->table('qb_stock')->upsert([['sku' => 'a', 'qty' => 5], ['sku' => 'b', 'qty' => 7]], ['sku'], ['qty']);
        self::assertGreaterThanOrEqual(2, $affected);
        self::assertSame(['a' => 5, 'b' => 7], \array_map('intval', $db->table('qb_stock')->orderBy('sku')->pluck('qty', 'sku')->all()));
        self::assertSame(1, $db->table('qb_stock')->insertOrIgnore([['sku' => 'a', 'qty' => 9], ['sku' => 'c', 'qty' => 3]]));
        self::assertSame(5, (int) $db->table('qb_stock')->where('sku', 'a')->value('qty'));
    }

    /** @dataProvider platforms */
    public function testPlaceholdersInsideLiteralsNamedBindingsAndFetchModes(string $platform): void
    {
        $db = $this->connect($platform);
        $q = $platform === Databases::PGSQL ? '"what?"' : '`what?`';
        $row = $db->selectOne("select '?' as lit, ? as v, 'it''s ?' as {$q}", [7]);
        self::assertSame('?', $row->lit);
        self::assertSame(7, (int) $row->v);
        self::assertSame("it's ?", $row->{'what?'});

        $cast = $platform === Databases::PGSQL ? '::int' : '';
        $sum = $db->selectOne("select :a{$cast} + :b{$cast} as s, :a{$cast} as again", ['b' => 2, 'a' => 40]);
        self::assertSame(42, (int) $sum->s);
        self::assertSame(40, (int) $sum->again);

        self::assertSame([true, false], [$db->selectOne('select ? as t', [true])->t == 1, $db->selectOne('select ? as f', [false])->f == 1]);

        // Laravel 8's way to change the fetch mode: a StatementPrepared listener.
        $mode = \PDO::FETCH_ASSOC;
        $db->getEventDispatcher()->listen(StatementPrepared::class, static function (StatementPrepared $e) use (&$mode): void {
            $e->statement->setFetchMode($mode);
        });
        self::assertSame(['one' => 1], $db->selectOne('select 1 as one'));
        $mode = \PDO::FETCH_NUM;
        self::assertSame([1, 2], $db->selectOne('select 1 as a, 2 as b'));
        $mode = \PDO::FETCH_COLUMN;
        self::assertSame([1, 2], \array_map('intval', $db->select('select 1 as n union all select 2 order by n')));
    }

    /**
     * Columns of the same name come back as PDO gives them in every fetch mode: each one by position (FETCH_NUM,
     * FETCH_COLUMN, FETCH_BOTH's numeric keys), the last one by name (FETCH_OBJ, FETCH_ASSOC); for literals, two
     * calls of one function and a join selecting both ids, outside and inside a transaction.
     *
     * @dataProvider platforms
     */
    public function testRepeatedColumnNamesInEveryFetchModeAsPdo(string $platform): void
    {
        $db = $this->connect($platform);
        $direct = Databases::direct($platform);
        foreach (['dup_a' => 'id INT PRIMARY KEY, b_id INT', 'dup_b' => 'id INT PRIMARY KEY, name VARCHAR(10)'] as $table => $columns) {
            $db->statement("DROP TABLE IF EXISTS $table");
            $db->statement("CREATE TABLE $table ($columns)");
        }
        $db->insert('INSERT INTO dup_a (id, b_id) VALUES (1, 10), (2, 20)');
        $db->insert("INSERT INTO dup_b (id, name) VALUES (10, 'ten'), (20, 'twenty')");
        $length = $platform === Databases::PGSQL ? 'LENGTH(CAST(? AS TEXT))' : 'LENGTH(?)';
        $statements = [
            'literals' => ['SELECT 1 AS x, 2 AS x, 3 AS y', [], [[1, 2, 3]], [['x' => 2, 'y' => 3]]],
            // pdo_mysql emulates prepares and names these columns after the values: compared by position only
            'one function twice' => ["SELECT $length, $length", ['apple', 'banana'], [[5, 6]], null],
            'join' => ['SELECT a.id, b.id, b.name FROM dup_a a JOIN dup_b b ON b.id = a.b_id ORDER BY a.id', [],
                [[1, 10, 'ten'], [2, 20, 'twenty']], [['id' => 10, 'name' => 'ten'], ['id' => 20, 'name' => 'twenty']]],
        ];
        $mode = [\PDO::FETCH_OBJ];
        $db->getEventDispatcher()->listen(StatementPrepared::class, static function (StatementPrepared $e) use (&$mode): void {
            $e->statement->setFetchMode(...$mode);
        });
        $pdo = static function (string $sql, array $params, array $mode) use ($direct): array {
            $statement = $direct->prepare($sql);
            $statement->execute($params);

            return $statement->fetchAll(...$mode);
        };
        foreach ([false, true] as $inTransaction) {
            if ($inTransaction) {
                $db->beginTransaction();
            }
            foreach ($statements as $what => [$sql, $params, $numeric, $associative]) {
                $what .= $inTransaction ? ' (in a transaction)' : '';
                $mode = [\PDO::FETCH_NUM];
                self::assertSame($numeric, $db->select($sql, $params), "$what: FETCH_NUM");
                self::assertSame($pdo($sql, $params, $mode), $db->select($sql, $params), "$what: FETCH_NUM as PDO");
                $mode = [\PDO::FETCH_COLUMN, 1];
                self::assertSame(\array_column($numeric, 1), $db->select($sql, $params), "$what: FETCH_COLUMN 1");
                self::assertSame($pdo($sql, $params, $mode), $db->select($sql, $params), "$what: FETCH_COLUMN 1 as PDO");
                if ($associative === null) {
                    continue;
                }
                foreach ([[\PDO::FETCH_ASSOC], [\PDO::FETCH_OBJ], [\PDO::FETCH_BOTH]] as $mode) {
                    self::assertEquals($pdo($sql, $params, $mode), $db->select($sql, $params), "$what: mode {$mode[0]} as PDO");
                }
                $mode = [\PDO::FETCH_ASSOC];
                self::assertSame($associative, $db->select($sql, $params), "$what: FETCH_ASSOC");
                $mode = [\PDO::FETCH_BOTH];
                self::assertSame($pdo($sql, $params, $mode), $db->select($sql, $params), "$what: FETCH_BOTH as PDO, keys in PDO's order");
                $mode = [\PDO::FETCH_OBJ];
                self::assertEquals(\array_map(static fn (array $row): object => (object) $row, $associative), $db->select($sql, $params), "$what: FETCH_OBJ");
            }
            if ($inTransaction) {
                $db->rollBack();
            }
        }
    }

    /** @dataProvider platforms */
    public function testPostgresJsonbQuestionMarkOperatorsAndJsonColumns(string $platform): void
    {
        $db = $this->connect($platform);
        $schema = $db->getSchemaBuilder();
        $schema->dropIfExists('qb_docs');
        $schema->create('qb_docs', static function (Blueprint $t) use ($platform): void {
            $t->id();
            $platform === Databases::PGSQL ? $t->jsonb('meta') : $t->json('meta');
        });
        $db->table('qb_docs')->insert([['meta' => \json_encode(['a' => 1, 'tags' => ['x']])], ['meta' => \json_encode(['b' => 2, 'tags' => ['y']])]]);

        self::assertSame(1, $db->table('qb_docs')->whereJsonContains('meta->tags', 'y')->count());
        self::assertSame(1, $db->table('qb_docs')->where('meta->a', 1)->count());
        if ($platform === Databases::PGSQL) {
            // Laravel writes jsonb's ? operator as ?? (PDO's escape); the driver must send it as ? and not as $n.
            self::assertSame(1, $db->table('qb_docs')->where('meta', '?', 'b')->count());
            self::assertSame(2, $db->table('qb_docs')->where('meta', '?|', $db->raw("array['a', 'b']"))->count());
        }
    }
}
