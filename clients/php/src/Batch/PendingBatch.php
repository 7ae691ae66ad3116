<?php

declare(strict_types=1);

namespace Tether\Batch;

use Tether\Connection\CommunicationException;
use Tether\Connection\StreamConnection;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\LogicException;
use Tether\Protocol\MalformedReply;
use Tether\Protocol\Reply;
use Tether\Server\ServerException;

/**
 * PendingBatch is a batch sent by Client::sendBatch() whose results have not been collected yet: tetherd runs its
 * operations while the page does its own work, and wait() collects them.
 *
 *     $pending = $client->sendBatch(['rates' => Operation::http('fx', 'GET', '/rates'), ...]);
 *     $page = render_the_rest();                 // other calls on the same client work meanwhile
 *     $results = $pending->wait();               // what batch() would have returned
 *
 * Several batches may be pending at once, and be waited for in any order. wait() blocks until the reply comes,
 * with the batch's own I/O timeout (the client's timeout, or timeout_ms + 1 s when that is longer).
 *
 * Waiting twice is harmless: every wait() returns the same array, or throws the same exception, as the first one.
 * A batch never waited for is abandoned when this object is destroyed: its reply is thrown away, and if it has not
 * arrived when the PHP request ends, the socket is closed (tetherd then cancels what is still running) so that the
 * worker's next request does not inherit the reply.
 */
final class PendingBatch
{
    /** @var array<array-key, mixed>|null */
    private ?array $results;
    private ?\Throwable $failure = null;

    /**
     * @internal created by Client::sendBatch()
     * @param array<array-key, Operation> $ops the batch's operations, in the order they were sent
     * @param array<array-key, mixed>|null $results the results already, for a batch that needs no round trip
     */
    public function __construct(
        private readonly ?StreamConnection $connection,
        private readonly int $id,
        private readonly int $epoch,
        private readonly array $ops,
        ?array $results = null,
    ) {
        $this->results = $results;
    }

    /**
     * wait returns the batch's results, as Client::batch() does: the keys of the operations, in their order, each
     * the operation's result (what its Client method returns) or, for an operation that failed, the
     * ServerException describing it, returned and not thrown.
     *
     * @return array<array-key, mixed>
     * @throws ServerException the batch as a whole was rejected (bad_request, timeout, ...)
     * @throws UnknownOutcomeException the batch was sent but its reply never came (the socket failed, timed out, or
     *                                 was closed while it was pending); it may or may not have run
     * @throws LogicException called while a reply is being read (from a destructor); nothing is remembered then
     */
    public function wait(): array
    {
        if ($this->results !== null) {
            return $this->results;
        }
        if ($this->failure !== null) {
            throw $this->failure;
        }
        try {
            $reply = $this->connection->await($this->id, $this->epoch);

            return $this->results = $this->results($reply);
        } catch (ServerException|CommunicationException $e) {
            $this->failure = $e;
            throw $e;
        }
    }

    /** isDone tells whether wait() returns (or throws) without waiting: it was called already. */
    public function isDone(): bool
    {
        return $this->results !== null || $this->failure !== null;
    }

    /** __destruct abandons a batch never waited for, so that its reply does not linger. */
    public function __destruct()
    {
        if ($this->results === null && $this->failure === null && $this->connection !== null) {
            $this->connection->abandon($this->id, $this->epoch);
        }
    }

    /**
     * results maps the batch reply to one result per operation.
     *
     * @param array<mixed> $reply
     * @return array<array-key, mixed>
     * @throws UnknownOutcomeException a malformed reply (the socket is dropped)
     */
    private function results(array $reply): array
    {
        $results = $reply['results'] ?? null;
        if (!\is_array($results) || \count($results) !== \count($this->ops) || !\array_is_list($results)) {
            throw $this->connection->malformedReply('batch');
        }
        $out = [];
        $i = 0;
        try {
            foreach ($this->ops as $key => $op) {
                $item = $results[$i++];
                if (!\is_array($item)) {
                    throw new MalformedReply();
                }
                // An operation that failed is its ServerException, returned; else what the operation's Client
                // method returns, decoded by the same table (Reply::decode()).
                $out[$key] = isset($item['error']) ? ServerException::fromError((array) $item['error']) : Reply::decode($op->as, $item, $op->count);
            }
        } catch (MalformedReply) {
            throw $this->connection->malformedReply('batch');
        }

        return $out;
    }
}
