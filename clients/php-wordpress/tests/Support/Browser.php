<?php

declare(strict_types=1);

namespace Tether\WordPress\Tests\Support;

/**
 * Browser is an HTTP client with a cookie jar of its own (curl's in-memory engine), for logging in to wp-admin.
 * Redirects are not followed: the tests look at them.
 */
final class Browser
{
    private \CurlHandle $curl;

    public function __construct()
    {
        $this->curl = \curl_init();
        \curl_setopt_array($this->curl, [
            CURLOPT_COOKIEFILE => '',
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_HEADER => true,
            CURLOPT_TIMEOUT => 60,
            CURLOPT_FOLLOWLOCATION => false,
        ]);
    }

    /** @param array<string, string> $headers */
    public function get(string $url, array $headers = []): Response
    {
        return $this->request('GET', $url, null, $headers);
    }

    /**
     * post sends a form (array) or a raw body (string).
     *
     * @param array<string, string>|string $body
     * @param array<string, string> $headers
     */
    public function post(string $url, array|string $body, array $headers = []): Response
    {
        return $this->request('POST', $url, \is_array($body) ? \http_build_query($body) : $body, $headers);
    }

    /** @param array<string, string> $headers */
    private function request(string $method, string $url, ?string $body, array $headers): Response
    {
        \curl_setopt($this->curl, CURLOPT_URL, $url);
        \curl_setopt($this->curl, CURLOPT_CUSTOMREQUEST, $method);
        \curl_setopt($this->curl, CURLOPT_POST, $body !== null);
        if ($body !== null) {
            \curl_setopt($this->curl, CURLOPT_POSTFIELDS, $body);
        } else {
            \curl_setopt($this->curl, CURLOPT_HTTPGET, true);
        }
        $lines = [];
        foreach ($headers as $name => $value) {
            $lines[] = "$name: $value";
        }
        \curl_setopt($this->curl, CURLOPT_HTTPHEADER, $lines);
        $raw = \curl_exec($this->curl);
        if ($raw === false) {
            throw new \RuntimeException("$method $url: " . \curl_error($this->curl));
        }

        return self::parse((string) $raw, \curl_getinfo($this->curl, CURLINFO_HEADER_SIZE), \curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE));
    }

    public static function parse(string $raw, int $headerSize, int $status): Response
    {
        $headers = [];
        foreach (\explode("\r\n", \substr($raw, 0, $headerSize)) as $line) {
            if (\str_contains($line, ':')) {
                [$name, $value] = \explode(':', $line, 2);
                $headers[\strtolower(\trim($name))] = \trim($value);
            }
        }

        return new Response($status, $headers, \substr($raw, $headerSize));
    }
}
