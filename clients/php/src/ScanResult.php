<?php

declare(strict_types=1);

namespace Tether;

/**
 * ScanResult is one page of rows: from Client::scan(), Client::readRows() or Client::queryPage().
 *
 * rows are associative (column name => value), in key order for scan and readRows. cursor is non-null when more
 * rows may follow: pass it back as the `$cursor` argument of the same call, with the same other arguments, to get
 * the next page. It is opaque bytes (a PHP string that may not be valid UTF-8): store it as it is, e.g. base64 in a
 * URL; never build one yourself. A page may hold fewer rows than the limit, even none, and still have a cursor.
 *
 * Iterating a ScanResult iterates its rows; count() is the number of rows of this page.
 *
 * @implements \IteratorAggregate<int, array<string, mixed>>
 */
final class ScanResult implements \IteratorAggregate, \Countable
{
    /**
     * @param list<array<string, mixed>> $rows
     */
    public function __construct(
        public readonly array $rows,
        public readonly ?string $cursor,
    ) {
    }

    /** hasMore tells whether more rows may follow this page (it has a cursor). */
    public function hasMore(): bool
    {
        return $this->cursor !== null;
    }

    /** @return \ArrayIterator<int, array<string, mixed>> */
    public function getIterator(): \ArrayIterator
    {
        return new \ArrayIterator($this->rows);
    }

    public function count(): int
    {
        return \count($this->rows);
    }
}
