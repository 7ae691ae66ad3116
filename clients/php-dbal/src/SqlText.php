<?php

declare(strict_types=1);

namespace Tether\DBAL;

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
     * leadingWords returns the first $n words of $sql in upper case, skipping white space, `--` and `#` line
     * comments, block comments and opening parentheses.
     *
     * @return list<string>
     */
    public static function leadingWords(string $sql, int $n = 2): array
    {
        // The leading words are all it needs: a long statement is not scanned whole.
        \preg_match_all('/[A-Za-z_]+/', \substr(self::body($sql), 0, 256), $m, PREG_PATTERN_ORDER);
        $words = [];
        foreach (\array_slice($m[0], 0, $n) as $word) {
            $words[] = \strtoupper($word);
        }

        return $words;
    }

    /**
     * body returns $sql from its first keyword on: without the white space, comments, opening parentheses and
     * semicolons before it.
     */
    public static function body(string $sql): string
    {
        $i = 0;
        $len = \strlen($sql);
        while ($i < $len) {
            $c = $sql[$i];
            if (\ctype_space($c) || $c === '(' || $c === ';') {
                $i++;
            } elseif ($c === '-' && ($sql[$i + 1] ?? '') === '-' || $c === '#') {
                $end = \strpos($sql, "\n", $i);
                $i = $end === false ? $len : $end + 1;
            } elseif ($c === '/' && ($sql[$i + 1] ?? '') === '*') {
                $end = \strpos($sql, '*/', $i + 2);
                $i = $end === false ? $len : $end + 2;
            } else {
                break;
            }
        }

        return (string) \substr($sql, $i);
    }

    /** returnsRows tells whether $sql is a statement that returns rows (SELECT, SHOW, ..., or one with RETURNING). */
    public static function returnsRows(string $sql): bool
    {
        $first = self::leadingWords($sql, 1)[0] ?? '';

        return \in_array($first, self::ROW_KEYWORDS, true) || \preg_match('/\bRETURNING\b/i', $sql) === 1;
    }

    /** isInsert tells whether $sql is an INSERT without RETURNING. */
    public static function isInsert(string $sql): bool
    {
        return (self::leadingWords($sql, 1)[0] ?? '') === 'INSERT' && \preg_match('/\bRETURNING\b/i', $sql) !== 1;
    }
}
