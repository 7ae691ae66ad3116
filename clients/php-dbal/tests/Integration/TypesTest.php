<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Connection;
use Doctrine\DBAL\Schema\Table;
use Doctrine\DBAL\Types\Type;
use Doctrine\DBAL\Types\Types;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * TypesTest: DBAL's Types round trip through the driver (convertToDatabaseValue, bound with the type's
 * ParameterType, then read back and converted to PHP), NULL of each, and the PHP values equal those a direct
 * pdo_mysql / pdo_pgsql connection reads from the same rows.
 */
final class TypesTest extends IntegrationTestCase
{
    private const TYPES = [
        'c_integer' => Types::INTEGER,
        'c_bigint' => Types::BIGINT,
        'c_boolean' => Types::BOOLEAN,
        'c_string' => Types::STRING,
        'c_text' => Types::TEXT,
        'c_binary' => Types::BINARY,
        'c_blob' => Types::BLOB,
        'c_datetime' => Types::DATETIME_MUTABLE,
        'c_date' => Types::DATE_IMMUTABLE,
        'c_json' => Types::JSON,
        'c_decimal' => Types::DECIMAL,
        'c_float' => Types::FLOAT,
        'c_guid' => Types::GUID,
    ];

    /** @dataProvider backends */
    public function testRoundTripOfEachType(string $kind): void
    {
        $conn = $this->connect($kind);
        $this->createTable($conn);

        $bytes = "\x00\xff\xfe\x80 not utf-8 \xc3\x28\x00";
        $values = [
            'c_integer' => -2147483648,
            'c_bigint' => '9007199254740993',
            'c_boolean' => true,
            'c_string' => "grüße 'quoted' \"double\" \\ back",
            'c_text' => str_repeat('long text ✓ ', 2000),
            'c_binary' => $bytes,
            'c_blob' => $bytes . str_repeat("\x01\x02", 5000),
            'c_datetime' => new \DateTime('2024-02-29 23:59:58'),
            'c_date' => new \DateTimeImmutable('1999-12-31'),
            'c_json' => ['a' => 1, 'b' => [true, null, 'x'], 'ü' => 1.5],
            'c_decimal' => '12345678.90',
            'c_float' => 0.1 + 0.2,
            'c_guid' => '3f2504e0-4f89-11d3-9a0c-0305e82c3301',
        ];
        self::assertSame(1, $conn->insert('types_rt', ['id' => 1] + $values, ['id' => Types::INTEGER] + self::TYPES));
        self::assertSame(1, $conn->insert('types_rt', ['id' => 2] + array_fill_keys(array_keys($values), null), ['id' => Types::INTEGER] + self::TYPES));
        $false = ['c_boolean' => false] + array_fill_keys(array_keys($values), null);
        $conn->insert('types_rt', ['id' => 3] + $false, ['id' => Types::INTEGER] + self::TYPES);

        $read = $this->read($conn, 1);
        self::assertSame(-2147483648, $read['c_integer']);
        self::assertSame('9007199254740993', (string) $read['c_bigint']);
        self::assertTrue($read['c_boolean']);
        self::assertSame($values['c_string'], $read['c_string']);
        self::assertSame($values['c_text'], $read['c_text']);
        self::assertSame($bytes, $read['c_binary']);
        self::assertSame($values['c_blob'], $read['c_blob']);
        self::assertEquals($values['c_datetime'], $read['c_datetime']);
        self::assertEquals($values['c_date'], $read['c_date']);
        self::assertSame($values['c_json'], $read['c_json']);
        self::assertSame('12345678.90', $read['c_decimal']);
        self::assertEqualsWithDelta(0.3, $read['c_float'], 1e-12);
        self::assertSame($values['c_guid'], $read['c_guid']);

        self::assertSame(array_fill_keys(array_keys($values), null), $this->read($conn, 2));
        self::assertFalse($this->read($conn, 3)['c_boolean']);

        // PDO reads the same PHP values from the rows Tether wrote.
        $direct = $this->directDbal($kind);
        foreach ([1, 2, 3] as $id) {
            self::assertEquals($this->read($direct, $id), $this->read($conn, $id), "row $id");
        }

        // Bytes bound as a stream (ParameterType::LARGE_OBJECT).
        $stream = fopen('php://memory', 'r+b');
        fwrite($stream, $bytes);
        rewind($stream);
        $conn->insert('types_rt', ['id' => 4, 'c_blob' => $stream], ['id' => Types::INTEGER, 'c_blob' => Types::BLOB]);
        self::assertSame($bytes, $this->read($conn, 4)['c_blob']);
    }

    /** @dataProvider backends */
    public function testRawDatetimesAreAsPdoGivesThem(string $kind): void
    {
        $conn = $this->connect($kind);
        $sql = $kind === 'mysql'
            ? "SELECT CAST('2024-02-29 23:59:58' AS DATETIME) AS dt, CAST('2024-02-29' AS DATE) AS d, CAST('23:59:58' AS TIME) AS t, 'plain' AS s"
            : "SELECT TIMESTAMP '2024-02-29 23:59:58' AS dt, DATE '2024-02-29' AS d, TIME '23:59:58' AS t, TIMESTAMPTZ '2024-02-29 23:59:58+00' AT TIME ZONE 'UTC' AS utc, TIMESTAMPTZ '2024-02-29 23:59:58.25+00' AS tz, 'plain' AS s";
        $direct = $this->directDbal($kind)->fetchAssociative($sql);
        self::assertSame('2024-02-29 23:59:58', $direct['dt']);
        self::assertSame($direct, $conn->fetchAssociative($sql));
        $conn->beginTransaction();
        self::assertSame($direct, $conn->fetchAssociative($sql), 'inside a transaction too');
        $conn->commit();

        $iso = $this->connect($kind, ['tether_sql_datetimes' => false]);
        self::assertSame('2024-02-29T23:59:58', $iso->fetchOne($sql));
    }

    private function createTable(Connection $conn): void
    {
        $table = new Table('types_rt');
        $table->addColumn('id', Types::INTEGER);
        foreach (self::TYPES as $column => $type) {
            $options = ['notnull' => false];
            if ($type === Types::DECIMAL) {
                $options += ['precision' => 12, 'scale' => 2];
            }
            if ($type === Types::STRING || $type === Types::BINARY) {
                $options += ['length' => 255];
            }
            $table->addColumn($column, $type, $options);
        }
        $table->setPrimaryKey(['id']);
        $sm = $conn->createSchemaManager();
        if ($sm->tablesExist(['types_rt'])) {
            $sm->dropTable('types_rt');
        }
        $sm->createTable($table);
    }

    /** @return array<string, mixed> the row's columns converted to PHP by their types; streams read to strings */
    private function read(Connection $conn, int $id): array
    {
        $row = $conn->fetchAssociative('SELECT * FROM types_rt WHERE id = ?', [$id]);
        self::assertIsArray($row, "row $id");
        $platform = $conn->getDatabasePlatform();
        $out = [];
        foreach (self::TYPES as $column => $type) {
            $value = Type::getType($type)->convertToPHPValue($row[$column], $platform);
            $out[$column] = is_resource($value) ? stream_get_contents($value) : $value;
        }

        return $out;
    }
}
