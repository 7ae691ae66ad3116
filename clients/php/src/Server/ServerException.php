<?php

declare(strict_types=1);

namespace Tether\Server;

use Tether\Exception\TetherException;

/**
 * ServerException is an error reply from tetherd: the request reached the server and was answered with an
 * `error` map {code, message, retry, backend_code}. getMessage() is the server's message (for backend_error,
 * the backend's own message); getErrorCode() is one of the stable codes below; isRetryable() is the server's
 * word on whether sending the same request again is safe and may succeed; getBackendCode() is the backend's own
 * code on backend_error (MySQL error number "1146", PostgreSQL SQLSTATE "42P01", SQLite extended result code).
 *
 * The connection stays usable after a ServerException, except for the frame-level codes bad_frame and
 * too_large (a reply with id 0), after which tetherd closes the connection and the client drops it too.
 */
class ServerException extends TetherException
{
    /** The frame could not be decoded; tetherd closed the connection. */
    public const BAD_FRAME = 'bad_frame';
    /** A frame over tetherd's max_frame_bytes (connection closed), or a result over max_result_bytes. */
    public const TOO_LARGE = 'too_large';
    /** Missing or mistyped field, wrong parameter count, bad batch ops. */
    public const BAD_REQUEST = 'bad_request';
    /** The op is not one tetherd knows. */
    public const UNKNOWN_OP = 'unknown_op';
    /** No backend of that name is configured. */
    public const UNKNOWN_BACKEND = 'unknown_backend';
    /** No open transaction with that handle on this connection. */
    public const UNKNOWN_TX = 'unknown_tx';
    /** The key API's (or a Bigtable operation's) table does not exist on that backend. */
    public const UNKNOWN_TABLE = 'unknown_table';
    /** The backend does not offer that operation (transactions on Cassandra, readRows on SQL, query on Bigtable). */
    public const UNSUPPORTED = 'unsupported';
    /** A TCP client without a valid hello. */
    public const UNAUTHORIZED = 'unauthorized';
    /** The backend rejected the statement; retryable only for deadlocks and serialization failures. */
    public const BACKEND_ERROR = 'backend_error';
    /** The backend cannot be reached, or tetherd is shutting down. */
    public const UNAVAILABLE = 'unavailable';
    /** No pooled connection came free within the backend's acquire_timeout. */
    public const BUSY = 'busy';
    /** The request's deadline passed; the statement may or may not have run. */
    public const TIMEOUT = 'timeout';
    /** The transaction was rolled back by the server; the whole transaction may be retried. */
    public const TX_ABORTED = 'tx_aborted';
    /** A bug in tetherd. */
    public const INTERNAL = 'internal';

    private string $errorCode;
    private bool $retryable;
    private ?string $backendCode;

    public function __construct(string $message, string $errorCode, bool $retryable = false, ?string $backendCode = null)
    {
        parent::__construct($message);
        $this->errorCode = $errorCode;
        $this->retryable = $retryable;
        $this->backendCode = $backendCode;
    }

    /**
     * fromError builds the exception from a reply's `error` map. Missing fields get safe defaults (code
     * `internal`, not retryable), and a numeric backend_code is turned into a string.
     *
     * @param array<mixed> $error
     */
    public static function fromError(array $error): self
    {
        $backendCode = $error['backend_code'] ?? null;

        return new self(
            (string) ($error['message'] ?? ''),
            (string) ($error['code'] ?? self::INTERNAL),
            ($error['retry'] ?? false) === true,
            $backendCode === null ? null : (string) $backendCode,
        );
    }

    /** getErrorCode returns the protocol's stable error code, one of this class' constants. */
    public function getErrorCode(): string
    {
        return $this->errorCode;
    }

    /** isRetryable tells whether tetherd says the same request may safely be sent again. */
    public function isRetryable(): bool
    {
        return $this->retryable;
    }

    /** getBackendCode returns the backend's own error code on backend_error, null otherwise. */
    public function getBackendCode(): ?string
    {
        return $this->backendCode;
    }
}
