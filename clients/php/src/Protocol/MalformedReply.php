<?php

declare(strict_types=1);

namespace Tether\Protocol;

/**
 * MalformedReply is thrown by Reply::decode() for a successful reply that does not have the shape docs/protocol.md
 * gives it. It never leaves the client: StreamConnection::call() and PendingBatch turn it into the
 * UnknownOutcomeException "tetherd sent a malformed reply to <op>" and drop the socket.
 *
 * @internal the wire layer
 */
final class MalformedReply extends \RuntimeException
{
}
