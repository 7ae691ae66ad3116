<?php

declare(strict_types=1);

namespace Tether\Sql;

use Tether\Exception\LogicException;

/**
 * SqlText is what the framework integrations (clients/php-dbal, php-laravel, php-wordpress) must know of SQL text
 * on the client side, written once: how to escape a value into a string literal for the session's actual mode,
 * which statements control the transaction by their text, and which change the escaping mode.
 *
 * Escaping (escapeMySql(), quote()):
 * - MySQL/MariaDB, default sql_mode: as mysqli_real_escape_string() on a utf8mb4, utf8 or latin1 connection: NUL,
 *   \n, \r, \, ', " and Ctrl-Z are backslash-escaped, every other byte copied (no byte of a multi-byte UTF-8
 *   sequence is below 0x80; character sets whose multi-byte characters can hold a backslash or a quote, GBK, Big5,
 *   SJIS, ..., are not served).
 * - MySQL/MariaDB with sql_mode NO_BACKSLASH_ESCAPES: a backslash is an ordinary byte there, so `\'` would END
 *   the literal; as mysqlnd does in that mode, only `'` is escaped, by doubling it. Backslash-escaping there is an
 *   injection path: the caller must know the mode (noBackslashEscapes() reads it from the sql_mode text).
 * - PostgreSQL: quotes doubled; a value holding a backslash is written as an E'...' literal with the backslashes
 *   doubled, which reads the same whatever standard_conforming_strings says. A NUL byte cannot be in a PostgreSQL
 *   text literal: refused.
 *
 * Placeholders (bind(), statementCount()): a statement written for PDO, `?`, `??` and `:name`, turned into what
 * tetherd binds, read as PDO's scanner reads them.
 *
 * Transaction control (transactionControl()): tetherd pins a transaction to one backend connection only through
 * its own begin/commit/rollback, so an integration must recognise the SQL statements that begin or end one by
 * their text, and nothing else: SAVEPOINT, ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] x, RELEASE SAVEPOINT and
 * MariaDB's compound statement BEGIN NOT ATOMIC ... END are not transaction control.
 */
final class SqlText
{
    /** MYSQL is the MySQL/MariaDB dialect. */
    public const MYSQL = 'mysql';
    /** PGSQL is the PostgreSQL dialect. */
    public const PGSQL = 'pgsql';

    /** mysqli_real_escape_string()'s table in the default sql_mode. */
    private const MYSQL_BACKSLASH = ["\0" => '\\0', "\n" => '\\n', "\r" => '\\r', '\\' => '\\\\', "'" => "\\'", '"' => '\\"', "\x1a" => '\\Z'];

    private function __construct()
    {
    }

    /**
     * noBackslashEscapes tells whether an sql_mode value (what @@SESSION.sql_mode answers: a comma-separated list
     * of mode names, in any case) turns backslash escapes off.
     */
    public static function noBackslashEscapes(string $sqlMode): bool
    {
        return \in_array('NO_BACKSLASH_ESCAPES', \array_map('trim', \explode(',', \strtoupper($sqlMode))), true);
    }

    /**
     * escapeMySql returns $value escaped for use between single quotes of a MySQL/MariaDB string literal on a
     * session whose sql_mode has NO_BACKSLASH_ESCAPES ($noBackslashEscapes true) or not: exactly what
     * mysqli_real_escape_string() returns on such a session (utf8mb4, utf8, latin1).
     */
    public static function escapeMySql(string $value, bool $noBackslashEscapes): string
    {
        return $noBackslashEscapes ? \str_replace("'", "''", $value) : \strtr($value, self::MYSQL_BACKSLASH);
    }

    /**
     * quote returns $value as a complete string literal of $dialect (MYSQL or PGSQL), as PDO::quote() does; on
     * MySQL for the given NO_BACKSLASH_ESCAPES state (ignored on PostgreSQL, whose literal does not depend on it).
     *
     * @throws LogicException an unknown dialect, or a NUL byte in a PostgreSQL value
     */
    public static function quote(string $value, string $dialect, bool $noBackslashEscapes = false): string
    {
        if ($dialect === self::MYSQL) {
            return "'" . self::escapeMySql($value, $noBackslashEscapes) . "'";
        }
        if ($dialect !== self::PGSQL) {
            throw new LogicException(\sprintf("SqlText::quote: want dialect 'mysql' or 'pgsql', got %s", \var_export($dialect, true)));
        }
        if (\str_contains($value, "\0")) {
            throw new LogicException('a PostgreSQL string literal cannot hold a NUL byte; bind the value as a parameter (bytea) instead');
        }
        $doubled = \str_replace("'", "''", $value);
        if (!\str_contains($value, '\\')) {
            return "'" . $doubled . "'";
        }

        // An escape string literal reads backslashes as escapes whatever standard_conforming_strings says.
        return "E'" . \str_replace('\\', '\\\\', $doubled) . "'";
    }

    /**
     * transactionControl returns the words by which $sql begins, ends or otherwise controls a transaction by its
     * text, or null for any other statement. Leading white space, comments and `(` are skipped; on MySQL the body
     * of an executable comment (`/*! ... *\/`, `/*M!100100 ... *\/`) counts as code, as the server runs it. It
     * answers:
     * - 'BEGIN' (MySQL: not BEGIN NOT ATOMIC), 'START TRANSACTION', 'COMMIT' (with WORK, AND CHAIN, PREPARED ...),
     *   'ROLLBACK' (but not ROLLBACK [WORK|TRANSACTION] TO ...: a savepoint's);
     * - PostgreSQL: 'END', 'ABORT', 'PREPARE TRANSACTION';
     * - MySQL: 'XA', 'SET autocommit' (SET [SESSION|LOCAL] autocommit, SET @@[session.|local.]autocommit, among
     *   other assignments too), 'LOCK TABLES' and 'UNLOCK TABLES' (which commit the open transaction).
     *
     * @param string      $dialect           MYSQL or PGSQL
     * @param bool        $noBackslashEscapes MySQL: the session's sql_mode has NO_BACKSLASH_ESCAPES (a backslash
     *                                       does not escape in a string literal)
     * @param string|null $code              $sql's code as code() returns it (or any text with comments removed and
     *                                       literals emptied), when the caller has it already: not scanned again
     */
    public static function transactionControl(string $sql, string $dialect, bool $noBackslashEscapes = false, ?string $code = null): ?string
    {
        $mysql = $dialect !== self::PGSQL;
        $words = $code !== null ? self::words($code, 3) : self::leadingWords($sql, 3, $dialect, $noBackslashEscapes);
        [$first, $second, $third] = $words + ['', '', ''];

        return match ($first) {
            'BEGIN' => $mysql && $second === 'NOT' ? null : 'BEGIN',
            'START' => $second === 'TRANSACTION' ? 'START TRANSACTION' : null,
            'COMMIT' => 'COMMIT',
            'ROLLBACK' => $second === 'TO' || (\in_array($second, ['WORK', 'TRANSACTION'], true) && $third === 'TO') ? null : 'ROLLBACK',
            'END', 'ABORT' => $mysql ? null : $first,
            'PREPARE' => !$mysql && $second === 'TRANSACTION' ? 'PREPARE TRANSACTION' : null,
            'XA' => $mysql ? 'XA' : null,
            'SET' => $mysql && \stripos($sql, 'autocommit') !== false
                && self::assignsVariable($code ?? self::code($sql, $dialect, $noBackslashEscapes), 'autocommit') ? 'SET autocommit' : null,
            'LOCK' => $mysql && ($second === 'TABLES' || $second === 'TABLE') ? 'LOCK TABLES' : null,
            'UNLOCK' => $mysql && ($second === 'TABLES' || $second === 'TABLE') ? 'UNLOCK TABLES' : null,
            default => null,
        };
    }

    /**
     * setsSqlMode tells whether $sql (MySQL) is a SET statement that may change the session's sql_mode, so that an
     * integration reads the mode again before escaping the next value: SET [SESSION|LOCAL] sql_mode, SET
     * @@[session.]sql_mode, among other assignments too. (SET GLOBAL sql_mode changes only new sessions: not this
     * one.) It costs a stripos() on a short statement, a look at the first word of a long one.
     *
     * @param bool        $noBackslashEscapes the session's sql_mode has NO_BACKSLASH_ESCAPES now
     * @param string|null $code               $sql's code, when the caller has it already (see transactionControl())
     */
    public static function setsSqlMode(string $sql, bool $noBackslashEscapes = false, ?string $code = null): bool
    {
        // The cheaper test first: a search of a short statement, the first word of a long one.
        $long = \strlen($sql) > 2048;
        if (!$long && \stripos($sql, 'sql_mode') === false) {
            return false;
        }
        $first = $code !== null ? self::words($code, 1) : self::leadingWords($sql, 1, self::MYSQL, $noBackslashEscapes);

        return ($first[0] ?? '') === 'SET' && (!$long || \stripos($sql, 'sql_mode') !== false) && self::assignsVariable($code ?? self::code($sql, self::MYSQL, $noBackslashEscapes), 'sql_mode');
    }

    /**
     * bind returns $sql and its parameters as tetherd binds them, from a statement written for PDO: positional
     * placeholders of $dialect and a list of values in placeholder order. It reads placeholders as PDO's own
     * scanner does, in code only: not inside string literals, quoted identifiers (MySQL `...`), PostgreSQL dollar
     * quoted bodies or comments, where on MySQL an executable comment (`/*! ... *\/`) is a comment too (PDO does not
     * look inside it), and string literals always take backslash escapes (PostgreSQL: E'...' only).
     * - `??` is PDO's escape for a literal `?` (Laravel's PostgresGrammar writes jsonb's `?`, `?|` and `?&`
     *   operators that way); it becomes `?`.
     * - `?` is the next positional parameter: `$1`, `$2`, ... on PostgreSQL, left as `?` on MySQL.
     * - `:name` (only when $bindings has string keys, `name` or `:name`) is a named parameter, turned into a
     *   positional one and its value moved into place; a name may be used several times. `::` is a cast.
     *
     * @param array<int|string, mixed> $bindings a list, or name => value for `:name`
     * @param string $dialect MYSQL or PGSQL
     * @return array{0: string, 1: list<mixed>}
     * @throws LogicException named and positional parameters mixed, a named parameter without a value, or (on
     *                        PostgreSQL) a count of `?` that does not match $bindings
     */
    public static function bind(string $sql, array $bindings, string $dialect): array
    {
        $named = false;
        foreach ($bindings as $key => $_) {
            if (\is_string($key)) {
                $named = true;
                break;
            }
        }
        if (!$named) {
            $bindings = \array_values($bindings);
            // Fast path: nothing to rewrite on MySQL unless `??` may appear; on PostgreSQL unless `?` appears.
            if (!\str_contains($sql, '?') || ($dialect === self::MYSQL && !\str_contains($sql, '??'))) {
                return [$sql, $bindings];
            }
        }

        $out = '';
        $params = [];
        $positional = 0;
        $namedSlots = [];
        $length = \strlen($sql);
        $start = 0; // start of the code not yet copied to $out
        $i = 0;
        while ($i < $length) {
            // Jump over the characters that cannot start a literal, a comment or a placeholder.
            $i += \strcspn($sql, "?:'\"`\$-/#", $i);
            if ($i >= $length) {
                break;
            }
            $skipTo = self::skipLiteralOrComment($sql, $i, $dialect);
            if ($skipTo !== null) {
                $i = $skipTo;
                continue;
            }
            $c = $sql[$i];
            if ($c === '?') {
                $out .= \substr($sql, $start, $i - $start);
                if ($i + 1 < $length && $sql[$i + 1] === '?') {
                    $out .= '?';
                    $i += 2;
                } else {
                    if ($named) {
                        throw new LogicException('the statement mixes positional (?) and named (:name) parameters; use one kind');
                    }
                    $positional++;
                    $out .= $dialect === self::PGSQL ? '$' . $positional : '?';
                    $i++;
                }
                $start = $i;
                continue;
            }
            if ($c === ':' && $named) {
                if ($i + 1 < $length && $sql[$i + 1] === ':') {
                    $i += 2; // a PostgreSQL cast
                    continue;
                }
                if (\preg_match('/\G[A-Za-z_][A-Za-z0-9_]*/', $sql, $m, 0, $i + 1) === 1) {
                    $name = $m[0];
                    $value = \array_key_exists($name, $bindings) ? $bindings[$name]
                        : (\array_key_exists(':' . $name, $bindings) ? $bindings[':' . $name]
                        : throw new LogicException(\sprintf('no value is bound to the named parameter :%s', $name)));
                    $out .= \substr($sql, $start, $i - $start);
                    if ($dialect === self::PGSQL) {
                        if (!isset($namedSlots[$name])) {
                            $params[] = $value;
                            $namedSlots[$name] = \count($params);
                        }
                        $out .= '$' . $namedSlots[$name];
                    } else {
                        $params[] = $value;
                        $out .= '?';
                    }
                    $i += 1 + \strlen($name);
                    $start = $i;
                    continue;
                }
            }
            $i++;
        }
        $out .= \substr($sql, $start);

        if (!$named) {
            $params = $bindings;
            if ($dialect === self::PGSQL && $positional !== \count($params)) {
                throw new LogicException(\sprintf('the statement has %d ? placeholders but %d bindings', $positional, \count($params)));
            }
        }

        return [$out, $params];
    }

    /**
     * statementCount returns how many statements $sql holds: the pieces separated by `;` in code that contain more
     * than white space and comments, read as bind() reads them.
     *
     * @param string $dialect MYSQL or PGSQL
     */
    public static function statementCount(string $sql, string $dialect): int
    {
        $count = 0;
        $hasCode = false;
        $length = \strlen($sql);
        $i = 0;
        while ($i < $length) {
            $skipTo = self::skipLiteralOrComment($sql, $i, $dialect);
            if ($skipTo !== null) {
                if (!self::isCommentAt($sql, $i, $dialect)) {
                    $hasCode = true;
                }
                $i = $skipTo;
                continue;
            }
            $c = $sql[$i];
            if ($c === ';') {
                if ($hasCode) {
                    $count++;
                }
                $hasCode = false;
            } elseif (!\ctype_space($c)) {
                $hasCode = true;
            }
            $i++;
        }

        return $hasCode ? $count + 1 : $count;
    }

    /**
     * leadingWords returns the first $n words of $sql's code, upper-cased: after white space, comments, `(` and
     * `;`, and between words any white space and comments.
     *
     * @param string $dialect MYSQL or PGSQL (MySQL: `#` comments, `--` only before white space, executable comments)
     * @return list<string>
     */
    public static function leadingWords(string $sql, int $n, string $dialect, bool $noBackslashEscapes = false): array
    {
        // Most statements begin with their words, no comment before or between them: read those off $sql itself.
        if (\preg_match('/\A[\s(;]*+((?:[A-Za-z_][A-Za-z0-9_]*+\s*+){1,' . $n . '})/', $sql, $m) === 1) {
            $next = $sql[\strlen($m[0])] ?? '';
            $words = \preg_split('/\s+/', \strtoupper(\rtrim($m[1])));
            if (\count($words) === $n || ($next !== '/' && $next !== '-' && $next !== '#')) {
                return $words;
            }
        }
        // Read the code a little at a time: the words are found, or ended by something else, within the first
        // few dozen bytes of nearly every statement, before any long string literal.
        for ($limit = 32; ; $limit *= 8) {
            $code = self::code($sql, $dialect, $noBackslashEscapes, $limit, $complete);
            $words = self::words($code, $n, $end);
            if ($complete || $end < \strlen($code)) {
                return $words;
            }
        }
    }

    /**
     * words returns the first $n words of $code (text without comments), upper-cased, after leading white space,
     * `(` and `;`; it stops at the first thing between words that is not white space.
     *
     * @return list<string>
     */
    private static function words(string $code, int $n, ?int &$end = null): array
    {
        $i = \strspn($code, " \t\r\n\f\v(;");
        $words = [];
        while (\count($words) < $n && \preg_match('/\G[A-Za-z_][A-Za-z0-9_]*/', $code, $m, 0, $i) === 1) {
            $words[] = \strtoupper($m[0]);
            $i += \strlen($m[0]);
            $end = $i;
            $i += \strspn($code, " \t\r\n\f\v", $i);
        }
        $end = \count($words) === $n ? $end : $i;

        return $words;
    }

    /**
     * code returns $sql with comments replaced by a space (the body of a MySQL executable comment kept) and the
     * insides of string literals and quoted identifiers emptied, reading at most about $limit bytes of code (0: all).
     * On MySQL a backslash escapes the next byte in a '...' or "..." literal unless $noBackslashEscapes (sql_mode
     * NO_BACKSLASH_ESCAPES); on PostgreSQL only in an E'...' literal, and block comments nest.
     */
    public static function code(string $sql, string $dialect, bool $noBackslashEscapes = false, int $limit = 0, ?bool &$complete = null): string
    {
        $mysql = $dialect !== self::PGSQL;
        $out = '';
        $length = \strlen($sql);
        $i = 0;
        while ($i < $length && ($limit === 0 || \strlen($out) < $limit)) {
            $run = \strcspn($sql, "'\"`#-/*\$", $i);
            $out .= \substr($sql, $i, $run);
            $i += $run;
            if ($i >= $length) {
                break;
            }
            $c = $sql[$i];
            $next = $sql[$i + 1] ?? '';
            if ($c === '/' && $next === '*') {
                if ($mysql && \preg_match('/\G\/\*M?!\d*/', $sql, $m, 0, $i) === 1) {
                    $i += \strlen($m[0]); // executable comment: its body is code; its `*/` is skipped below
                    $out .= ' ';
                    continue;
                }
                $i = $mysql ? self::endOfComment($sql, $i + 2) : self::endOfNestedComment($sql, $i + 2);
                $out .= ' ';
            } elseif ($c === '*' && $next === '/' && $mysql) {
                $i += 2; // the end of an executable comment
                $out .= ' ';
            } elseif ($c === '#' && $mysql || ($c === '-' && $next === '-' && (!$mysql || !isset($sql[$i + 2]) || \ctype_space($sql[$i + 2])))) {
                $end = \strpos($sql, "\n", $i);
                $i = $end === false ? $length : $end + 1;
                $out .= ' ';
            } elseif ($c === "'" || $c === '"' || ($c === '`' && $mysql)) {
                $backslash = $mysql ? $c !== '`' && !$noBackslashEscapes
                    : $c === "'" && $i > 0 && ($sql[$i - 1] === 'E' || $sql[$i - 1] === 'e') && ($i < 2 || !\preg_match('/[A-Za-z0-9_$]/', $sql[$i - 2]));
                $i = self::skipQuoted($sql, $i + 1, $c, $backslash);
                $out .= $c . $c;
            } elseif ($c === '$' && !$mysql && \preg_match('/\G\$([A-Za-z_][A-Za-z0-9_]*)?\$/', $sql, $m, 0, $i) === 1) {
                $end = \strpos($sql, $m[0], $i + \strlen($m[0]));
                $i = $end === false ? $length : $end + \strlen($m[0]);
                $out .= "''";
            } else {
                $out .= $c;
                $i++;
            }
        }
        $complete = $i >= $length;

        return $out;
    }

    /** isCommentAt tells whether a comment starts at $i, as bind() reads them (MySQL: `/*!` too). */
    private static function isCommentAt(string $sql, int $i, string $dialect): bool
    {
        $c = $sql[$i];
        $next = $sql[$i + 1] ?? '';
        if ($c === '/' && $next === '*') {
            return true;
        }
        if ($c === '-' && $next === '-') {
            // MySQL needs white space (or the end) after `--`.
            return $dialect === self::PGSQL || !isset($sql[$i + 2]) || \ctype_space($sql[$i + 2]);
        }

        return $c === '#' && $dialect === self::MYSQL;
    }

    /**
     * skipLiteralOrComment returns the offset just after the literal, quoted identifier or comment that starts at
     * $i, as bind() reads them, or null when none starts there. An unterminated one runs to the end of the text.
     */
    private static function skipLiteralOrComment(string $sql, int $i, string $dialect): ?int
    {
        $c = $sql[$i];
        if (self::isCommentAt($sql, $i, $dialect)) {
            if ($c === '/') {
                return $dialect === self::PGSQL ? self::endOfNestedComment($sql, $i + 2) : self::endOfComment($sql, $i + 2);
            }
            $end = \strpos($sql, "\n", $i);

            return $end === false ? \strlen($sql) : $end + 1;
        }
        if ($dialect === self::MYSQL) {
            if ($c === "'" || $c === '"' || $c === '`') {
                return self::skipQuoted($sql, $i + 1, $c, $c !== '`');
            }

            return null;
        }
        if ($c === "'") {
            $prev = $i > 0 ? $sql[$i - 1] : '';
            $escapes = ($prev === 'E' || $prev === 'e') && ($i < 2 || !\preg_match('/[A-Za-z0-9_$]/', $sql[$i - 2]));

            return self::skipQuoted($sql, $i + 1, "'", $escapes);
        }
        if ($c === '"') {
            return self::skipQuoted($sql, $i + 1, '"', false);
        }
        if ($c === '$' && ($i === 0 || !\preg_match('/[A-Za-z0-9_]/', $sql[$i - 1]))
            && \preg_match('/\G\$([A-Za-z_][A-Za-z0-9_]*)?\$/', $sql, $m, 0, $i) === 1) {
            $end = \strpos($sql, $m[0], $i + \strlen($m[0]));

            return $end === false ? \strlen($sql) : $end + \strlen($m[0]);
        }

        return null;
    }

    /**
     * skipQuoted returns the offset just past the quoted text (a string literal or quoted identifier) whose opening
     * $quote is just before $j: a doubled quote stands for one, and with $backslash a backslash escapes the next
     * byte. Unterminated: the length of $sql. The one literal scanner of the client and the integrations.
     */
    public static function skipQuoted(string $sql, int $j, string $quote, bool $backslash): int
    {
        $length = \strlen($sql);
        $stops = $backslash ? $quote . '\\' : $quote;
        while (true) {
            $j += \strcspn($sql, $stops, $j);
            if ($j >= $length) {
                return $length;
            }
            if ($sql[$j] !== $quote) {
                $j += 2; // a backslash and the byte it escapes
            } elseif (($sql[$j + 1] ?? '') === $quote) {
                $j += 2;
            } else {
                return $j + 1;
            }
        }
    }

    /** endOfComment returns the offset just past the `*\/` that ends a block comment whose body starts at $j. */
    private static function endOfComment(string $sql, int $j): int
    {
        $end = \strpos($sql, '*/', $j);

        return $end === false ? \strlen($sql) : $end + 2;
    }

    /** endOfNestedComment is endOfComment for PostgreSQL, whose block comments nest. */
    private static function endOfNestedComment(string $sql, int $j): int
    {
        $length = \strlen($sql);
        $depth = 1;
        while ($j < $length) {
            $end = \strpos($sql, '*/', $j);
            if ($end === false) {
                return $length;
            }
            $open = \strpos($sql, '/*', $j);
            if ($open !== false && $open < $end) {
                $depth++;
                $j = $open + 2;
                continue;
            }
            $j = $end + 2;
            if (--$depth === 0) {
                return $j;
            }
        }

        return $length;
    }

    /**
     * assignsVariable tells whether the code of a SET statement assigns the session variable $name in any of its
     * assignments: `name =`, `SESSION name =`, `LOCAL name =`, `@@name =`, `@@session.name =`, `@@local.name :=`
     * (not `@name`, a user variable, nor GLOBAL name, which this session does not see).
     */
    private static function assignsVariable(string $code, string $name): bool
    {
        $pattern = '/(?:^\s*SET|,)\s*(?:(?:SESSION|LOCAL)\s+|@@(?:SESSION\.|LOCAL\.)?)?' . \preg_quote($name, '/') . '\s*:?=/i';

        return \preg_match($pattern, \ltrim($code, " \t\r\n(;")) === 1;
    }
}
