<?php

declare(strict_types=1);

namespace Tether\Connection;

use Tether\Exception\TetherException;

/**
 * CommunicationException reports that the socket to tetherd failed or carried something that is not a valid
 * reply. The client has already closed the socket when this is thrown; the next call opens a new one.
 *
 * Thrown as this class itself, it means the request was NOT executed: tetherd could not be reached, the socket
 * was found dead before the request was written and reopening it failed too, or the transaction the request
 * belonged to was lost with its connection (tetherd rolls such a transaction back). Such a call is safe to retry.
 * The subclass UnknownOutcomeException covers failures after the request was written.
 */
class CommunicationException extends TetherException
{
    /**
     * shouldResetConnection tells whether the connection must be dropped after this error (predis' contract).
     * Always true: the client has already dropped it.
     */
    public function shouldResetConnection(): bool
    {
        return true;
    }
}
