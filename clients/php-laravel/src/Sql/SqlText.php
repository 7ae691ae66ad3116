<?php

declare(strict_types=1);

namespace Tether\Laravel\Sql;

use Tether\Exception\LogicException;
use Tether\Laravel\UnsupportedStatementException;
use Tether\Sql\SqlText as SharedSqlText;

/**
 * SqlText is the driver's door to the client's SQL text helpers (Tether\Sql\SqlText, shared by every integration):
 * the platform names, and the placeholder rewriting of a statement Laravel prepared for PDO into the form tetherd
 * binds, refusing what does not fit with Laravel's UnsupportedStatementException.
 */
final class SqlText
{
    public const MYSQL = SharedSqlText::MYSQL;
    public const PGSQL = SharedSqlText::PGSQL;

    /**
     * bind returns the statement and its parameters as tetherd takes them: Tether\Sql\SqlText::bind().
     *
     * @param array<int|string, mixed> $bindings Laravel's prepared bindings: a list, or name => value for `:name`
     * @return array{0: string, 1: list<mixed>}
     * @throws UnsupportedStatementException named and positional parameters mixed, a named parameter without a
     *                                       value, or a count that does not match the placeholders
     */
    public static function bind(string $sql, array $bindings, string $platform): array
    {
        try {
            return SharedSqlText::bind($sql, $bindings, $platform);
        } catch (LogicException $e) {
            throw new UnsupportedStatementException($e->getMessage());
        }
    }

    /** statementCount returns how many statements $sql holds: Tether\Sql\SqlText::statementCount(). */
    public static function statementCount(string $sql, string $platform): int
    {
        return SharedSqlText::statementCount($sql, $platform);
    }
}
