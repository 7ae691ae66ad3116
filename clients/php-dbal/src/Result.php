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
 * (text, bytes, exact DECIMAL digits, dates and times), which DBAL's Types convert. Datetimes come as PDO gives them
 * ("2024-02-29 23:59:59.5": the client asks tetherd for time_format "sql") unless the connection's
 * `tether_sql_datetimes` parameter is false.
 *
 * Column names may repeat (SELECT a.id, b.id): the numeric fetches (fetchNumeric, fetchAllNumeric, fetchOne,
 * fetchFirstColumn and DBAL's iterateNumeric) give every column in order, as PDO does; the associative ones give
 * the last column of a name its value, at the first one's place, as PDO's FETCH_ASSOC does.
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
     * fromColumns builds the result of a query answered in column-oriented form, which names the columns even when
     * no row came.
     */
    public static function fromColumns(ColumnarResult $result): self
    {
        // By position: reading the columns by name would give every column of a repeated name the last one's values.
        $rows = $result->columns() === [] ? [] : $result->numericRows();

        return new self($result->columns(), $rows, \count($rows));
    }

    /** fromAffectedRows builds the result of a statement that returns no rows. */
    public static function fromAffectedRows(int $affectedRows): self
    {
        return new self([], [], $affectedRows);
    }

    public function fetchNumeric(): array|false
    {
        return $this->rows[$this->cursor++] ?? false;
    }

    /** fetchAssociative returns the next row as column name => value; a repeated name has its last column's value (PDO). */
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
