<?php

declare(strict_types=1);

namespace Tether\Laravel;

/**
 * TetherStatement stands for the PDOStatement of a select in Laravel's StatementPrepared event, so that the
 * Laravel 8 way of choosing how rows come back keeps working:
 *
 *     Event::listen(StatementPrepared::class, fn ($e) => $e->statement->setFetchMode(PDO::FETCH_ASSOC));
 *
 * Fetch modes: PDO::FETCH_OBJ (the default), FETCH_ASSOC, FETCH_NUM, FETCH_BOTH and FETCH_COLUMN (with a column
 * index, 0 by default). Any other mode, and any other PDOStatement method, throws a LogicException naming it.
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
     * shape turns rows (column => value) into the rows of the chosen fetch mode.
     *
     * @param list<array<string, mixed>> $rows
     * @return list<mixed>
     */
    public function shape(array $rows): array
    {
        switch ($this->fetchMode) {
            case \PDO::FETCH_OBJ:
                foreach ($rows as $i => $row) {
                    $rows[$i] = (object) $row;
                }

                return $rows;
            case \PDO::FETCH_ASSOC:
                return $rows;
            case \PDO::FETCH_NUM:
                return \array_map('array_values', $rows);
            case \PDO::FETCH_BOTH:
                return \array_map(static fn (array $row): array => \array_merge($row, \array_values($row)), $rows);
            default:
                $column = $this->column;

                return \array_map(static fn (array $row): mixed => \array_values($row)[$column] ?? null, $rows);
        }
    }

    /**
     * @param array<mixed> $arguments
     */
    public function __call(string $method, array $arguments): never
    {
        throw new \LogicException(\sprintf('tether driver: %s() is a PDOStatement method the tether driver does not offer; only setFetchMode() is', $method));
    }
}
