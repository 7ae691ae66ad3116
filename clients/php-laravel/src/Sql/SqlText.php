<?php

declare(strict_types=1);

namespace Tether\Laravel\Sql;

use Tether\Laravel\UnsupportedStatementException;

/**
 * SqlText rewrites the placeholders of a statement that Laravel prepared for PDO into the form tetherd binds, and
 * tells what a statement is, without ever looking inside string literals, quoted identifiers or comments.
 *
 * What it reads as "code" (everything else is skipped verbatim):
 * - MySQL/MariaDB: '...' and "..." strings (backslash escapes and doubled quotes), `...` identifiers, comments
 *   `-- `, `#` and `/* *\/`.
 * - PostgreSQL: '...' strings (doubled quotes; E'...' also with backslash escapes), "..." identifiers, dollar
 *   quoted $tag$...$tag$ bodies, comments `--` and nested `/* *\/`, and `::` casts (never a named placeholder).
 *
 * Placeholders in code:
 * - `??` is PDO's escape for a literal `?` (Laravel's PostgresGrammar writes jsonb's `?`, `?|` and `?&` operators
 *   that way); it becomes `?`.
 * - `?` is the next positional parameter: `$1`, `$2`, ... on PostgreSQL, left as `?` on MySQL.
 * - `:name` (only when the bindings have string keys) is a named parameter, turned into a positional one and its
 *   value moved into place; a name may be used several times.
 */
final class SqlText
{
    public const MYSQL = 'mysql';
    public const PGSQL = 'pgsql';

    /**
     * bind returns the statement and its parameters as tetherd takes them: positional placeholders of $platform,
     * a list of values in placeholder order.
     *
     * @param array<int|string, mixed> $bindings Laravel's prepared bindings: a list, or name => value for `:name`
     * @return array{0: string, 1: list<mixed>}
     * @throws UnsupportedStatementException named and positional parameters mixed, a named parameter without a
     *                                       value, or a count that does not match the placeholders
     */
    public static function bind(string $sql, array $bindings, string $platform): array
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
            if (!\str_contains($sql, '?') || ($platform === self::MYSQL && !\str_contains($sql, '??'))) {
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
            $skipTo = self::skipQuotedOrComment($sql, $i, $platform);
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
                        throw new UnsupportedStatementException('the statement mixes positional (?) and named (:name) parameters; use one kind');
                    }
                    $positional++;
                    $out .= $platform === self::PGSQL ? '$' . $positional : '?';
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
                        : throw new UnsupportedStatementException(\sprintf('no value is bound to the named parameter :%s', $name)));
                    $out .= \substr($sql, $start, $i - $start);
                    if ($platform === self::PGSQL) {
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
            if ($platform === self::PGSQL && $positional !== \count($params)) {
                throw new UnsupportedStatementException(\sprintf('the statement has %d ? placeholders but %d bindings', $positional, \count($params)));
            }
        }

        return [$out, $params];
    }

    /**
     * statementCount returns how many statements $sql holds: the pieces separated by `;` in code that contain
     * more than white space and comments.
     */
    public static function statementCount(string $sql, string $platform): int
    {
        $count = 0;
        $hasCode = false;
        $length = \strlen($sql);
        $i = 0;
        while ($i < $length) {
            $skipTo = self::skipQuotedOrComment($sql, $i, $platform);
            if ($skipTo !== null) {
                if (!self::isCommentAt($sql, $i, $platform)) {
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

    private static function isCommentAt(string $sql, int $i, string $platform): bool
    {
        $c = $sql[$i];
        $next = $sql[$i + 1] ?? '';
        if ($c === '/' && $next === '*') {
            return true;
        }
        if ($c === '-' && $next === '-') {
            // MySQL needs white space (or the end) after `--`.
            return $platform === self::PGSQL || !isset($sql[$i + 2]) || \ctype_space($sql[$i + 2]);
        }

        return $c === '#' && $platform === self::MYSQL;
    }

    /**
     * skipQuotedOrComment returns the offset just after the literal, quoted identifier or comment that starts at
     * $i, or null when none starts there. An unterminated one runs to the end of the text.
     */
    private static function skipQuotedOrComment(string $sql, int $i, string $platform): ?int
    {
        $c = $sql[$i];
        $length = \strlen($sql);
        if (self::isCommentAt($sql, $i, $platform)) {
            if ($c === '/') {
                $depth = 1;
                $j = $i + 2;
                while ($j < $length && $depth > 0) {
                    if ($sql[$j] === '*' && ($sql[$j + 1] ?? '') === '/') {
                        $depth--;
                        $j += 2;
                    } elseif ($platform === self::PGSQL && $sql[$j] === '/' && ($sql[$j + 1] ?? '') === '*') {
                        $depth++;
                        $j += 2;
                    } else {
                        $j++;
                    }
                }

                return $j;
            }
            $end = \strpos($sql, "\n", $i);

            return $end === false ? $length : $end + 1;
        }
        if ($platform === self::MYSQL) {
            if ($c === "'" || $c === '"') {
                return self::skipQuoted($sql, $i, $c, true);
            }
            if ($c === '`') {
                return self::skipQuoted($sql, $i, '`', false);
            }

            return null;
        }
        if ($c === "'") {
            $prev = $i > 0 ? $sql[$i - 1] : '';
            $escapes = ($prev === 'E' || $prev === 'e') && ($i < 2 || !\preg_match('/[A-Za-z0-9_$]/', $sql[$i - 2]));

            return self::skipQuoted($sql, $i, "'", $escapes);
        }
        if ($c === '"') {
            return self::skipQuoted($sql, $i, '"', false);
        }
        if ($c === '$' && ($i === 0 || !\preg_match('/[A-Za-z0-9_]/', $sql[$i - 1]))
            && \preg_match('/\G\$([A-Za-z_][A-Za-z0-9_]*)?\$/', $sql, $m, 0, $i) === 1) {
            $end = \strpos($sql, $m[0], $i + \strlen($m[0]));

            return $end === false ? $length : $end + \strlen($m[0]);
        }

        return null;
    }

    private static function skipQuoted(string $sql, int $i, string $quote, bool $backslashEscapes): int
    {
        $length = \strlen($sql);
        $j = $i + 1;
        while ($j < $length) {
            $c = $sql[$j];
            if ($backslashEscapes && $c === '\\') {
                $j += 2;
                continue;
            }
            if ($c === $quote) {
                if (($sql[$j + 1] ?? '') === $quote) {
                    $j += 2;
                    continue;
                }

                return $j + 1;
            }
            $j++;
        }

        return $length;
    }
}
