<?php

declare(strict_types=1);

namespace Tether\Connection;

/**
 * UnknownOutcomeException reports a request that was fully written to tetherd but whose reply never arrived
 * intact: the connection closed, the I/O timeout passed, or the reply was malformed or carried another request's
 * id. The request may or may not have been executed. The client never re-sends it on its own; only the caller
 * knows whether running it twice is harmless. The socket has been dropped; the next call reconnects.
 */
class UnknownOutcomeException extends CommunicationException
{
}
