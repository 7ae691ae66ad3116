<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Unit;

use PHPUnit\Framework\TestCase;
use Tether\Laravel\TetherStatement;
use Tether\NumericResult;

/** TetherStatementTest: the rows of each fetch mode, as PDO gives them when column names repeat (no server needed). */
final class TetherStatementTest extends TestCase
{
    private static function result(): NumericResult
    {
        return new NumericResult(['x', 'x', 'y'], [[1, 2, 3], [4, 5, 6]]);
    }

    /** FETCH_BOTH: the name at its first column's place with the last value, each position after it; PDO's order. */
    public function testFetchBothKeyOrderIsPdos(): void
    {
        $rows = (new TetherStatement('SELECT 1 AS x, 2 AS x, 3 AS y', \PDO::FETCH_BOTH))->shape(self::result());

        self::assertSame([['x' => 2, 0 => 1, 1 => 2, 'y' => 3, 2 => 3], ['x' => 5, 0 => 4, 1 => 5, 'y' => 6, 2 => 6]], $rows);
        self::assertSame(['x', 0, 1, 'y', 2], \array_keys($rows[0]));
    }

    public function testFetchNumKeepsEveryColumnAndByNameTakesTheLast(): void
    {
        $statement = new TetherStatement('SELECT', \PDO::FETCH_NUM);
        self::assertSame([[1, 2, 3], [4, 5, 6]], $statement->shape(self::result()));
        $statement->setFetchMode(\PDO::FETCH_ASSOC);
        self::assertSame([['x' => 2, 'y' => 3], ['x' => 5, 'y' => 6]], $statement->shape(self::result()));
        $statement->setFetchMode(\PDO::FETCH_OBJ);
        self::assertEquals([(object) ['x' => 2, 'y' => 3], (object) ['x' => 5, 'y' => 6]], $statement->shape(self::result()));
    }

    public function testFetchColumnTakesItsPosition(): void
    {
        $statement = new TetherStatement('SELECT', \PDO::FETCH_COLUMN);
        self::assertSame([1, 4], $statement->shape(self::result()));
        $statement->setFetchMode(\PDO::FETCH_COLUMN, 1);
        self::assertSame([2, 5], $statement->shape(self::result()), 'the second x, not the first');
    }

    /** As PDO: an index past the last column is an error once there is a row; without rows there is nothing to read. */
    public function testFetchColumnOutOfRangeIsPdosValueError(): void
    {
        $statement = new TetherStatement('SELECT', \PDO::FETCH_COLUMN);
        $statement->setFetchMode(\PDO::FETCH_COLUMN, 3);
        self::assertSame([], $statement->shape(new NumericResult(['x', 'x', 'y'], [])));
        $this->expectException(\ValueError::class);
        $this->expectExceptionMessage('Invalid column index');
        $statement->shape(self::result());
    }

    /** Associative rows cannot give a mode that reads by position: a LogicException, not rows with columns lost. */
    public function testAssociativeRowsForAPositionalModeAreALogicError(): void
    {
        $statement = new TetherStatement('SELECT', \PDO::FETCH_NUM);
        self::assertTrue($statement->wantsPositions());
        self::assertSame([['x' => 2]], (new TetherStatement('SELECT', \PDO::FETCH_ASSOC))->shape([['x' => 2]]));
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage('needs the rows by position');
        $statement->shape([['x' => 2, 'y' => 3]]);
    }

    public function testUnsupportedModeIsRefused(): void
    {
        $this->expectException(\LogicException::class);
        new TetherStatement('SELECT', \PDO::FETCH_LAZY);
    }
}
