<?php

declare(strict_types=1);

namespace Tether\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\HttpResponse;

final class HttpResponseTest extends TestCase
{
    public function testHeaderGivesTheFirstValueWhateverTheCase(): void
    {
        $response = new HttpResponse(201, ['content-type' => ['application/json'], 'set-cookie' => ['a=1', 'b=2']], "{}\x00\xff");

        self::assertSame('application/json', $response->header('Content-Type'));
        self::assertSame('a=1', $response->header('set-cookie'));
        self::assertSame(['a=1', 'b=2'], $response->headers['set-cookie']);
        self::assertNull($response->header('x-missing'));
        self::assertSame("{}\x00\xff", $response->body);
        self::assertTrue($response->isSuccessful());
    }

    public function testOnly2xxIsSuccessful(): void
    {
        foreach ([100 => false, 199 => false, 200 => true, 204 => true, 299 => true, 301 => false, 404 => false, 503 => false] as $status => $ok) {
            self::assertSame($ok, (new HttpResponse($status, [], ''))->isSuccessful(), "status $status");
        }
    }
}
