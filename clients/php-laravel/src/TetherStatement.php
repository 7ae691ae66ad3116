<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Tether\NumericResult;

/**
 * TetherStatement stands for the PDOStatement of a select in Laravel's StatementPrepared event, so that the
 * Laravel 8 way of choosing how rows come back keeps working:
 *
 *     Event::listen(StatementPrepared::class, fn ($e) => $e->statement->setFetchMode(PDO::FETCH_ASSOC));
 *
 * Fetch modes: PDO::FETCH_OBJ (the default), FETCH_ASSOC, FETCH_NUM, FETCH_BOTH and FETCH_COLUMN (with a column
 * index, 0 by default), each as PDO gives it when column names repeat (see shape()). Any other mode, and any other
 * PDOStatement method, throws a LogicException naming it.
 */
final class TetherStatement
{
    private const MODES = [\PDO::FETCH_OBJ, \PDO::FETCH_ASSOC, \PDO::FETCH_NUM, \PDO::FETCH_BOTH, \PDO::FETCH_COLUMN];

    private int $column = 0;

    public function __construct(public readonly string $queryString, private int $fetchMode)
    {
        $this->setFetchMode($fetchMode);
    }

    /**
     * setFetchMode chooses how the rows of this statement come back.
     *
     * @throws \LogicException a mode the driver does not offer
     */
    public function setFetchMode(int $mode, mixed ...$args): bool
    {
        if (!\in_array($mode, self::MODES, true)) {
            throw new \LogicException(\sprintf('tether driver: fetch mode %d is not supported; use PDO::FETCH_OBJ, FETCH_ASSOC, FETCH_NUM, FETCH_BOTH or FETCH_COLUMN', $mode));
        }
        $this->fetchMode = $mode;
        $this->column = $mode === \PDO::FETCH_COLUMN ? (int) ($args[0] ?? 0) : 0;

        return true;
    }

    /**
     * wantsPositions tells whether the chosen mode reads columns by position (FETCH_NUM, FETCH_BOTH, FETCH_COLUMN):
     * then shape() needs the rows with every column kept (TetherSession::queryNumeric()); the by-name modes
     * (FETCH_OBJ, FETCH_ASSOC) take TetherSession::query()'s associative rows, the cheapest to build.
     */
    public function wantsPositions(): bool
    {
        return $this->fetchMode !== \PDO::FETCH_OBJ && $this->fetchMode !== \PDO::FETCH_ASSOC;
    }

    /**
     * shape turns a result into the rows of the chosen fetch mode, as PDO does: associative rows (column name =>
     * value, from TetherSession::query()) for the by-name modes, a NumericResult for any mode. By position
     * (FETCH_NUM, FETCH_COLUMN, FETCH_BOTH's numeric keys) every column is kept; by name (FETCH_OBJ, FETCH_ASSOC,
     * FETCH_BOTH's named keys) a repeated column name has its last column's value, at the first one's place.
     *
     * @param list<array<string, mixed>>|NumericResult $result
     * @return list<mixed>
     * @throws \LogicException associative rows for a mode that reads by position (see wantsPositions())
     * @throws \ValueError FETCH_COLUMN with an index past the last column (or below 0) and at least one row, as PDO
     */
    public function shape(array|NumericResult $result): array
    {
        if (\is_array($result)) {
            return match ($this->fetchMode) {
                \PDO::FETCH_OBJ => self::objects($result),
                \PDO::FETCH_ASSOC => $result,
                default => throw new \LogicException('tether driver: fetch mode ' . $this->fetchMode . ' needs the rows by position'),
            };
        }
        $columns = $result->columns;
        $rows = $result->rows;
        switch ($this->fetchMode) {
            case \PDO::FETCH_OBJ:
            case \PDO::FETCH_ASSOC:
                foreach ($rows as $i => $row) {
                    $rows[$i] = \array_combine($columns, $row);
                }

                return $this->fetchMode === \PDO::FETCH_OBJ ? self::objects($rows) : $rows;
            case \PDO::FETCH_NUM:
                return $rows;
            case \PDO::FETCH_BOTH:
                foreach ($rows as $i => $row) {
                    $both = [];
                    foreach ($row as $c => $value) {
                        $both[$columns[$c]] = $value;
                        $both[$c] = $value;
                    }
                    $rows[$i] = $both;
                }

                return $rows;
            default:
                if ($rows !== [] && ($this->column < 0 || $this->column >= \count($columns))) {
                    // As PDO, which fails on the first row it cannot read the column of.
                    throw new \ValueError($this->column < 0 ? 'Column index must be greater than or equal to 0' : 'Invalid column index');
                }

                return \array_column($rows, $this->column);
        }
    }

    /**
     * @param list<array<string, mixed>> $rows
     * @return list<object>
     */
    private static function objects(array $rows): array
    {
        foreach ($rows as $i => $row) {
            $rows[$i] = (object) $row;
        }

        return $rows;
    }

    /**
     * @param array<mixed> $arguments
     */
    public function __call(string $method, array $arguments): never
    {
        throw new \LogicException(\sprintf('tether driver: %s() is a PDOStatement method the tether driver does not offer; only setFetchMode() is', $method));
    }
}
