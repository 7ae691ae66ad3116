<?php

declare(strict_types=1);

namespace Tether\WordPress;

/**
 * Result is one statement's outcome as mysqli would have given it: for a statement run for its effect, the rows
 * affected and the insert id; for one that returns rows, the column names (even with no rows) and the rows, every
 * value as mysqli's text protocol gives it (a string, or null).
 */
final class Result
{
    /**
     * @param list<string> $columns
     * @param list<list<?string>> $rows each row's values in column order
     */
    private function __construct(
        public readonly bool $isExec,
        public readonly int $affectedRows,
        public readonly int $insertId,
        public readonly array $columns,
        public readonly array $rows,
    ) {
    }

    public static function exec(int $affectedRows, int $insertId): self
    {
        return new self(true, $affectedRows, $insertId, [], []);
    }

    /**
     * @param list<string> $columns
     * @param list<list<?string>> $rows
     */
    public static function rows(array $columns, array $rows): self
    {
        return new self(false, 0, 0, $columns, $rows);
    }

    /** none is the outcome of a statement that returns no result set (SET, START TRANSACTION, ...). */
    public static function none(): self
    {
        return new self(false, 0, 0, [], []);
    }
}
