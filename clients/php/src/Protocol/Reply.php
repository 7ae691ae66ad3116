<?php

declare(strict_types=1);

namespace Tether\Protocol;

use Tether\ExecResult;

/**
 * Reply turns successful reply maps into the values the client returns. Each function returns null when the map
 * does not have the shape docs/protocol.md gives it; the caller reports that as a malformed reply.
 *
 * @internal the wire layer; use Tether\Client
 */
final class Reply
{
    /**
     * rows turns a `query` reply {columns, rows} into a list of associative rows (column name => value), at most
     * $limit of them. A row is built with one array_combine, no per-cell work; with duplicate column names the
     * last one wins, so alias them in SQL.
     *
     * @param array<mixed> $reply
     * @return list<array<string, mixed>>|null
     */
    public static function rows(array $reply, int $limit = \PHP_INT_MAX): ?array
    {
        $columns = $reply['columns'] ?? null;
        $rows = $reply['rows'] ?? null;
        if (!\is_array($columns) || !\is_array($rows)) {
            return null;
        }
        $result = [];
        try {
            foreach ($rows as $row) {
                if ($limit-- === 0) {
                    break;
                }
                $result[] = \array_combine($columns, $row);
            }
        } catch (\TypeError|\ValueError) {
            // a row that is not an array, or not as long as the column list
            return null;
        }

        return $result;
    }

    /**
     * exec turns an `exec` reply {affected, insert_id} into an ExecResult; a missing insert_id counts as 0.
     *
     * @param array<mixed> $reply
     */
    public static function exec(array $reply): ?ExecResult
    {
        $affected = $reply['affected'] ?? null;
        $insertId = $reply['insert_id'] ?? 0;
        if (!\is_int($affected) || !\is_int($insertId)) {
            return null;
        }

        return new ExecResult($affected, $insertId);
    }
}
