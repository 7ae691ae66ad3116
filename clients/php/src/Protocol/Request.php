<?php

declare(strict_types=1);

namespace Tether\Protocol;

/**
 * Request builds the request maps of docs/protocol.md. Each map starts with an `id` of 0, a placeholder that
 * StreamConnection::request() overwrites, so that keys stay in the spec's order (id, op, backend, sql, params, tx,
 * timeout_ms, ops, token) without copying the map. Absent fields are omitted; params are sent as a list.
 *
 * @internal the wire layer; use Tether\Client
 */
final class Request
{
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
     * @return array<string, mixed>
     */
    public static function query(string $sql, array $params = [], ?string $backend = null, ?int $tx = null, ?int $timeoutMs = null): array
    {
        return self::statement('query', $sql, $params, $backend, $tx, $timeoutMs);
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
     * @param array<mixed> $params
     * @return array<string, mixed>
     */
    private static function statement(string $op, string $sql, array $params, ?string $backend, ?int $tx, ?int $timeoutMs): array
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

        return $request;
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
