<?php

declare(strict_types=1);

namespace Tether\DBAL\Exception;

/**
 * UnsupportedOption reports a connection parameter or driver option this driver does not know or cannot honour,
 * named in the message with the value given. Nothing was sent to tetherd.
 */
final class UnsupportedOption extends DriverError
{
    /** unknown reports the parameter $name, which this driver does not know; $known lists the ones it does. */
    public static function unknown(string $where, string|int $name, mixed $value, array $known): self
    {
        return new self(\sprintf(
            'unsupported %s %s (value %s): the Tether driver knows %s',
            $where,
            \var_export($name, true),
            self::describe($value),
            \implode(', ', $known),
        ));
    }

    /** invalid reports the parameter $name whose value is not what it needs. */
    public static function invalid(string|int $name, mixed $value, string $want): self
    {
        return new self(\sprintf('connection parameter %s: want %s, got %s', \var_export($name, true), $want, self::describe($value)));
    }

    private static function describe(mixed $value): string
    {
        return \is_scalar($value) || $value === null ? \var_export($value, true) : \get_debug_type($value);
    }
}
