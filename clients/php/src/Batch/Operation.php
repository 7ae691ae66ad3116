<?php

declare(strict_types=1);

namespace Tether\Batch;

use Tether\Protocol\Request;

/**
 * Operation is one element of Client::batch(): a query, an exec or a ping, each on its own backend and with its
 * own optional deadline. Transactions cannot be part of a batch. Operations are immutable and can be reused.
 */
final class Operation
{
    /**
     * @param string $op the protocol op: query, exec or ping
     * @param array<string, mixed> $request the request map without `id`, as it goes into the batch's `ops`
     */
    private function __construct(
        public readonly string $op,
        public readonly array $request,
    ) {
    }

    /**
     * query runs a statement that returns rows; its batch result is a list of associative rows.
     *
     * @param array<mixed> $params positional parameters
     */
    public static function query(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return self::withoutId('query', Request::query($sql, $params, $backend, null, $timeoutMs));
    }

    /**
     * execute runs a statement for its effect; its batch result is an ExecResult.
     *
     * @param array<mixed> $params positional parameters
     */
    public static function execute(string $sql, array $params = [], ?string $backend = null, ?int $timeoutMs = null): self
    {
        return self::withoutId('exec', Request::exec($sql, $params, $backend, null, $timeoutMs));
    }

    /** ping is answered by tetherd itself; its batch result is true. */
    public static function ping(?int $timeoutMs = null): self
    {
        return self::withoutId('ping', Request::ping($timeoutMs));
    }

    /** @param array<string, mixed> $request */
    private static function withoutId(string $op, array $request): self
    {
        unset($request['id']);

        return new self($op, $request);
    }
}
