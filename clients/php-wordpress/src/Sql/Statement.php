<?php

declare(strict_types=1);

namespace Tether\WordPress\Sql;

use Tether\Sql\SqlText;

/**
 * Statement is what the drop-in needs to know about one SQL string before sending it: its code with comments
 * removed and the insides of string literals and quoted identifiers emptied (so that a `;`, an `@` or a keyword
 * inside a value never counts), whether a second statement follows a `;`, its first keywords, and the user
 * variables it names. MySQL's executable comments (`/*! ... *\/`, `/*M! ... *\/`) count as code, as the server
 * runs them.
 */
final class Statement
{
    /**
     * @param list<string> $userVariables lower-cased names, without the `@`
     * @param string $masked $sql with each literal and comment replaced by "\x01N\x01", N indexing $spans
     * @param list<array{int, int}> $spans offset and length in $sql of each literal and comment
     */
    private function __construct(
        public readonly string $sql,
        public readonly string $code,
        public readonly bool $multiple,
        public readonly array $userVariables,
        private readonly string $masked,
        private readonly array $spans,
    ) {
    }

    /**
     * parse reads $sql; it never fails: an unterminated literal or comment runs to the end of the string.
     * $noBackslashEscapes: the session's sql_mode has NO_BACKSLASH_ESCAPES, where a backslash in a string literal is
     * an ordinary byte (`'a\'` is a whole literal).
     */
    public static function parse(string $sql, bool $noBackslashEscapes = false): self
    {
        $code = '';
        $masked = '';
        $spans = [];
        $mask = static function (int $start, int $end) use (&$masked, &$spans): void {
            $masked .= "\x01" . \count($spans) . "\x01";
            $spans[] = [$start, $end - $start];
        };
        $length = \strlen($sql);
        $inExecutableComment = false;
        $multiple = false;
        $afterSemicolon = false;
        for ($i = 0; $i < $length; $i++) {
            // Copy the run of ordinary characters up to the next one that may start a literal, a comment or a
            // statement end in one step: a post body of megabytes must not cost a PHP loop per byte.
            $run = \strcspn($sql, "'\"`#-/*;", $i);
            if ($run > 0) {
                $chunk = \substr($sql, $i, $run);
                if ($afterSemicolon && \trim($chunk) !== '') {
                    $multiple = true;
                }
                $code .= $chunk;
                $masked .= $chunk;
                $i += $run;
                if ($i >= $length) {
                    break;
                }
            }
            $c = $sql[$i];
            $next = $i + 1 < $length ? $sql[$i + 1] : '';
            if ($c === "'" || $c === '"' || $c === '`') {
                $start = $i;
                // the closing quote (Tether\Sql\SqlText::skipQuoted() returns the offset past it), or the end
                $i = SqlText::skipQuoted($sql, $i + 1, $c, $c !== '`' && !$noBackslashEscapes) - 1;
                $mask($start, \min($i + 1, $length));
                $code .= $c === '`' ? '`_`' : $c . $c;
                $afterSemicolon && $multiple = true;
                continue;
            }
            if ($c === '#' || ($c === '-' && $next === '-' && ($i + 2 >= $length || \ctype_space($sql[$i + 2])))) {
                $end = \strpos($sql, "\n", $i);
                $mask($i, $end === false ? $length : $end);
                $i = $end === false ? $length : $end - 1; // the newline itself is white space of the code
                $code .= ' ';
                continue;
            }
            if ($c === '/' && $next === '*') {
                if (\preg_match('/\G\/\*M?!\d*/A', $sql, $m, 0, $i)) {
                    $inExecutableComment = true;
                    $masked .= $m[0];
                    $i += \strlen($m[0]) - 1;
                    $code .= ' ';
                    continue;
                }
                $end = \strpos($sql, '*/', $i + 2);
                $mask($i, $end === false ? $length : $end + 2);
                $i = $end === false ? $length : $end + 1;
                $code .= ' ';
                continue;
            }
            if ($inExecutableComment && $c === '*' && $next === '/') {
                $inExecutableComment = false;
                $masked .= '*/';
                $i++;
                $code .= ' ';
                continue;
            }
            if ($c === ';') {
                $afterSemicolon = true;
                $masked .= ';';
                $code .= ' ';
                continue;
            }
            if ($afterSemicolon && !\ctype_space($c)) {
                $multiple = true;
            }
            $code .= $c;
            $masked .= $c;
        }
        $code = \trim($code);
        \preg_match_all('/(?<![@\w$])@(?!@)([A-Za-z0-9_$.]+)/', $code, $m);

        return new self($sql, $code, $multiple, \array_values(\array_unique(\array_map('strtolower', $m[1]))), $masked, $spans);
    }

    /**
     * rewriteCode returns the statement with $pattern replaced by $replacement in its code only: literals,
     * quoted identifiers and comments are left as they are.
     */
    public function rewriteCode(string $pattern, string $replacement): self
    {
        $masked = (string) \preg_replace_callback($pattern, static fn (): string => $replacement, $this->masked);
        $sql = (string) \preg_replace_callback('/\x01(\d+)\x01/', fn (array $m): string => \substr($this->sql, ...$this->spans[(int) $m[1]]), $masked);

        return self::parse($sql);
    }

    /** keywords returns the first $n words of the code, upper-cased, skipping leading parentheses. */
    public function keywords(int $n = 2): array
    {
        \preg_match_all('/[A-Za-z_]+/', \substr(\ltrim($this->code, "( \t\r\n"), 0, 200), $m);

        return \array_map('strtoupper', \array_slice($m[0], 0, $n));
    }

    /** verb returns the first keyword, upper-cased ('' for none). */
    public function verb(): string
    {
        return $this->keywords(1)[0] ?? '';
    }

    /** matches tests a regular expression against the code (comments removed, literals emptied). */
    public function matches(string $pattern): bool
    {
        return \preg_match($pattern, $this->code) === 1;
    }
}
