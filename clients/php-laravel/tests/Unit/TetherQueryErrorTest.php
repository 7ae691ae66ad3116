<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\Connection\CommunicationException;
use Tether\Connection\UnknownOutcomeException;
use Tether\Laravel\Sql\SqlText;
use Tether\Laravel\TetherQueryError;
use Tether\Server\ServerException;

final class TetherQueryErrorTest extends TestCase
{
    public function testMysqlErrorNumberGetsItsSqlstateAndPdoMessage(): void
    {
        $e = TetherQueryError::from(new ServerException("Duplicate entry 'a' for key 'u'", ServerException::BACKEND_ERROR, false, '1062'), SqlText::MYSQL);
        self::assertSame('23000', $e->getCode());
        self::assertSame(['23000', 1062, "Duplicate entry 'a' for key 'u'"], $e->errorInfo);
        self::assertSame("SQLSTATE[23000]: Integrity constraint violation: 1062 Duplicate entry 'a' for key 'u'", $e->getMessage());
        self::assertInstanceOf(ServerException::class, $e->getPrevious());
    }

    public function testPostgresSqlstateIsTheCode(): void
    {
        $e = TetherQueryError::from(new ServerException('duplicate key value violates unique constraint "u"', ServerException::BACKEND_ERROR, false, '23505'), SqlText::PGSQL);
        self::assertSame('23505', $e->getCode());
        self::assertSame(7, $e->errorInfo[1]);
        self::assertStringStartsWith('SQLSTATE[23505]: Unique violation: 7 ERROR:  duplicate key', $e->getMessage());
    }

    public function testTransportFailuresReadAsLostConnectionOnlyWhenNothingWasSent(): void
    {
        $notSent = TetherQueryError::from(new CommunicationException('connect: no such file'), SqlText::MYSQL);
        self::assertSame('08S01', $notSent->getCode());
        self::assertStringContainsString('Lost connection', $notSent->getMessage());

        $unknown = TetherQueryError::from(new UnknownOutcomeException('EOF'), SqlText::MYSQL);
        self::assertSame('HY000', $unknown->getCode());
        self::assertStringNotContainsString('Lost connection', $unknown->getMessage());
        self::assertStringContainsString('may or may not have run', $unknown->getMessage());
    }

    public function testServerCodesMapToPdoLikeStates(): void
    {
        self::assertSame('40001', TetherQueryError::from(new ServerException('idle', ServerException::TX_ABORTED, true), SqlText::PGSQL)->getCode());
        self::assertSame('40001', TetherQueryError::from(new ServerException('Deadlock found', ServerException::BACKEND_ERROR, true, '1213'), SqlText::MYSQL)->getCode());
        self::assertSame('HYT00', TetherQueryError::from(new ServerException('deadline', ServerException::TIMEOUT, false), SqlText::MYSQL)->getCode());
        $busy = TetherQueryError::from(new ServerException('no connection free', ServerException::BUSY, true), SqlText::MYSQL);
        self::assertSame('SQLSTATE[HY000]: General error: tetherd answered busy: no connection free', $busy->getMessage());
    }
}
