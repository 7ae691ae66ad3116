<?php

declare(strict_types=1);

namespace Tether\Bigtable;

/**
 * Mutation is one change to a Bigtable row, for Client::mutateRow() and Client::checkAndMutate(). The mutations
 * of one call are applied to their row atomically, in order. Mutations are immutable and can be reused.
 *
 * Values, qualifiers and row keys are bytes: any PHP string. Timestamps are microseconds since the Unix epoch;
 * Bigtable keeps them at millisecond granularity, so give multiples of 1000.
 */
final class Mutation
{
    /**
     * @param array<string, mixed> $map the mutation as it goes on the wire: {op, family?, qualifier?, value?, ts?}
     */
    private function __construct(public readonly array $map)
    {
    }

    /**
     * set writes $value into the cell family:qualifier, as a new version stamped $timestampMicros (null: the
     * server's time).
     */
    public static function set(string $family, string $qualifier, string $value, ?int $timestampMicros = null): self
    {
        $map = ['op' => 'set', 'family' => $family, 'qualifier' => $qualifier, 'value' => $value];
        if ($timestampMicros !== null && $timestampMicros !== 0) {
            $map['ts'] = $timestampMicros;
        }

        return new self($map);
    }

    /** deleteCells deletes every version of the column family:qualifier. */
    public static function deleteCells(string $family, string $qualifier): self
    {
        return new self(['op' => 'delete_cells', 'family' => $family, 'qualifier' => $qualifier]);
    }

    /** deleteFamily deletes every column of the column family $family in the row. */
    public static function deleteFamily(string $family): self
    {
        return new self(['op' => 'delete_family', 'family' => $family]);
    }

    /** deleteRow deletes the whole row. */
    public static function deleteRow(): self
    {
        return new self(['op' => 'delete_row']);
    }
}
