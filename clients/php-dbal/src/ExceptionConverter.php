<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Driver\API\ExceptionConverter as ExceptionConverterInterface;
use Doctrine\DBAL\Driver\Exception;
use Doctrine\DBAL\Exception\ConnectionException;
use Doctrine\DBAL\Exception\ConnectionLost;
use Doctrine\DBAL\Exception\DriverException;
use Doctrine\DBAL\Query;
use Tether\DBAL\Exception\DriverError;

/**
 * ExceptionConverter turns this driver's exceptions into DBAL's exception classes. A backend error goes through
 * DBAL's own converter of its dialect (Driver\API\MySQL\ExceptionConverter by error number,
 * Driver\API\PostgreSQL\ExceptionConverter by SQLSTATE), so the classes are those DBAL's native drivers give.
 * A failure to reach tetherd or the database is a ConnectionException while connecting and a ConnectionLost (a
 * ConnectionException) afterwards, on both dialects (DBAL's PostgreSQL converter has no code for a lost
 * connection). Anything else is a DriverException.
 */
final class ExceptionConverter implements ExceptionConverterInterface
{
    public function convert(Exception $exception, ?Query $query): DriverException
    {
        if (!$exception instanceof DriverError) {
            return new DriverException($exception, $query);
        }
        if ($exception->isConnectionFailure()) {
            return $exception->isWhileConnecting()
                ? new ConnectionException($exception, $query)
                : new ConnectionLost($exception, $query);
        }

        return $exception->dialect()?->exceptionConverter()->convert($exception, $query)
            ?? new DriverException($exception, $query);
    }
}
