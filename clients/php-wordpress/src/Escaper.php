<?php

declare(strict_types=1);

namespace Tether\WordPress;

/**
 * Escaper escapes a string for a quoted MySQL literal exactly as mysqli_real_escape_string() does on a connection
 * whose character set is utf8mb4, utf8 or latin1, without needing a mysqli link: NUL, \n, \r, \, ', " and Ctrl-Z
 * are backslash-escaped and every other byte is copied, valid UTF-8 or not. (For UTF-8 this byte-wise rule is also
 * the multi-byte one: no byte of a multi-byte UTF-8 sequence is below 0x80, and mysqlnd escapes no stray lead
 * byte in these character sets.) Character sets where a multi-byte character can contain a backslash or a quote
 * (GBK, Big5, SJIS, ...) are not served: Wpdb refuses them. tests/Integration/WpdbTest compares it with the real
 * mysqli_real_escape_string on random byte strings.
 */
final class Escaper
{
    private const TABLE = ["\0" => '\\0', "\n" => '\\n', "\r" => '\\r', '\\' => '\\\\', "'" => "\\'", '"' => '\\"', "\x1a" => '\\Z'];

    /** escape returns $value escaped for use between quotes of a MySQL string literal. */
    public static function escape(string $value): string
    {
        return \strtr($value, self::TABLE);
    }
}
