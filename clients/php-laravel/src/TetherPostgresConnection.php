<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Illuminate\Database\PostgresConnection;
use Tether\Laravel\Concerns\RunsThroughTether;
use Tether\Laravel\Sql\SqlText;

/**
 * TetherPostgresConnection is a Laravel PostgresConnection (its grammars, processor and schema builder) whose
 * statements run through tetherd (see RunsThroughTether). Laravel's `?` placeholders become `$1, $2, ...` (see
 * SqlText); insertGetId works as with PDO, through Laravel's own `insert ... returning "id"` read as rows.
 */
class TetherPostgresConnection extends PostgresConnection
{
    use RunsThroughTether;

    protected function tetherPlatform(): string
    {
        return SqlText::PGSQL;
    }
}
