<?php

declare(strict_types=1);

namespace Tether\Protocol;

use Tether\Bigtable\Mutation;
use Tether\Exception\LogicException;

/**
 * Request builds the request maps of docs/protocol.md. Each map starts with an `id` of 0, a placeholder that
 * StreamConnection overwrites, so that keys stay in the spec's order (id, op, backend, sql, params, tx, timeout_ms,
 * ops, token, table, key, keys, columns, prefix, start, end, limit, cursor, row, families, latest, mutations,
 * if_true, if_false, family, qualifier, value, delta, columnar, method, path, headers, body, left, right, on, kind,
 * order_by) without copying the map. Absent fields are omitted; params and keys are sent as lists. The maps are
 * byte for byte what tetherd's own encoder writes (testdata/vectors).
 *
 * @internal the wire layer; use Tether\Client
 */
final class Request
{
    /** READ_ROWS_OPTIONS are the options readRows() takes. */
    public const READ_ROWS_OPTIONS = ['keys', 'prefix', 'start', 'end', 'limit', 'cursor', 'families', 'columns', 'latest'];

    /** JOIN_LEFT_OPS are the ops whose rows a join can take as its left side. */
    public const JOIN_LEFT_OPS = ['query', 'scan', 'get', 'multi_get', 'read_rows'];

    /** JOIN_KINDS are the kinds of join: left keeps every left row, inner only those that matched. */
    public const JOIN_KINDS = ['left', 'inner'];

    /** @return array{id: int, op: string, timeout_ms?: int} */
    public static function ping(?int $timeoutMs = null): array
    {
        if ($timeoutMs === null) {
            return ['id' => 0, 'op' => 'ping'];
        }

        return ['id' => 0, 'op' => 'ping', 'timeout_ms' => $timeoutMs];
    }

    /** @return array{id: int, op: string, token: string} */
    public static function hello(string $token): array
    {
        return ['id' => 0, 'op' => 'hello', 'token' => $token];
    }

    /**
     * query builds a `query` request (a statement that returns rows).
     *
     * @param array<mixed> $params positional parameters; keys are ignored
     * @param bool $columnar ask for the reply in column-oriented form
     * @return array<string, mixed>
     */
    public static function query(string $sql, array $params = [], ?string $backend = null, ?int $tx = null, ?int $timeoutMs = null, bool $columnar = false): array
    {
        return self::statement('query', $sql, $params, $backend, $tx, $timeoutMs, $columnar);
    }

    /**
     * exec builds an `exec` request (a statement run for its effect).
     *
     * @param array<mixed> $params positional parameters; keys are ignored
     * @return array<string, mixed>
     */
    public static function exec(string $sql, array $params = [], ?string $backend = null, ?int $tx = null, ?int $timeoutMs = null): array
    {
        return self::statement('exec', $sql, $params, $backend, $tx, $timeoutMs);
    }

    /**
     * statement builds a `query` or `exec` request; query() and exec() call it, and so do the client's per-call
     * paths, one call layer shorter.
     *
     * @param string $op `query` or `exec`
     * @param array<mixed> $params positional parameters; keys are ignored
     * @param bool $columnar ask for the reply in column-oriented form (query only)
     * @param bool $primary run on the primary of a backend with replicas (`primary: true`)
     * @return array<string, mixed>
     */
    public static function statement(string $op, string $sql, array $params = [], ?string $backend = null, ?int $tx = null, ?int $timeoutMs = null, bool $columnar = false, ?string $timeFormat = null, ?int $cacheTtlMs = null, bool $primary = false): array
    {
        $request = ['id' => 0, 'op' => $op];
        if ($backend !== null) {
            $request['backend'] = $backend;
        }
        $request['sql'] = $sql;
        if ($params !== []) {
            // array_values returns a list as is, without copying it.
            $request['params'] = \array_values($params);
        }
        if ($tx !== null) {
            $request['tx'] = $tx;
        }
        if ($timeoutMs !== null) {
            $request['timeout_ms'] = $timeoutMs;
        }
        if ($columnar) {
            $request['columnar'] = true;
        }
        if ($timeFormat !== null && $op === 'query') {
            $request['time_format'] = $timeFormat;
        }
        if ($primary) {
            $request['primary'] = true;
        }
        if ($cacheTtlMs !== null && $cacheTtlMs > 0) {
            $request['cache_ttl_ms'] = $cacheTtlMs;
        }

        return $request;
    }

    /**
     * causalToken builds a `causal_token` request: the position covering this connection's writes on the backend.
     *
     * @return array<string, mixed>
     */
    public static function causalToken(?string $backend = null): array
    {
        return $backend === null ? ['id' => 0, 'op' => 'causal_token'] : ['id' => 0, 'op' => 'causal_token', 'backend' => $backend];
    }

    /**
     * causalAfter builds a `causal_after` request: this connection's reads of the backend wait for a replica that
     * has applied $position.
     *
     * @return array<string, mixed>
     */
    public static function causalAfter(?string $backend, string $position): array
    {
        $request = ['id' => 0, 'op' => 'causal_after'];
        if ($backend !== null) {
            $request['backend'] = $backend;
        }
        $request['position'] = $position;

        return $request;
    }

    /** @return array<string, mixed> */
    public static function begin(?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = ['id' => 0, 'op' => 'begin'];
        if ($backend !== null) {
            $request['backend'] = $backend;
        }
        if ($timeoutMs !== null) {
            $request['timeout_ms'] = $timeoutMs;
        }

        return $request;
    }

    /** @return array<string, mixed> */
    public static function commit(int $tx, ?int $timeoutMs = null): array
    {
        return self::end('commit', $tx, $timeoutMs);
    }

    /** @return array<string, mixed> */
    public static function rollback(int $tx, ?int $timeoutMs = null): array
    {
        return self::end('rollback', $tx, $timeoutMs);
    }

    /**
     * batch builds a `batch` request from operation maps that carry no `id` (see Tether\Batch\Operation).
     *
     * @param list<array<string, mixed>> $ops
     * @return array<string, mixed>
     */
    public static function batch(array $ops, ?int $timeoutMs = null): array
    {
        if ($timeoutMs === null) {
            return ['id' => 0, 'op' => 'batch', 'ops' => $ops];
        }

        return ['id' => 0, 'op' => 'batch', 'timeout_ms' => $timeoutMs, 'ops' => $ops];
    }

    /**
     * queryPage builds a `query` request for one page of a backend that pages (Cassandra): at most $pageSize rows,
     * resuming after $cursor.
     *
     * @param array<mixed> $params positional parameters; keys are ignored
     * @return array<string, mixed>
     */
    public static function queryPage(string $sql, array $params, int $pageSize, ?string $cursor = null, ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::statement('query', $sql, $params, $backend, null, $timeoutMs);
        $request['limit'] = $pageSize;
        if ($cursor !== null) {
            $request['cursor'] = $cursor;
        }

        return $request;
    }

    /**
     * get builds a `get` request: the row with primary key $key.
     *
     * @param mixed $key the key's value, or the list of a composite key's values in key order
     * @param array<string> $columns the columns to return; empty for all
     * @return array<string, mixed>
     */
    public static function get(string $table, mixed $key, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('get', $table, $backend, $timeoutMs);
        $request['key'] = \is_array($key) ? \array_values($key) : [$key];
        if ($columns !== []) {
            $request['columns'] = \array_values($columns);
        }

        return $request;
    }

    /**
     * multiGet builds a `multi_get` request: the rows of several keys.
     *
     * @param array<mixed> $keys each a key value or a list of a composite key's values
     * @param array<string> $columns
     * @return array<string, mixed>
     */
    public static function multiGet(string $table, array $keys, array $columns = [], ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('multi_get', $table, $backend, $timeoutMs);
        $list = [];
        foreach ($keys as $key) {
            $list[] = \is_array($key) ? \array_values($key) : [$key];
        }
        $request['keys'] = $list;
        if ($columns !== []) {
            $request['columns'] = \array_values($columns);
        }

        return $request;
    }

    /**
     * scan builds a `scan` request: rows in key order whose key starts with $prefix, or within [$start, $end).
     *
     * @param array<mixed> $prefix leading key values; empty for none
     * @param array<mixed>|null $start first key (inclusive), or a prefix of one
     * @param array<mixed>|null $end key to stop before (exclusive), or a prefix of one
     * @param int $limit most rows; 0 for the server's default
     * @param string|null $cursor the cursor of the previous page
     * @param array<string> $columns
     * @param bool $columnar ask for the reply in column-oriented form
     * @return array<string, mixed>
     */
    public static function scan(string $table, array $prefix = [], ?array $start = null, ?array $end = null, int $limit = 0, ?string $cursor = null, array $columns = [], ?string $backend = null, ?int $timeoutMs = null, bool $columnar = false): array
    {
        $request = self::table('scan', $table, $backend, $timeoutMs);
        if ($columns !== []) {
            $request['columns'] = \array_values($columns);
        }
        if ($prefix !== []) {
            $request['prefix'] = \array_values($prefix);
        }
        if ($start !== null && $start !== []) {
            $request['start'] = \array_values($start);
        }
        if ($end !== null && $end !== []) {
            $request['end'] = \array_values($end);
        }
        if ($limit !== 0) {
            $request['limit'] = $limit;
        }
        if ($cursor !== null) {
            $request['cursor'] = $cursor;
        }
        if ($columnar) {
            $request['columnar'] = true;
        }

        return $request;
    }

    /**
     * put builds a `put` request (an upsert of $row). The columns are sent sorted by name, as tetherd's encoder
     * writes a row, so that equal rows are equal bytes.
     *
     * @param array<string, mixed> $row column name => value
     * @return array<string, mixed>
     */
    public static function put(string $table, array $row, ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('put', $table, $backend, $timeoutMs);
        \ksort($row, \SORT_STRING);
        $request['row'] = $row;

        return $request;
    }

    /**
     * delete builds a `delete` request: the row with primary key $key.
     *
     * @param mixed $key the key's value, or the list of a composite key's values in key order
     * @return array<string, mixed>
     */
    public static function delete(string $table, mixed $key, ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('delete', $table, $backend, $timeoutMs);
        $request['key'] = \is_array($key) ? \array_values($key) : [$key];

        return $request;
    }

    /**
     * readRows builds a Bigtable `read_rows` request. Row keys are given as strings and sent as one-value keys.
     *
     * @param array{keys?: array<string>, prefix?: string|null, start?: string|null, end?: string|null,
     *              limit?: int, cursor?: string|null, families?: array<string>, columns?: array<string>,
     *              latest?: bool} $options
     * @param bool $columnar ask for the reply in column-oriented form
     * @return array<string, mixed>
     * @throws LogicException an unknown option, or a value of the wrong type
     */
    public static function readRows(string $table, array $options = [], ?string $backend = null, ?int $timeoutMs = null, bool $columnar = false): array
    {
        $unknown = \array_diff_key($options, \array_flip(self::READ_ROWS_OPTIONS));
        if ($unknown !== []) {
            throw new LogicException(\sprintf('readRows: unknown option %s; known options: %s', \implode(', ', \array_keys($unknown)), \implode(', ', self::READ_ROWS_OPTIONS)));
        }
        $request = self::table('read_rows', $table, $backend, $timeoutMs);
        $keys = $options['keys'] ?? [];
        if ($keys !== []) {
            $list = [];
            foreach (self::strings('keys', $keys) as $key) {
                $list[] = [$key];
            }
            $request['keys'] = $list;
        }
        $columns = $options['columns'] ?? [];
        if ($columns !== []) {
            $request['columns'] = self::strings('columns', $columns);
        }
        foreach (['prefix', 'start', 'end'] as $name) {
            $value = $options[$name] ?? null;
            if ($value !== null && $value !== '') {
                if (!\is_string($value)) {
                    throw new LogicException(\sprintf('readRows: option %s: want a row key string, got %s', $name, \get_debug_type($value)));
                }
                $request[$name] = [$value];
            }
        }
        $limit = $options['limit'] ?? 0;
        if (!\is_int($limit) || $limit < 0) {
            throw new LogicException(\sprintf('readRows: option limit: want an int >= 0, got %s', \var_export($limit, true)));
        }
        if ($limit !== 0) {
            $request['limit'] = $limit;
        }
        $cursor = $options['cursor'] ?? null;
        if ($cursor !== null) {
            if (!\is_string($cursor)) {
                throw new LogicException(\sprintf('readRows: option cursor: want the cursor string of a previous page, got %s', \get_debug_type($cursor)));
            }
            $request['cursor'] = $cursor;
        }
        $families = $options['families'] ?? [];
        if ($families !== []) {
            $request['families'] = self::strings('families', $families);
        }
        $latest = $options['latest'] ?? false;
        if (!\is_bool($latest)) {
            throw new LogicException(\sprintf('readRows: option latest: want a bool, got %s', \get_debug_type($latest)));
        }
        if ($latest) {
            $request['latest'] = true;
        }
        if ($columnar) {
            $request['columnar'] = true;
        }

        return $request;
    }

    /**
     * mutateRow builds a Bigtable `mutate_row` request: $mutations applied to row $key atomically.
     *
     * @param array<Mutation> $mutations
     * @return array<string, mixed>
     * @throws LogicException $mutations is empty or holds something else than Mutation objects
     */
    public static function mutateRow(string $table, string $key, array $mutations, ?string $backend = null, ?int $timeoutMs = null): array
    {
        if ($mutations === []) {
            throw new LogicException('mutateRow needs at least one Mutation');
        }
        $request = self::table('mutate_row', $table, $backend, $timeoutMs);
        $request['key'] = [$key];
        $request['mutations'] = self::mutations('mutations', $mutations);

        return $request;
    }

    /**
     * increment builds a Bigtable `increment` request: add $delta to the 64-bit counter in family:qualifier.
     *
     * @return array<string, mixed>
     */
    public static function increment(string $table, string $key, string $family, string $qualifier, int $delta = 1, ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('increment', $table, $backend, $timeoutMs);
        $request['key'] = [$key];
        $request['family'] = $family;
        $request['qualifier'] = $qualifier;
        if ($delta !== 0) {
            $request['delta'] = $delta;
        }

        return $request;
    }

    /**
     * checkAndMutate builds a Bigtable `check_and_mutate` request.
     *
     * @param array<Mutation> $ifTrue
     * @param array<Mutation> $ifFalse
     * @return array<string, mixed>
     * @throws LogicException a list holds something else than Mutation objects
     */
    public static function checkAndMutate(string $table, string $key, string $family, ?string $qualifier, ?string $value, array $ifTrue, array $ifFalse = [], ?string $backend = null, ?int $timeoutMs = null): array
    {
        $request = self::table('check_and_mutate', $table, $backend, $timeoutMs);
        $request['key'] = [$key];
        if ($ifTrue !== []) {
            $request['if_true'] = self::mutations('ifTrue', $ifTrue);
        }
        if ($ifFalse !== []) {
            $request['if_false'] = self::mutations('ifFalse', $ifFalse);
        }
        $request['family'] = $family;
        if ($qualifier !== null) {
            $request['qualifier'] = $qualifier;
        }
        if ($value !== null) {
            $request['value'] = $value;
        }

        return $request;
    }

    /**
     * http builds an `http` request: $method $path to the configured HTTP upstream $upstream. Headers are sent
     * sorted by name, as tetherd's encoder writes them, so that equal requests are equal bytes.
     *
     * @param string $upstream the name of a backend of type http
     * @param string $path path and query below the upstream's base URL, starting with `/`
     * @param array<string, string|int> $headers name => value; an int value is sent as its digits
     * @param string|null $body the request body's bytes; null for none
     * @return array<string, mixed>
     * @throws LogicException a header value that is not a string or an int
     */
    public static function http(string $upstream, string $method, string $path, array $headers = [], ?string $body = null, ?int $timeoutMs = null): array
    {
        $request = ['id' => 0, 'op' => 'http', 'backend' => $upstream];
        if ($timeoutMs !== null) {
            $request['timeout_ms'] = $timeoutMs;
        }
        if ($method !== '') {
            $request['method'] = $method;
        }
        $request['path'] = $path;
        if ($headers !== []) {
            foreach ($headers as $name => $value) {
                if (\is_int($value)) {
                    $headers[$name] = (string) $value;
                } elseif (!\is_string($value)) {
                    throw new LogicException(\sprintf('http: header %s: want a string value, got %s', $name, \get_debug_type($value)));
                }
            }
            \ksort($headers, \SORT_STRING);
            $request['headers'] = $headers;
        }
        if ($body !== null) {
            $request['body'] = $body;
        }

        return $request;
    }

    /**
     * join builds a `join` request: run $left, take the values of its $on columns from each row, look them up as
     * keys (distinct, batched) in $rightTable, and join the rows.
     *
     * The right side goes on the wire as {backend?, table, columns?}, with no op (golden vector join_request).
     *
     * @param array<string, mixed> $left a request map without `id` (Tether\Batch\Operation::$request) of op query,
     *                                   scan, get, multi_get or read_rows
     * @param list<string> $on the left columns whose values, in the right table's key order, form its key
     * @param list<string> $rightColumns the right columns to add; empty for all
     * @param string|null $rightBackend the right table's backend; null for the left's (as sent in $left)
     * @param string $kind `left` (every left row; right columns null where nothing matched) or `inner`
     * @param list<string> $orderBy output columns to sort by; `-name` descending
     * @return array<string, mixed>
     * @throws LogicException another left op, an unknown kind, no $on column, a name that is not a string
     */
    public static function join(array $left, string $rightTable, array $on, array $rightColumns = [], ?string $rightBackend = null, string $kind = 'left', array $orderBy = [], ?int $timeoutMs = null): array
    {
        $op = $left['op'] ?? null;
        if (!\in_array($op, self::JOIN_LEFT_OPS, true)) {
            throw new LogicException(\sprintf('join: the left side must be a query, scan, get, multiGet or readRows operation, got %s', \is_string($op) ? $op : \get_debug_type($op)));
        }
        if (!\in_array($kind, self::JOIN_KINDS, true)) {
            throw new LogicException(\sprintf('join: kind must be left or inner, got %s', \var_export($kind, true)));
        }
        if ($on === []) {
            throw new LogicException('join: want at least one column in $on');
        }
        unset($left['id'], $left['columnar']); // a join's reply is column-oriented anyway
        $request = ['id' => 0, 'op' => 'join'];
        if ($timeoutMs !== null) {
            $request['timeout_ms'] = $timeoutMs;
        }
        $request['left'] = $left;
        $right = [];
        $rightBackend ??= $left['backend'] ?? null;
        if ($rightBackend !== null) {
            $right['backend'] = $rightBackend;
        }
        $right['table'] = $rightTable;
        if ($rightColumns !== []) {
            $right['columns'] = self::names('join: $rightColumns', $rightColumns);
        }
        $request['right'] = $right;
        $request['on'] = self::names('join: $on', $on);
        $request['kind'] = $kind;
        if ($orderBy !== []) {
            $request['order_by'] = self::names('join: $orderBy', $orderBy);
        }

        return $request;
    }

    /** @return array<string, mixed> the head of a request on a table: id, op, backend?, timeout_ms?, table */
    private static function table(string $op, string $table, ?string $backend, ?int $timeoutMs): array
    {
        $request = ['id' => 0, 'op' => $op];
        if ($backend !== null) {
            $request['backend'] = $backend;
        }
        if ($timeoutMs !== null) {
            $request['timeout_ms'] = $timeoutMs;
        }
        $request['table'] = $table;

        return $request;
    }

    /**
     * @param array<mixed> $values
     * @return list<string>
     */
    private static function strings(string $option, array $values): array
    {
        foreach ($values as $value) {
            if (!\is_string($value)) {
                throw new LogicException(\sprintf('readRows: option %s: want a list of strings, got a %s in it', $option, \get_debug_type($value)));
            }
        }

        return \array_values($values);
    }

    /**
     * names checks that $values are column names (strings) and returns them as a list.
     *
     * @param array<mixed> $values
     * @return list<string>
     */
    private static function names(string $argument, array $values): array
    {
        foreach ($values as $value) {
            if (!\is_string($value)) {
                throw new LogicException(\sprintf('%s: want a list of column names, got a %s in it', $argument, \get_debug_type($value)));
            }
        }

        return \array_values($values);
    }

    /**
     * @param array<mixed> $mutations
     * @return list<array<string, mixed>>
     */
    private static function mutations(string $argument, array $mutations): array
    {
        $maps = [];
        foreach ($mutations as $i => $mutation) {
            if (!$mutation instanceof Mutation) {
                throw new LogicException(\sprintf('%s[%s]: want a %s, got %s', $argument, $i, Mutation::class, \get_debug_type($mutation)));
            }
            $maps[] = $mutation->map;
        }

        return $maps;
    }

    /** @return array<string, mixed> */
    private static function end(string $op, int $tx, ?int $timeoutMs): array
    {
        if ($timeoutMs === null) {
            return ['id' => 0, 'op' => $op, 'tx' => $tx];
        }

        return ['id' => 0, 'op' => $op, 'tx' => $tx, 'timeout_ms' => $timeoutMs];
    }
}
