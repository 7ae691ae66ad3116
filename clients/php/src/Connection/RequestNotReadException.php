<?php

declare(strict_types=1);

namespace Tether\Connection;

/**
 * RequestNotReadException reports a request that tetherd never read: it closed the Unix socket with the request
 * still unread in it (the socket reset, where a crash mid-request would give EOF). tetherd does that when it hands
 * its clients over to a new process during a binary upgrade, closing each connection the moment it is idle. The
 * request was NOT executed. StreamConnection::request() sends such a request again once on a new socket, so
 * callers see this only for a request awaited after submit(), or when the new socket was reset too.
 */
class RequestNotReadException extends CommunicationException
{
}
