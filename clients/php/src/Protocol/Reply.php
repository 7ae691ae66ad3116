<?php

declare(strict_types=1);

namespace Tether\Protocol;

use Tether\ColumnarResult;
use Tether\ExecResult;
use Tether\HttpResponse;
use Tether\NumericResult;
use Tether\ScanResult;

/**
 * Reply turns successful reply maps into the values the client returns. Each function returns null when the map
 * does not have the shape docs/protocol.md gives it; decode(), the one entry the client uses, throws MalformedReply
 * then, which the caller reports as a malformed reply.
 *
 * @internal the wire layer; use Tether\Client
 */
final class Reply
{
    /**
     * decode turns a successful reply into what a Client or Transaction method, or a batch operation, returns, as
     * $as says: the name of the function of this class that decodes it (rows, first, numeric, columns, page,
     * sparseRows with $count, exec, affected, counter, http), `done` for true from an {affected} reply (put,
     * mutate_row), `matched` for whether an {affected} reply counts a match (check_and_mutate), `tx` for the handle
     * of a `begin` reply, `ok` for true whatever the reply holds (ping, commit, rollback), or `reply` for the map as
     * it is. It is the one table from method to decoder, for single calls and batch results alike; a new kind of
     * reply is one more arm here.
     *
     * @param array<mixed> $reply
     * @param int $count for sparseRows: the number of keys asked for
     * @throws MalformedReply the reply does not have the shape docs/protocol.md gives it
     */
    public static function decode(string $as, array $reply, int $count = 0): mixed
    {
        return match ($as) {
            'first' => ($row = self::first($reply)) !== false ? $row : throw new MalformedReply(),
            'rows' => self::rows($reply) ?? throw new MalformedReply(),
            'numeric' => self::numeric($reply) ?? throw new MalformedReply(),
            'columns' => self::columns($reply) ?? throw new MalformedReply(),
            'page' => self::page($reply) ?? throw new MalformedReply(),
            'sparseRows' => self::sparseRows($reply, $count) ?? throw new MalformedReply(),
            'exec' => self::exec($reply) ?? throw new MalformedReply(),
            'affected' => self::affected($reply) ?? throw new MalformedReply(),
            'done' => self::affected($reply) !== null ? true : throw new MalformedReply(),
            'matched' => (self::affected($reply) ?? throw new MalformedReply()) > 0,
            'counter' => self::counter($reply) ?? throw new MalformedReply(),
            'http' => self::http($reply) ?? throw new MalformedReply(),
            'tx' => \is_int($reply['tx'] ?? null) ? $reply['tx'] : throw new MalformedReply(),
            'ok' => true,
            'reply' => $reply,
        };
    }

    /**
     * rows turns a `query` reply {columns, rows} into a list of associative rows (column name => value), at most
     * $limit of them. A row is built with one array_combine, no per-cell work; with a repeated column name the
     * last one's value wins, at the first one's place, as in PDO's FETCH_ASSOC (numeric() keeps every column).
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
        if ($limit < \count($rows)) {
            // cut before the loop, which then costs no check per row
            $rows = \array_slice($rows, 0, $limit);
        }
        $result = [];
        try {
            foreach ($rows as $row) {
                $result[] = \array_combine($columns, $row);
            }
        } catch (\TypeError|\ValueError) {
            // a row that is not an array, or not as long as the column list
            return null;
        }

        return $result;
    }

    /**
     * numeric turns a `query` reply {columns, rows} into a NumericResult: the column names and the rows as they
     * were decoded, each the list of its values in column order, so that every column is kept whatever its name.
     * The check is one per row, on its length (as array_combine makes it in rows()), not one per value.
     *
     * @param array<mixed> $reply
     */
    public static function numeric(array $reply): ?NumericResult
    {
        $columns = $reply['columns'] ?? null;
        $rows = $reply['rows'] ?? null;
        if (!\is_array($columns) || !\is_array($rows) || !\array_is_list($columns) || !\array_is_list($rows)) {
            return null;
        }
        $width = \count($columns);
        foreach ($rows as $row) {
            if (!\is_array($row) || \count($row) !== $width) {
                return null;
            }
        }

        return new NumericResult($columns, $rows);
    }

    /**
     * first turns the first row of a `query` or `get` reply {columns, rows} into an associative row, as rows()
     * would (a repeated column name: the last one's value), without building the list: null when there is no row, false when the reply is malformed.
     *
     * @param array<mixed> $reply
     * @return array<string, mixed>|false|null
     */
    public static function first(array $reply): array|false|null
    {
        $columns = $reply['columns'] ?? null;
        $rows = $reply['rows'] ?? null;
        if (!\is_array($columns) || !\is_array($rows)) {
            return false;
        }
        try {
            foreach ($rows as $row) {
                return \array_combine($columns, $row);
            }
        } catch (\TypeError|\ValueError) {
            return false;
        }

        return null;
    }

    /**
     * sparseRows turns a `multi_get` reply into a list of $count elements, each an associative row or null (a
     * key that has no row). A reply with another number of rows is malformed.
     *
     * @param array<mixed> $reply
     * @return list<array<string, mixed>|null>|null
     */
    public static function sparseRows(array $reply, int $count): ?array
    {
        $columns = $reply['columns'] ?? null;
        $rows = $reply['rows'] ?? null;
        if (!\is_array($columns) || !\is_array($rows) || \count($rows) !== $count) {
            return null;
        }
        $result = [];
        try {
            foreach ($rows as $row) {
                $result[] = $row === null ? null : \array_combine($columns, $row);
            }
        } catch (\TypeError|\ValueError) {
            return null;
        }

        return $result;
    }

    /**
     * page turns a reply {columns, rows, cursor?} (scan, read_rows, paged query) into a ScanResult. The cursor is
     * bin on the wire, a string here.
     *
     * @param array<mixed> $reply
     */
    public static function page(array $reply): ?ScanResult
    {
        $cursor = $reply['cursor'] ?? null;
        if ($cursor !== null && !\is_string($cursor)) {
            return null;
        }
        $rows = self::rows($reply);

        return $rows === null ? null : new ScanResult($rows, $cursor);
    }

    /**
     * columns turns a column-oriented reply {columns, count, data, cursor?} (every join; query, scan and read_rows
     * with columnar) into a ColumnarResult, without touching the values: the checks are one per column.
     *
     * @param array<mixed> $reply
     */
    public static function columns(array $reply): ?ColumnarResult
    {
        $columns = $reply['columns'] ?? null;
        $count = $reply['count'] ?? null;
        $data = $reply['data'] ?? null;
        $cursor = $reply['cursor'] ?? null;
        if (!\is_array($columns) || !\is_int($count) || $count < 0 || !\is_array($data) || ($cursor !== null && !\is_string($cursor))
            || \count($data) !== \count($columns) || !\array_is_list($columns) || !\array_is_list($data)) {
            return null;
        }
        foreach ($data as $i => $values) {
            // array_is_list is O(1) on the packed arrays ext-msgpack decodes
            if (!\is_array($values) || \count($values) !== $count || !\array_is_list($values) || !\is_string($columns[$i])) {
                return null;
            }
        }

        return new ColumnarResult($columns, $count, $data, $cursor);
    }

    /**
     * http turns an `http` reply {status, headers: {name: [value...]}, body} into an HttpResponse.
     *
     * @param array<mixed> $reply
     */
    public static function http(array $reply): ?HttpResponse
    {
        $status = $reply['status'] ?? null;
        $headers = $reply['headers'] ?? [];
        $body = $reply['body'] ?? '';
        if (!\is_int($status) || !\is_array($headers) || !\is_string($body)) {
            return null;
        }
        foreach ($headers as $values) {
            if (!\is_array($values) || !\array_is_list($values)) {
                return null;
            }
        }

        return new HttpResponse($status, $headers, $body);
    }

    /**
     * affected returns the `affected` count of a reply {affected, insert_id?} (put, delete, mutate_row,
     * check_and_mutate).
     *
     * @param array<mixed> $reply
     */
    public static function affected(array $reply): ?int
    {
        $affected = $reply['affected'] ?? null;

        return \is_int($affected) ? $affected : null;
    }

    /**
     * counter returns the new value of an `increment` reply: the `value` of its one row [key, family, qualifier,
     * value].
     *
     * @param array<mixed> $reply
     */
    public static function counter(array $reply): ?int
    {
        $value = self::first($reply)['value'] ?? null;

        return \is_int($value) ? $value : null;
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
