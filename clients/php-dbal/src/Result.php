<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Driver\Result as ResultInterface;
use Tether\ColumnarResult;

/**
 * Result holds the whole answer of one statement, as tetherd sends it at once: the rows, their column names, and
 * the number of rows affected (for a statement that returns rows, the number of rows). Every fetch mode reads it
 * in order; free() lets the rows go.
 *
 * Values are what tetherd decodes (docs/protocol.md): null, int, float, bool (PostgreSQL booleans), or string
 * (text, bytes, exact DECIMAL digits, dates and times), which DBAL's Types convert. Datetimes, which tetherd sends in
 * ISO 8601 form ("2024-02-29T23:59:59.5"), are rewritten into PDO's text ("2024-02-29 23:59:59.5") unless the
 * connection's `tether_sql_datetimes` parameter is false. With duplicate column names in one result the last one
 * wins, as in tetherd's rows: alias them.
 */
final class Result implements ResultInterface
{
    private int $cursor = 0;

    /**
     * @param list<string> $columns
     * @param list<list<mixed>> $rows each row's values in column order
     */
    private function __construct(
        private array $columns,
        private array $rows,
        private readonly int $affectedRows,
    ) {
    }

    /**
     * fromColumns builds the result of a query answered in column-oriented form (outside a transaction).
     *
     * @param bool $sqlDatetimes rewrite ISO 8601 datetimes into the text PDO returns (see withSqlDatetimes())
     */
    public static function fromColumns(ColumnarResult $result, bool $sqlDatetimes): self
    {
        $columns = $result->columns();
        $data = [];
        foreach ($columns as $name) {
            $data[] = $result->column($name);
        }
        $rows = [];
        $n = \count($result);
        if (\count($columns) === 1) {
            foreach ($data[0] as $value) {
                $rows[] = [$value];
            }
        } elseif ($columns !== []) {
            for ($i = 0; $i < $n; $i++) {
                $rows[] = \array_column($data, $i);
            }
        }

        return new self($columns, $sqlDatetimes ? self::withSqlDatetimes($rows) : $rows, \count($rows));
    }

    /**
     * fromRows builds the result of a query answered as associative rows (inside a transaction); the column names
     * come from the first row, so a result without rows has no columns.
     *
     * @param list<array<string, mixed>> $rows
     * @param bool $sqlDatetimes as for fromColumns()
     */
    public static function fromRows(array $rows, bool $sqlDatetimes): self
    {
        $columns = $rows === [] ? [] : \array_map('strval', \array_keys($rows[0]));
        $numeric = [];
        foreach ($rows as $row) {
            $numeric[] = \array_values($row);
        }

        return new self($columns, $sqlDatetimes ? self::withSqlDatetimes($numeric) : $numeric, \count($numeric));
    }

    /** fromAffectedRows builds the result of a statement that returns no rows. */
    public static function fromAffectedRows(int $affectedRows): self
    {
        return new self([], [], $affectedRows);
    }

    /**
     * withSqlDatetimes rewrites tetherd's ISO 8601 datetimes ("2024-02-29T23:59:59.5", a timestamptz with its
     * offset "...+02:00") into the text pdo_mysql and pdo_pgsql return ("2024-02-29 23:59:59.5", "...+02"). A text
     * value that is exactly such a datetime is rewritten too (the reply does not say a column's type): turn the
     * `tether_sql_datetimes` parameter off if you store such strings.
     *
     * @param list<list<mixed>> $rows
     * @return list<list<mixed>>
     */
    private static function withSqlDatetimes(array $rows): array
    {
        foreach ($rows as $r => $row) {
            foreach ($row as $c => $value) {
                if (\is_string($value) && isset($value[18]) && $value[10] === 'T' && $value[4] === '-' && $value[13] === ':'
                    && \preg_match('/^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:\d\d)?$/D', $value, $m) === 1) {
                    $offset = $m[3] ?? '';
                    if ($offset === 'Z') {
                        $offset = '+00';
                    } elseif (\str_ends_with($offset, ':00')) {
                        $offset = \substr($offset, 0, 3);
                    }
                    $rows[$r][$c] = $m[1] . ' ' . $m[2] . $offset;
                }
            }
        }

        return $rows;
    }

    public function fetchNumeric(): array|false
    {
        return $this->rows[$this->cursor++] ?? false;
    }

    public function fetchAssociative(): array|false
    {
        $row = $this->rows[$this->cursor++] ?? null;

        return $row === null ? false : \array_combine($this->columns, $row);
    }

    public function fetchOne(): mixed
    {
        $row = $this->rows[$this->cursor++] ?? null;

        return $row === null ? false : $row[0];
    }

    public function fetchAllNumeric(): array
    {
        $rows = \array_slice($this->rows, $this->cursor);
        $this->cursor = \count($this->rows);

        return $rows;
    }

    public function fetchAllAssociative(): array
    {
        $rows = [];
        while (($row = $this->fetchAssociative()) !== false) {
            $rows[] = $row;
        }

        return $rows;
    }

    public function fetchFirstColumn(): array
    {
        $values = [];
        while (($row = $this->fetchNumeric()) !== false) {
            $values[] = $row[0];
        }

        return $values;
    }

    /** rowCount returns the rows affected by an INSERT, UPDATE or DELETE; for a query, the number of rows. */
    public function rowCount(): int
    {
        return $this->affectedRows;
    }

    /** columnCount returns the number of columns (0 for a statement without rows, and inside a transaction for a query that returned no rows). */
    public function columnCount(): int
    {
        return \count($this->columns);
    }

    /**
     * getColumnName returns the name of the column at $index (0-based), as DBAL 4's Result does.
     *
     * @throws \OutOfBoundsException no column at $index
     */
    public function getColumnName(int $index): string
    {
        return $this->columns[$index] ?? throw new \OutOfBoundsException(\sprintf('no column %d in a result of %d columns', $index, \count($this->columns)));
    }

    public function free(): void
    {
        $this->rows = [];
        $this->cursor = 0;
    }
}
