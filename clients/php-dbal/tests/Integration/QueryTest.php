<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\ParameterType;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/** QueryTest: the QueryBuilder's statements and every fetch mode of a Result, compared with a direct PDO connection. */
final class QueryTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testQueryBuilderInsertSelectUpdateDelete(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'qb_people', self::serialKey($kind) . ', name VARCHAR(40) NOT NULL, age INT NULL', $kind);

        foreach ([['ada', 36], ['bob', 25], ['cy', null]] as [$name, $age]) {
            $inserted = $conn->createQueryBuilder()
                ->insert('qb_people')
                ->values(['name' => '?', 'age' => '?'])
                ->setParameter(0, $name)
                ->setParameter(1, $age, $age === null ? ParameterType::NULL : ParameterType::INTEGER)
                ->executeStatement();
            self::assertSame(1, $inserted);
        }

        $rows = $conn->createQueryBuilder()
            ->select('name', 'age')->from('qb_people')
            ->where('age >= :min')->setParameter('min', 30, ParameterType::INTEGER)
            ->orderBy('name')
            ->executeQuery()->fetchAllAssociative();
        self::assertSame([['name' => 'ada', 'age' => 36]], $rows);

        $updated = $conn->createQueryBuilder()
            ->update('qb_people')->set('age', 'age + 1')
            ->where('age IS NOT NULL')
            ->executeStatement();
        self::assertSame(2, $updated);

        $deleted = $conn->createQueryBuilder()
            ->delete('qb_people')->where('name = :name')->setParameter('name', 'bob')
            ->executeStatement();
        self::assertSame(1, $deleted);

        // What tetherd answered is what the database holds, read directly.
        $direct = self::pdo($kind)->query('SELECT name, age FROM qb_people ORDER BY name')->fetchAll(\PDO::FETCH_ASSOC);
        self::assertSame([['name' => 'ada', 'age' => 37], ['name' => 'cy', 'age' => null]], $direct);
        self::assertSame($direct, $conn->fetchAllAssociative('SELECT name, age FROM qb_people ORDER BY name'));

        // Array parameters, expanded by DBAL before the driver sees them.
        $names = $conn->fetchFirstColumn('SELECT name FROM qb_people WHERE name IN (?) ORDER BY name', [['ada', 'cy', 'zed']], [\Doctrine\DBAL\ArrayParameterType::STRING]);
        self::assertSame(['ada', 'cy'], $names);
    }

    /** @dataProvider backends */
    public function testEveryFetchMode(string $kind): void
    {
        $conn = $this->connect($kind);
        self::recreate($conn, 'fetch_modes', 'id INT PRIMARY KEY, label VARCHAR(10)', $kind);
        $conn->executeStatement("INSERT INTO fetch_modes (id, label) VALUES (1, 'one'), (2, 'two'), (3, NULL)");
        $sql = 'SELECT id, label FROM fetch_modes ORDER BY id';

        $result = $conn->executeQuery($sql);
        self::assertSame(2, $result->columnCount());
        self::assertSame(3, $result->rowCount());
        self::assertSame([1, 'one'], $result->fetchNumeric());
        self::assertSame(['id' => 2, 'label' => 'two'], $result->fetchAssociative());
        self::assertSame(3, $result->fetchOne());
        self::assertFalse($result->fetchNumeric());
        self::assertFalse($result->fetchAssociative());
        self::assertFalse($result->fetchOne());

        self::assertSame([[1, 'one'], [2, 'two'], [3, null]], $conn->executeQuery($sql)->fetchAllNumeric());
        self::assertSame([1, 2, 3], $conn->executeQuery($sql)->fetchFirstColumn());
        self::assertSame([1 => 'one', 2 => 'two', 3 => null], $conn->executeQuery($sql)->fetchAllKeyValue());
        self::assertSame(
            [1 => ['label' => 'one'], 2 => ['label' => 'two'], 3 => ['label' => null]],
            $conn->executeQuery($sql)->fetchAllAssociativeIndexed(),
        );
        $seen = [];
        foreach ($conn->executeQuery($sql)->iterateAssociative() as $row) {
            $seen[] = $row['label'];
        }
        self::assertSame(['one', 'two', null], $seen);

        // The rest of a partly read result, then nothing after free().
        $result = $conn->executeQuery($sql);
        $result->fetchNumeric();
        self::assertSame([['id' => 2, 'label' => 'two'], ['id' => 3, 'label' => null]], $result->fetchAllAssociative());
        $result = $conn->executeQuery($sql);
        $result->free();
        self::assertFalse($result->fetchNumeric());

        // A query with no rows still knows its columns (outside a transaction).
        $empty = $conn->executeQuery('SELECT id, label FROM fetch_modes WHERE id < 0');
        self::assertSame(2, $empty->columnCount());
        self::assertSame(0, $empty->rowCount());
        self::assertSame([], $empty->fetchAllAssociative());

        // The same answers as PDO gives on the same database.
        $direct = $this->directDbal($kind);
        self::assertSame($direct->fetchAllAssociative($sql), $conn->fetchAllAssociative($sql));
        self::assertSame($direct->fetchAllNumeric($sql), $conn->fetchAllNumeric($sql));
    }

    /**
     * Columns of the same name each keep their value in the numeric fetches, and the last one wins in the
     * associative ones, as with PDO: for literals, two calls of one function, and a join selecting both ids;
     * outside and inside a transaction.
     *
     * @dataProvider backends
     */
    public function testRepeatedColumnNamesAsPdo(string $kind): void
    {
        $conn = $this->connect($kind);
        $direct = $this->directDbal($kind);
        self::recreate($conn, 'dup_a', 'id INT PRIMARY KEY, b_id INT', $kind);
        self::recreate($conn, 'dup_b', 'id INT PRIMARY KEY, name VARCHAR(10)', $kind);
        $conn->executeStatement("INSERT INTO dup_a (id, b_id) VALUES (1, 10), (2, 20)");
        $conn->executeStatement("INSERT INTO dup_b (id, name) VALUES (10, 'ten'), (20, 'twenty')");
        $length = $kind === 'pgsql' ? 'LENGTH(CAST(? AS TEXT))' : 'LENGTH(?)';
        $statements = [
            'literals' => ['SELECT 1 AS x, 2 AS x, 3 AS y', [], [[1, 2, 3]], [['x' => 2, 'y' => 3]]],
            'one function twice' => ["SELECT $length, $length", ['apple', 'banana'], [[5, 6]], null],
            'join' => ['SELECT a.id, b.id, b.name FROM dup_a a JOIN dup_b b ON b.id = a.b_id ORDER BY a.id', [],
                [[1, 10, 'ten'], [2, 20, 'twenty']], [['id' => 10, 'name' => 'ten'], ['id' => 20, 'name' => 'twenty']]],
        ];
        foreach ([false, true] as $inTransaction) {
            if ($inTransaction) {
                $conn->beginTransaction();
            }
            foreach ($statements as $what => [$sql, $params, $numeric, $associative]) {
                $what .= $inTransaction ? ' (in a transaction)' : '';
                self::assertSame($numeric, $conn->fetchAllNumeric($sql, $params), $what);
                self::assertSame($direct->fetchAllNumeric($sql, $params), $conn->fetchAllNumeric($sql, $params), "$what: as PDO");
                self::assertSame($numeric[0], $conn->fetchNumeric($sql, $params), $what);
                self::assertSame(\array_column($numeric, 0), $conn->fetchFirstColumn($sql, $params), $what);
                self::assertSame($numeric, \iterator_to_array($conn->iterateNumeric($sql, $params), false), $what);
                if ($associative !== null) {
                    // (pdo_mysql emulates prepares: it names the LENGTH columns after the values it put in the SQL)
                    self::assertSame($direct->fetchAllAssociative($sql, $params), $conn->fetchAllAssociative($sql, $params), "$what: as PDO");
                    self::assertSame($associative, $conn->fetchAllAssociative($sql, $params), $what);
                    self::assertSame($associative[0], $conn->fetchAssociative($sql, $params), $what);
                }
                $result = $conn->executeQuery($sql, $params);
                self::assertSame(\count($numeric[0]), $result->columnCount(), $what);
            }
            if ($inTransaction) {
                $conn->rollBack();
            }
        }
    }

    /** @dataProvider backends */
    public function testPreparedStatementWithNamedAndPositionalParameters(string $kind): void
    {
        $conn = $this->connect($kind);
        // A `?` and a `:name` inside string literals are text, not placeholders; PostgreSQL's `::` cast stays.
        $cast = $kind === 'pgsql' ? 'CAST(? AS INT) + 1' : '? + 1';
        $stmt = $conn->prepare("SELECT $cast AS n, 'what? :nope' AS lit");
        $stmt->bindValue(1, 41, ParameterType::INTEGER);
        self::assertSame(['n' => 42, 'lit' => 'what? :nope'], $stmt->executeQuery()->fetchAssociative());

        $stmt = $conn->prepare('SELECT :a AS a, :b AS b, :a AS again');
        $stmt->bindValue('a', 'x');
        $stmt->bindValue(':b', 'y');
        self::assertSame(['a' => 'x', 'b' => 'y', 'again' => 'x'], $stmt->executeQuery()->fetchAssociative());

        if ($kind === 'pgsql') {
            self::assertSame(['n' => 7], $conn->fetchAssociative('SELECT ?::int AS n', [7]));
        }

        // bindParam() (DBAL 3): the variable is read when the statement runs.
        $stmt = $conn->prepare('SELECT ? AS v');
        $value = 'before';
        $stmt->bindParam(1, $value);
        $value = 'after';
        self::assertSame('after', $stmt->executeQuery()->fetchOne());
        $value = 'again';
        self::assertSame('again', $stmt->executeQuery()->fetchOne(), 'a statement runs more than once');
    }

    /** @dataProvider backends */
    public function testQuoteMakesLiteralsTheServerReadsBack(string $kind): void
    {
        $conn = $this->connect($kind);
        foreach (["it's", 'back\\slash \\\'', "new\nline\r\ttab", 'double "quotes"', 'ünïcödé ✓', ''] as $text) {
            self::assertSame($text, $conn->fetchOne('SELECT ' . $conn->quote($text)), var_export($text, true));
        }
    }
}
