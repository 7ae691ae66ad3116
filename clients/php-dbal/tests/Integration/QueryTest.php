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
