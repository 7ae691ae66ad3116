<?php

declare(strict_types=1);

namespace Tether\DBAL\Exception;

use Doctrine\DBAL\Driver\AbstractException;
use Tether\Connection\CommunicationException;
use Tether\DBAL\Dialect;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;

/**
 * DriverError is the Doctrine\DBAL\Driver\Exception this driver throws: DBAL's Connection converts it, through
 * Tether\DBAL\ExceptionConverter and DBAL's own converter of the dialect, into the DBAL exception class of the
 * error (UniqueConstraintViolationException, DeadlockException, ConnectionLost, ...).
 *
 * It carries the backend's code the way DBAL's drivers do: on MySQL/MariaDB the error number as getCode() (1062),
 * on PostgreSQL the SQLSTATE as getSQLState() ("23505"). getPrevious() is the Tether exception it wraps, when any.
 */
class DriverError extends AbstractException
{
    private ?Dialect $dialect = null;
    private bool $connectionFailure = false;
    private bool $whileConnecting = false;

    /**
     * fromTether wraps an exception of the Tether client.
     *
     * @param Dialect|null $dialect the backend's dialect, null when not known yet (while connecting)
     * @param string|null $sql the statement that failed, named in the message of errors that are not the backend's
     * @param bool $whileConnecting the error happened in Driver::connect(): a connection failure is then a
     *                              ConnectionException, and ConnectionLost afterwards
     */
    public static function fromTether(TetherException $e, ?Dialect $dialect, ?string $sql, bool $whileConnecting = false): self
    {
        if ($e instanceof CommunicationException || ($e instanceof ServerException && $e->getErrorCode() === ServerException::UNAVAILABLE)) {
            $error = new self(
                \sprintf('%s: %s', $whileConnecting ? 'cannot reach the database through tetherd' : 'lost the connection to the database through tetherd', $e->getMessage()),
                $dialect === Dialect::PostgreSQL ? '08006' : null,
                $dialect === Dialect::MySQL ? ($whileConnecting ? 2002 : 2006) : 0,
                $e,
            );
            $error->connectionFailure = true;
        } elseif ($e instanceof ServerException && $e->getErrorCode() === ServerException::BACKEND_ERROR && $e->getBackendCode() !== null) {
            $backendCode = $e->getBackendCode();
            $error = $dialect === Dialect::PostgreSQL
                ? new self($e->getMessage(), $backendCode, 0, $e)
                : new self($e->getMessage(), null, \ctype_digit($backendCode) ? (int) $backendCode : 0, $e);
        } elseif ($e instanceof ServerException && $e->getErrorCode() === ServerException::BAD_REQUEST && $sql !== null) {
            $error = RefusedStatement::byTetherd($sql, $e);
        } elseif ($e instanceof ServerException) {
            $error = new self(\sprintf('tetherd answered %s%s: %s', $e->getErrorCode(), $sql === null ? '' : ' to ' . self::excerpt($sql), $e->getMessage()), null, 0, $e);
        } else {
            $error = new self($e->getMessage(), null, 0, $e);
        }
        $error->dialect = $dialect;
        $error->whileConnecting = $whileConnecting;

        return $error;
    }

    /** dialect returns the dialect of the backend that raised it, null when it was not known yet. */
    public function dialect(): ?Dialect
    {
        return $this->dialect;
    }

    /** isConnectionFailure tells whether tetherd, or the database behind it, could not be reached. */
    public function isConnectionFailure(): bool
    {
        return $this->connectionFailure;
    }

    /** isWhileConnecting tells whether it happened while DBAL connected (Driver::connect()). */
    public function isWhileConnecting(): bool
    {
        return $this->whileConnecting;
    }

    /** withDialect returns this error tagged with the dialect whose converter applies. */
    public function withDialect(?Dialect $dialect): static
    {
        $this->dialect ??= $dialect;

        return $this;
    }

    /** excerpt returns $sql quoted for a message, cut to 200 bytes. */
    public static function excerpt(string $sql): string
    {
        $sql = \trim($sql);

        return '"' . (\strlen($sql) > 200 ? \substr($sql, 0, 200) . '...' : $sql) . '"';
    }
}
