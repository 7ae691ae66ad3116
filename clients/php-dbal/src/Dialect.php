<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Driver\AbstractMySQLDriver;
use Doctrine\DBAL\Driver\AbstractPostgreSQLDriver;
use Doctrine\DBAL\Driver\API\ExceptionConverter as ExceptionConverterInterface;
use Doctrine\DBAL\Driver\API\MySQL\ExceptionConverter as MySQLExceptionConverter;
use Doctrine\DBAL\Driver\API\PostgreSQL\ExceptionConverter as PostgreSQLExceptionConverter;
use Doctrine\DBAL\Driver\Connection as DriverConnection;
use Doctrine\DBAL\Platforms\AbstractMySQLPlatform;
use Doctrine\DBAL\Platforms\AbstractPlatform;
use Doctrine\DBAL\Platforms\PostgreSQLPlatform;
use Tether\DBAL\Exception\DriverError;

/**
 * Dialect is the SQL server behind a Tether backend, as far as DBAL cares: MySQL/MariaDB or PostgreSQL. It decides
 * the placeholders sent to tetherd (`?` or `$1..$n`), which DBAL platform and exception
 * converter apply, and how error codes are carried (MySQL error number as the exception code, PostgreSQL SQLSTATE).
 */
enum Dialect: string
{
    case MySQL = 'mysql';
    case PostgreSQL = 'postgresql';

    /**
     * fromServerVersion reads the dialect from a version string: the server's own (`10.11.6-MariaDB-...`,
     * `PostgreSQL 15.4 on ...`, what SELECT VERSION() answers) or DBAL's serverVersion convention (`mariadb-10.11.6`,
     * `8.0.31` for MySQL, `15` or `15.4` for PostgreSQL). A bare number with a major version of 10 or more is
     * PostgreSQL (MariaDB's strings always name MariaDB; MySQL's majors are 5, 8 and 9).
     *
     * @throws DriverError the string holds no version number
     */
    public static function fromServerVersion(string $version): self
    {
        if (\stripos($version, 'mariadb') !== false || \stripos($version, 'mysql') !== false) {
            return self::MySQL;
        }
        if (\stripos($version, 'postgres') !== false) {
            return self::PostgreSQL;
        }
        if (\preg_match('/^\s*(\d+)/', $version, $m) !== 1) {
            throw new DriverError(\sprintf(
                'server version %s names neither MySQL/MariaDB nor PostgreSQL: give the server\'s own version string (SELECT VERSION()), e.g. "10.11.6-MariaDB" or "PostgreSQL 15.4", or omit serverVersion to detect it',
                \var_export($version, true),
            ));
        }

        return (int) $m[1] >= 10 ? self::PostgreSQL : self::MySQL;
    }

    /** fromPlatform returns the dialect of a DBAL platform, or null for one that is neither MySQL nor PostgreSQL. */
    public static function fromPlatform(AbstractPlatform $platform): ?self
    {
        return match (true) {
            $platform instanceof AbstractMySQLPlatform => self::MySQL,
            $platform instanceof PostgreSQLPlatform => self::PostgreSQL,
            default => null,
        };
    }

    /**
     * normalizeServerVersion turns what SELECT VERSION() answers into what DBAL's own drivers report: MariaDB's as
     * it is, PostgreSQL's `PostgreSQL 15.4 (Debian ...) on x86_64...` into `15.4`.
     */
    public function normalizeServerVersion(string $version): string
    {
        if ($this === self::PostgreSQL && \preg_match('/^PostgreSQL\s+(\d+(?:\.\d+)*)/i', $version, $m) === 1) {
            return $m[1];
        }

        return $version;
    }

    /**
     * platformDriver returns DBAL's own abstract driver for this dialect (its connect() is never called), whose
     * version-to-platform rules and schema manager Tether's driver uses as they are.
     */
    public function platformDriver(): AbstractMySQLDriver|AbstractPostgreSQLDriver
    {
        return match ($this) {
            self::MySQL => new class () extends AbstractMySQLDriver {
                public function connect(array $params): DriverConnection
                {
                    throw new \LogicException('platform-only driver: Tether\DBAL\Driver connects');
                }
            },
            self::PostgreSQL => new class () extends AbstractPostgreSQLDriver {
                public function connect(array $params): DriverConnection
                {
                    throw new \LogicException('platform-only driver: Tether\DBAL\Driver connects');
                }
            },
        };
    }

    /** exceptionConverter returns DBAL's own exception converter for this dialect. */
    public function exceptionConverter(): ExceptionConverterInterface
    {
        return match ($this) {
            self::MySQL => new MySQLExceptionConverter(),
            self::PostgreSQL => new PostgreSQLExceptionConverter(),
        };
    }
}
