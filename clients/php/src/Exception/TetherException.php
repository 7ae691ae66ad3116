<?php

declare(strict_types=1);

namespace Tether\Exception;

/**
 * TetherException is the root of every exception this client throws, so `catch (TetherException $e)` catches
 * them all. The subclasses tell what went wrong and whether a retry is safe:
 *
 * - Tether\Server\ServerException: tetherd answered with an error (a SQL error, busy, timeout, ...);
 *   the connection is still good; isRetryable() says whether sending the same request again is safe.
 * - Tether\Connection\CommunicationException: the socket failed before the request was sent; the request
 *   did not run.
 * - Tether\Connection\UnknownOutcomeException: the socket failed after the request was sent; it may or may
 *   not have run, and the client never re-sends it on its own.
 * - Tether\Exception\LogicException: the caller misused the client (bad option, finished transaction).
 */
abstract class TetherException extends \RuntimeException
{
}
