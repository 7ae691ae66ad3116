<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Tether\Sql\SqlText as SharedSqlText;

/**
 * SqlText reads what the driver must know of a statement before sending it: whether it returns rows (sent as a
 * tetherd `query`, else as an `exec` that reports affected rows and the insert id), and whether it is an INSERT. It
 * looks at the leading keywords only, after white space, comments and opening parentheses; tetherd itself decides
 * everything about session state by the server's report. Escaping and transaction-control detection are the
 * client's, shared by every integration: Tether\Sql\SqlText.
 */
final class SqlText
{
    /** Leading keywords of statements that return rows. */
    private const ROW_KEYWORDS = ['SELECT', 'WITH', 'SHOW', 'VALUES', 'EXPLAIN', 'DESCRIBE', 'DESC', 'TABLE', 'CALL', 'PRAGMA', 'FETCH'];

    private function __construct()
    {
    }

    /**
     * firstWord returns the first word of $sql in upper case, after white space, comments, opening parentheses and
     * semicolons: Tether\Sql\SqlText::leadingWords(), the scanner every integration shares (a long statement is not
     * read whole).
     */
    public static function firstWord(string $sql): string
    {
        return SharedSqlText::leadingWords($sql, 1, SharedSqlText::MYSQL)[0] ?? '';
    }

    /** returnsRows tells whether $sql is a statement that returns rows (SELECT, SHOW, ..., or one with RETURNING). */
    public static function returnsRows(string $sql): bool
    {
        $first = self::firstWord($sql);

        return \in_array($first, self::ROW_KEYWORDS, true) || \preg_match('/\bRETURNING\b/i', $sql) === 1;
    }

    /** isInsert tells whether $sql is an INSERT without RETURNING. */
    public static function isInsert(string $sql): bool
    {
        return self::firstWord($sql) === 'INSERT' && \preg_match('/\bRETURNING\b/i', $sql) !== 1;
    }
}
