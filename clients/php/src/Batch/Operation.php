<?php

declare(strict_types=1);

namespace Tether\Batch;

use Tether\Bigtable\Mutation;
use Tether\Exception\LogicException;
use Tether\Protocol\Request;

/**
 * Operation is one element of Client::batch() or Client::sendBatch(): a query, an exec, a ping, a key-API operation
 * (get, multiGet, scan, put, delete), a Bigtable one (readRows, mutateRow, increment, checkAndMutate), a call to an
 * HTTP upstream (http) or a lookup join (join), each on its own backend and with its own optional deadline. Each
 * factory takes the arguments of the Client method of the same name, and the operation's batch result is what that
 * method returns (true for the methods that return nothing). Transactions cannot be part of a batch. Operations are
 * immutable and can be reused; a query, scan, get, multiGet or readRows operation is also the left side of a join.
 */
final class Operation
{
    /** @var array<string, mixed> the request map without `id`, as it goes into the batch's `ops` */
    public readonly array $request;

    /**
     * @param string $op the protocol op: query, exec, ping, get, multi_get, scan, put, delete, read_rows,
     *                   mutate_row, increment, check_and_mutate, http or join
     * @param array<string, mixed> $request a map from Request; its `id` placeholder is dropped
     * @param string $as the kind of the operation's result, as Protocol\Reply::decode() names it: the same as the
     *                   Client method of the same name decodes its reply with
     * @param int $count for `sparseRows` (multiGet): the number of keys
     * @internal read by PendingBatch
     */
    private function __construct(
        public readonly string $op,
        array $request,
        public readonly string $as,
        public readonly int $count = 0,
    ) {
        unset($request['id']);
        $this->request = $request;
    }

    /**
     * query runs a statement that returns rows; its batch result is a list of associative rows.
     *
     * @param array<mixed> $params positional parameters
     * @param string|null $timeFormat 'iso' or 'sql' (see Client's time_format option); null for the server's default
     * @param int|null $cacheTtlMs let tetherd answer from its shared result cache, and keep this result there, for at
     *                             most this many milliseconds (Client::query())
     * @param bool $primary on a backend with replicas, run on the primary (Client::query())
     */
    public static function query(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?string $timeFormat = null, ?int $cacheTtlMs = null, bool $primary = false): self
    {
        return new self('query', Request::statement('query', $sql, $params, $backend, null, $timeoutMs, false, $timeFormat, $cacheTtlMs, $primary), 'rows');
    }

    /**
     * queryColumns runs a statement that returns rows, answered in column-oriented form; its batch result is a
     * ColumnarResult (Client::queryColumns()).
     *
     * @param array<mixed> $params positional parameters
     * @param int|null $cacheTtlMs as for query()
     * @param bool $primary as for query()
     */
    public static function queryColumns(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, ?string $timeFormat = null, ?int $cacheTtlMs = null, bool $primary = false): self
    {
        return new self('query', Request::statement('query', $sql, $params, $backend, null, $timeoutMs, true, $timeFormat, $cacheTtlMs, $primary), 'columns');
    }

    /**
     * execute runs a statement for its effect; its batch result is an ExecResult.
     *
     * @param array<mixed> $params positional parameters
     * @param bool $primary as for query() (an exec runs on the primary anyway; accepted for symmetry)
     */
    public static function execute(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null, bool $primary = false): self
    {
        return new self('exec', Request::statement('exec', $sql, $params, $backend, null, $timeoutMs, false, null, null, $primary), 'exec');
    }

    /** ping is answered by tetherd itself; its batch result is true. */
    public static function ping(?int $timeoutMs = null): self
    {
        return new self('ping', Request::ping($timeoutMs), 'ok');
    }

    /**
     * get reads one row by primary key (Client::get()); its batch result is the row or null.
     *
     * @param mixed $key the key's value, or the list of a composite key's values
     * @param array<string> $columns
     */
    public static function get(string $table, mixed $key, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('get', Request::get($table, $key, $columns, $backend, $timeoutMs), 'first');
    }

    /**
     * multiGet reads the rows of several keys (Client::multiGet()); its batch result is a list with one row or
     * null per key, in the order of $keys.
     *
     * @param array<mixed> $keys
     * @param array<string> $columns
     */
    public static function multiGet(string $table, array $keys, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('multi_get', Request::multiGet($table, $keys, $columns, $backend, $timeoutMs), 'sparseRows', \count($keys));
    }

    /**
     * scan reads one page of rows in key order (Client::scan()); its batch result is a ScanResult.
     *
     * @param array<mixed> $prefix
     * @param array<mixed>|null $start
     * @param array<mixed>|null $end
     * @param array<string> $columns
     */
    public static function scan(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $limit = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('scan', Request::scan($table, $prefix, $start, $end, $limit, $cursor, $columns, $backend, $timeoutMs), 'page');
    }

    /**
     * scanColumns is scan() answered in column-oriented form (Client::scanColumns()); its batch result is a
     * ColumnarResult.
     *
     * @param array<mixed> $prefix
     * @param array<mixed>|null $start
     * @param array<mixed>|null $end
     * @param array<string> $columns
     */
    public static function scanColumns(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $limit = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('scan', Request::scan($table, $prefix, $start, $end, $limit, $cursor, $columns, $backend, $timeoutMs, true), 'columns');
    }

    /**
     * put upserts a row (Client::put()); its batch result is true.
     *
     * @param array<string, mixed> $row
     * @throws LogicException $row is empty
     */
    public static function put(string $table, array $row, ?string $backend = null, ?int $timeoutMs = null): self
    {
        if ($row === []) {
            throw new LogicException('put needs a row with at least its key columns');
        }

        return new self('put', Request::put($table, $row, $backend, $timeoutMs), 'done');
    }

    /**
     * delete deletes one row by primary key (Client::delete()); its batch result is the number of rows deleted.
     *
     * @param mixed $key
     */
    public static function delete(string $table, mixed $key, ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('delete', Request::delete($table, $key, $backend, $timeoutMs), 'affected');
    }

    /**
     * readRows reads Bigtable cells as long rows (Client::readRows()); its batch result is a ScanResult.
     *
     * @param array{keys?: array<string>, prefix?: string|null, start?: string|null, end?: string|null,
     *              limit?: int, cursor?: string|null, families?: array<string>, columns?: array<string>,
     *              latest?: bool} $options
     * @throws LogicException an unknown option or a value of the wrong type
     */
    public static function readRows(string $table, array $options = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('read_rows', Request::readRows($table, $options, $backend, $timeoutMs), 'page');
    }

    /**
     * readRowsColumns is readRows() answered in column-oriented form (Client::readRowsColumns()); its batch result
     * is a ColumnarResult.
     *
     * @param array{keys?: array<string>, prefix?: string|null, start?: string|null, end?: string|null,
     *              limit?: int, cursor?: string|null, families?: array<string>, columns?: array<string>,
     *              latest?: bool} $options
     * @throws LogicException an unknown option or a value of the wrong type
     */
    public static function readRowsColumns(string $table, array $options = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('read_rows', Request::readRows($table, $options, $backend, $timeoutMs, true), 'columns');
    }

    /**
     * mutateRow applies mutations to one Bigtable row atomically (Client::mutateRow()); its batch result is true.
     *
     * @param array<Mutation> $mutations
     * @throws LogicException no mutations, or an element that is not a Mutation
     */
    public static function mutateRow(string $table, string $key, array $mutations, ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('mutate_row', Request::mutateRow($table, $key, $mutations, $backend, $timeoutMs), 'done');
    }

    /** increment adds to a Bigtable counter cell (Client::increment()); its batch result is the new value. */
    public static function increment(string $table, string $key, string $family, string $qualifier, int $delta = 1, ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('increment', Request::increment($table, $key, $family, $qualifier, $delta, $backend, $timeoutMs), 'counter');
    }

    /**
     * checkAndMutate is a conditional Bigtable row mutation (Client::checkAndMutate()); its batch result is
     * whether the predicate matched.
     *
     * @param array<Mutation> $ifTrue
     * @param array<Mutation> $ifFalse
     * @throws LogicException an element that is not a Mutation
     */
    public static function checkAndMutate(string $table, string $key, string $family, ?string $qualifier, ?string $value, array $ifTrue, array $ifFalse = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return new self('check_and_mutate', Request::checkAndMutate($table, $key, $family, $qualifier, $value, $ifTrue, $ifFalse, $backend, $timeoutMs), 'matched');
    }

    /**
     * http sends one request to a configured HTTP upstream (Client::http()); its batch result is an HttpResponse,
     * whatever the status.
     *
     * @param array<string, string|int> $headers
     * @throws LogicException a header value that is not a string or an int
     */
    public static function http(string $upstream, string $method, string $path, array $headers = [], ?string $body = null, ?int $timeoutMs = null): self
    {
        return new self('http', Request::http($upstream, $method, $path, $headers, $body, $timeoutMs), 'http');
    }

    /**
     * join is a lookup join run by tetherd (Client::join()); its batch result is a ColumnarResult. $left is the
     * query, scan, get, multiGet or readRows operation that produces the rows.
     *
     * @param list<string> $on
     * @param list<string> $rightColumns
     * @param list<string> $orderBy
     * @throws LogicException another kind of left operation, a kind other than left or inner, an empty $on
     */
    public static function join(self $left, string $rightTable, array $on, array $rightColumns = [], ?string $rightBackend = null, string $kind = 'left', array $orderBy = [], ?int $timeoutMs = null): self
    {
        return new self('join', Request::join($left->request, $rightTable, $on, $rightColumns, $rightBackend, $kind, $orderBy, $timeoutMs), 'columns');
    }

    /**
     * with returns an operation of the same op with request map $request.
     *
     * @internal
     * @param array<string, mixed> $request
     */
    public function with(array $request): self
    {
        return new self($this->op, $request, $this->as, $this->count);
    }

    /** isColumnar tells whether the operation's result is column-oriented (a join, or a *Columns read). */
    public function isColumnar(): bool
    {
        return $this->as === 'columns';
    }
}
