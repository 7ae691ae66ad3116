<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/** Response is one HTTP response: status, headers (lower-cased names, last value wins) and body. */
final class Response
{
    /** @param array<string, string> $headers */
    public function __construct(
        public readonly int $status,
        public readonly array $headers,
        public readonly string $body,
    ) {
    }

    /** json decodes the body, failing with the body shown when it is not JSON. */
    public function json(): mixed
    {
        try {
            return \json_decode($this->body, true, 512, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new \RuntimeException("HTTP {$this->status}, not JSON: " . \substr($this->body, 0, 2000), 0, $e);
        }
    }
}
