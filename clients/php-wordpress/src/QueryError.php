<?php

declare(strict_types=1);

namespace Tether\WordPress;

/**
 * QueryError is a statement that failed: its message is what $wpdb->last_error shows (for a MySQL error, MySQL's
 * own message, as mysqli_error() gives it; for what the drop-in or tetherd refused, a message naming the reason),
 * and getCode() the MySQL error number (0 when the error is not MySQL's). notSent() says the statement certainly did
 * not reach tetherd (tetherd unreachable), so that running it again is safe.
 */
final class QueryError extends \RuntimeException
{
    public function __construct(string $message, int $mysqlErrno = 0, private readonly bool $notSent = false, ?\Throwable $previous = null)
    {
        parent::__construct($message, $mysqlErrno, $previous);
    }

    public function notSent(): bool
    {
        return $this->notSent;
    }
}
