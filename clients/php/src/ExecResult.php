<?php

declare(strict_types=1);

namespace Tether;

/**
 * ExecResult is the outcome of an `exec` statement: the number of rows it affected, and the backend's last
 * insert id (MySQL LAST_INSERT_ID(), SQLite last_insert_rowid(); always 0 on PostgreSQL, which has none: use
 * INSERT ... RETURNING with query()).
 */
final class ExecResult
{
    public function __construct(
        public readonly int $affectedRows,
        public readonly int $lastInsertId,
    ) {
    }
}
