<?php

declare(strict_types=1);

namespace Tether;

use Tether\Exception\LogicException;

/**
 * ColumnarResult is a result in column-oriented form (docs/protocol.md, *Column-oriented results*): one array per
 * column, each with count() values in row order. Every join answers this way, and so do queryColumns(),
 * scanColumns() and readRowsColumns().
 *
 * Decoding it costs a few long arrays instead of one array per row, so the cheapest way to use it is by column:
 * column('id') is the decoded array itself, not a copy. rows() builds the usual list of associative rows when
 * you need them, and iterating builds one row at a time.
 *
 * Column names may repeat (SELECT a.id, b.id; SELECT LENGTH(?), LENGTH(?)): every column is kept, in order, and
 * columnAt() and numericRows() read them by position. What reads by name follows PDO's FETCH_ASSOC: column()
 * returns the last column of that name, and in rows() and iteration the last one's value wins, at the first
 * one's place in the row.
 *
 * cursor() is non-null when more rows may follow (a scan or readRows page): pass it back as `$cursor` of the same
 * call for the next page. It is opaque bytes; never build one yourself.
 *
 * @implements \IteratorAggregate<int, array<string, mixed>>
 */
final class ColumnarResult implements \IteratorAggregate, \Countable
{
    /** @var array<string, int>|null column name => index in data, built on the first column() */
    private ?array $index = null;

    /**
     * @internal built by the client from a reply; the shape is checked there (Protocol\Reply::columns())
     * @param list<string> $columns
     * @param list<list<mixed>> $data one list per column, each with $count values
     */
    public function __construct(
        private readonly array $columns,
        private readonly int $count,
        private readonly array $data,
        private readonly ?string $cursor = null,
    ) {
    }

    /** count returns the number of rows. */
    public function count(): int
    {
        return $this->count;
    }

    /**
     * columns returns the column names, in order.
     *
     * @return list<string>
     */
    public function columns(): array
    {
        return $this->columns;
    }

    /**
     * column returns the values of column $name, one per row in row order (null for SQL NULL, and for the right
     * columns of a left join's row that matched nothing). The array is the decoded one, shared and not copied.
     * When several columns have that name, the last one's (as PDO); columnAt() reads the others.
     *
     * @return list<mixed>
     * @throws LogicException no column has that name
     */
    public function column(string $name): array
    {
        $this->index ??= \array_flip($this->columns);
        $i = $this->index[$name] ?? throw new LogicException(\sprintf(
            'no column %s in this result; its columns: %s',
            \var_export($name, true),
            \implode(', ', $this->columns),
        ));

        return $this->data[$i];
    }

    /**
     * columnAt returns the values of the column at position $i (0-based, in columns() order), as column() does by
     * name: the way to read every column of a result whose names repeat (SELECT a.id, b.id).
     *
     * @return list<mixed>
     * @throws LogicException no column at that position
     */
    public function columnAt(int $i): array
    {
        return $this->data[$i] ?? throw new LogicException(\sprintf('no column at position %d; this result has %d', $i, \count($this->columns)));
    }

    /**
     * numericRows returns the rows as lists of values in column order (PDO's FETCH_NUM), every column kept
     * whatever its name, as Client::queryNumeric() returns them. Each call builds a new list.
     *
     * @return list<list<mixed>>
     */
    public function numericRows(): array
    {
        $data = $this->data;
        $rows = [];
        if (\count($data) === 1) {
            foreach ($data[0] as $value) {
                $rows[] = [$value];
            }

            return $rows;
        }
        if ($data === []) {
            // no columns: count() rows of nothing (a backend that answers rows without columns)
            return \array_fill(0, $this->count, []);
        }
        for ($i = 0, $n = $this->count; $i < $n; $i++) {
            $rows[] = \array_column($data, $i);
        }

        return $rows;
    }

    /**
     * rows returns the rows as a list of associative rows (column name => value), as query() returns them; with a
     * repeated column name the last one's value wins (see the class comment). Each call builds a new list: keep
     * it rather than calling again.
     *
     * @return list<array<string, mixed>>
     */
    public function rows(): array
    {
        // One array_combine(columns, array_column(data, i)) per row: both run in C, and each row is allocated at
        // its final size. tests/Benchmark/columnar-rows.php timed seven ways (PHP 8.2, opcache, no JIT; us per
        // reply, decode included; in brackets the row-oriented reply, then the runner-up): 1 column x 1000 rows
        // 27 (50, 29 writing column by column); 4 x 10: 1.4 (1.2, 1.4); 4 x 1000: 97 (93, 98); 12 x 1000: 240
        // (230, 250 transposing with array_map(null)); 30 x 200: 112 (99, 115). Only for very tall narrow results
        // does writing column by column win (4 x 100,000: 14.8 ms against 17.5). So rows() costs about what a
        // row-oriented reply costs; the column-oriented form pays off when read by column.
        $columns = $this->columns;
        $data = $this->data;
        $rows = [];
        if (\count($columns) === 1) {
            $name = $columns[0];
            foreach ($data[0] as $value) {
                $rows[] = [$name => $value];
            }

            return $rows;
        }
        for ($i = 0, $n = $this->count; $i < $n; $i++) {
            $rows[] = \array_combine($columns, \array_column($data, $i));
        }

        return $rows;
    }

    /**
     * getIterator yields the rows one at a time (keys 0, 1, 2, ...), each built when it is reached, so a large
     * result is never held twice.
     *
     * @return \Generator<int, array<string, mixed>, mixed, void>
     */
    public function getIterator(): \Generator
    {
        $columns = $this->columns;
        $data = $this->data;
        if (\count($columns) === 1) {
            $name = $columns[0];
            foreach ($data[0] as $i => $value) {
                yield $i => [$name => $value];
            }

            return;
        }
        for ($i = 0, $n = $this->count; $i < $n; $i++) {
            yield $i => \array_combine($columns, \array_column($data, $i));
        }
    }

    /** cursor returns the cursor of the next page, or null when this is the last one. */
    public function cursor(): ?string
    {
        return $this->cursor;
    }

    /** hasMore tells whether more rows may follow this page (it has a cursor). */
    public function hasMore(): bool
    {
        return $this->cursor !== null;
    }
}
