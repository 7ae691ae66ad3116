<?php

declare(strict_types=1);

namespace Tether\Tests\Unit\Server;

use PHPUnit\Framework\TestCase;
use Tether\Exception\TetherException;
use Tether\Server\ServerException;

final class ServerExceptionTest extends TestCase
{
    public function testFromErrorMapsEveryField(): void
    {
        $e = ServerException::fromError(['code' => 'backend_error', 'message' => 'relation "t" does not exist', 'retry' => false, 'backend_code' => '42P01']);

        self::assertInstanceOf(TetherException::class, $e);
        self::assertInstanceOf(\RuntimeException::class, $e);
        self::assertSame(ServerException::BACKEND_ERROR, $e->getErrorCode());
        self::assertSame('relation "t" does not exist', $e->getMessage());
        self::assertFalse($e->isRetryable());
        self::assertSame('42P01', $e->getBackendCode());
    }

    public function testNumericBackendCodeBecomesAString(): void
    {
        self::assertSame('1146', ServerException::fromError(['code' => 'backend_error', 'message' => 'x', 'backend_code' => 1146])->getBackendCode());
    }

    public function testMissingFieldsGetSafeDefaults(): void
    {
        $e = ServerException::fromError([]);

        self::assertSame(ServerException::INTERNAL, $e->getErrorCode());
        self::assertSame('', $e->getMessage());
        self::assertFalse($e->isRetryable());
        self::assertNull($e->getBackendCode());
    }

    public function testOnlyTrueIsRetryable(): void
    {
        self::assertTrue(ServerException::fromError(['code' => 'busy', 'retry' => true])->isRetryable());
        self::assertFalse(ServerException::fromError(['code' => 'busy', 'retry' => 1])->isRetryable());
        self::assertFalse(ServerException::fromError(['code' => 'busy', 'retry' => 'yes'])->isRetryable());
    }

    public function testConstantsCoverEveryCodeOfTheProtocol(): void
    {
        self::assertSame(
            ['bad_frame', 'too_large', 'bad_request', 'unknown_op', 'unknown_backend', 'unknown_tx', 'unknown_table',
             'unsupported', 'unauthorized', 'backend_error', 'unavailable', 'busy', 'timeout', 'tx_aborted', 'internal'],
            array_values((new \ReflectionClass(ServerException::class))->getConstants()),
        );
    }
}
