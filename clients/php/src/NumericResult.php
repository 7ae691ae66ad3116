<?php

declare(strict_types=1);

namespace Tether;

use Tether\Exception\LogicException;

/**
 * NumericResult is a result with each row as the list of its values in column order (PDO's FETCH_NUM, mysqli's
 * MYSQLI_NUM), from Client::queryNumeric() and Transaction::queryNumeric().
 *
 * Every column is kept whatever its name: SELECT a.id, b.id gives two ids, SELECT LENGTH(?), LENGTH(?) two
 * lengths. $columns names them in the same order (a name may repeat). The rows are the arrays tetherd's reply
 * decoded to, not copies: reading them costs nothing more.
 *
 * associative() builds associative rows as PDO's FETCH_ASSOC does: with a repeated name the last column's value
 * wins, at the first one's place in the row.
 *
 * Iterating a NumericResult iterates its rows; count() is the number of rows.
 *
 * @implements \IteratorAggregate<int, list<mixed>>
 */
final class NumericResult implements \IteratorAggregate, \Countable
{
    /**
     * @internal built by the client from a reply; the shape is checked there (Protocol\Reply::numeric())
     * @param list<string> $columns the column names, in order; a name may repeat
     * @param list<list<mixed>> $rows each row's values in column order, as many as there are columns
     */
    public function __construct(
        public readonly array $columns,
        public readonly array $rows,
    ) {
    }

    /** count returns the number of rows. */
    public function count(): int
    {
        return \count($this->rows);
    }

    /** @return \ArrayIterator<int, list<mixed>> */
    public function getIterator(): \ArrayIterator
    {
        return new \ArrayIterator($this->rows);
    }

    /**
     * column returns the values of the column at position $i (0-based, in $columns order), one per row.
     *
     * @return list<mixed>
     * @throws LogicException no column at that position
     */
    public function column(int $i): array
    {
        if (!isset($this->columns[$i])) {
            throw new LogicException(\sprintf('no column at position %d; this result has %d', $i, \count($this->columns)));
        }

        return \array_column($this->rows, $i);
    }

    /**
     * associative returns the rows as column name => value, as Client::query() does: with a repeated column name
     * the last one's value wins (PDO's FETCH_ASSOC). Each call builds a new list.
     *
     * @return list<array<string, mixed>>
     */
    public function associative(): array
    {
        $columns = $this->columns;
        $rows = [];
        foreach ($this->rows as $row) {
            $rows[] = \array_combine($columns, $row);
        }

        return $rows;
    }
}
