<?php

declare(strict_types=1);

namespace Tether\DBAL;

use Doctrine\DBAL\Driver\Result as ResultInterface;
use Doctrine\DBAL\Driver\Statement as StatementInterface;
use Doctrine\DBAL\ParameterType;
use Tether\DBAL\Exception\DriverError;

/**
 * Statement is a prepared statement: the SQL with its placeholders already rewritten for the dialect (see
 * PlaceholderRewriter) and the values bound to it. Nothing is prepared on tetherd: execute() sends the SQL and
 * the values, which tetherd always binds server-side, through the connection's open transaction if it has one.
 *
 * Parameter types (DBAL 3's ParameterType constants or DBAL 4's ParameterType enum):
 * - NULL: sent as NULL whatever the value;
 * - INTEGER: an int (a numeric string or a bool is cast);
 * - BOOLEAN: a bool (PostgreSQL BOOLEAN; MySQL gets 1 or 0);
 * - BINARY, LARGE_OBJECT: the bytes, from a string or read whole from a stream resource;
 * - STRING, ASCII (and anything else): a string (ints, floats and bools are cast the way PDO does; null stays NULL).
 */
final class Statement implements StatementInterface
{
    /** @var array<int|string, mixed> parameter key => value */
    private array $values = [];
    /** @var array<int|string, mixed> parameter key => ParameterType */
    private array $types = [];
    /** @var array<int|string, mixed> parameter key => reference bound with bindParam() */
    private array $references = [];

    /**
     * @internal made by Connection::prepare()
     * @param list<int|string> $order the parameter key of each placeholder of $sql (1-based positions, names)
     */
    public function __construct(
        private readonly Connection $connection,
        private readonly string $originalSql,
        private readonly string $sql,
        private readonly array $order,
    ) {
    }

    /**
     * bindValue binds $value to the parameter $param: a 1-based position, or a name (with or without its `:`).
     *
     * @param int|string $param
     * @param mixed $type a ParameterType (DBAL 3: int constant; DBAL 4: enum case)
     */
    public function bindValue($param, $value, $type = ParameterType::STRING): void
    {
        $key = self::key($param);
        unset($this->references[$key]);
        $this->values[$key] = $value;
        $this->types[$key] = $type;
    }

    /**
     * bindParam binds the variable $variable by reference: its value is read when execute() runs. DBAL 3 only
     * (DBAL 4 removed it).
     *
     * @param int|string $param
     * @param mixed $type
     */
    public function bindParam($param, &$variable, $type = ParameterType::STRING, $length = null): void
    {
        $key = self::key($param);
        $this->references[$key] = &$variable;
        $this->types[$key] = $type;
    }

    /**
     * execute runs the statement with the values bound, plus $params if given (DBAL 3: a list by position from 0,
     * or name => value; bound as strings, as PDO does).
     *
     * @param array<int|string, mixed>|null $params
     * @throws DriverError a parameter has no value, or the statement failed
     */
    public function execute($params = null): ResultInterface
    {
        if ($params !== null) {
            foreach ($params as $param => $value) {
                $this->bindValue(\is_int($param) ? $param + 1 : $param, $value);
            }
        }
        $args = [];
        foreach ($this->order as $key) {
            if (\array_key_exists($key, $this->references)) {
                $value = $this->references[$key];
            } elseif (\array_key_exists($key, $this->values)) {
                $value = $this->values[$key];
            } else {
                throw new DriverError(\sprintf(
                    'no value bound for parameter %s of %s',
                    \is_int($key) ? '#' . $key : ':' . $key,
                    DriverError::excerpt($this->originalSql),
                ));
            }
            $args[] = self::convert($value, $this->types[$key] ?? ParameterType::STRING, $key);
        }

        return $this->connection->run($this->sql, $args, $this->originalSql);
    }

    private static function key(int|string $param): int|string
    {
        return \is_string($param) ? \ltrim($param, ':') : $param;
    }

    /**
     * convert returns $value as tetherd binds it for the parameter type $type.
     *
     * @throws DriverError a value that cannot be sent (an array, an object without __toString, ...)
     */
    private static function convert(mixed $value, mixed $type, int|string $key): mixed
    {
        if ($type === ParameterType::NULL || $value === null) {
            return null;
        }
        if ($type === ParameterType::LARGE_OBJECT || $type === ParameterType::BINARY) {
            if (\is_resource($value)) {
                $bytes = \stream_get_contents($value);
                if ($bytes === false) {
                    throw new DriverError(\sprintf('parameter %s: could not read the stream bound to it', $key));
                }

                return $bytes;
            }
        } elseif ($type === ParameterType::INTEGER) {
            if (\is_int($value)) {
                return $value;
            }
            if (\is_bool($value) || (\is_string($value) && \preg_match('/^\s*[+-]?\d+\s*$/', $value) === 1)) {
                return (int) $value;
            }
            if (\is_float($value)) {
                return $value;
            }
        } elseif ($type === ParameterType::BOOLEAN) {
            if (\is_scalar($value)) {
                return (bool) $value;
            }
        }
        if (\is_string($value)) {
            return $value;
        }
        if (\is_bool($value)) {
            return $value ? '1' : '0';
        }
        if (\is_int($value) || \is_float($value) || $value instanceof \Stringable) {
            return (string) $value;
        }
        if (\is_resource($value)) {
            $bytes = \stream_get_contents($value);

            return $bytes === false ? throw new DriverError(\sprintf('parameter %s: could not read the stream bound to it', $key)) : $bytes;
        }

        throw new DriverError(\sprintf('parameter %s: cannot send a value of type %s', \is_int($key) ? '#' . $key : ':' . $key, \get_debug_type($value)));
    }
}
