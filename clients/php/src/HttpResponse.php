<?php

declare(strict_types=1);

namespace Tether;

/**
 * HttpResponse is an HTTP upstream's complete response, from Client::http() or an Operation::http() of a batch.
 *
 * Any status is a response: a 404 or a 503 is an HttpResponse, not an exception (exceptions are for requests that
 * got no complete response: ServerException `unavailable`, `timeout`, `too_large`, `backend_error`). headers maps
 * each lower-case header name to the list of its values, in the order the upstream sent them (`set-cookie` may
 * have several); body is the bytes as they came, binary-safe.
 */
final class HttpResponse
{
    /**
     * @param int $status the HTTP status code
     * @param array<string, list<string>> $headers lower-case name => values
     * @param string $body the response body's bytes
     */
    public function __construct(
        public readonly int $status,
        public readonly array $headers,
        public readonly string $body,
    ) {
    }

    /** header returns the first value of header $name (any case), or null when the response has none. */
    public function header(string $name): ?string
    {
        return $this->headers[\strtolower($name)][0] ?? null;
    }

    /** isSuccessful tells whether the status is 2xx. */
    public function isSuccessful(): bool
    {
        return $this->status >= 200 && $this->status < 300;
    }
}
