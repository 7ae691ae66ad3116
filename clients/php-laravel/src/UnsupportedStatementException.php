<?php

declare(strict_types=1);

namespace Tether\Laravel;

/**
 * UnsupportedStatementException is a statement the tether driver cannot serve the way PDO would. Refused before
 * anything is sent: transaction control or LOCK TABLES in raw SQL (tetherd pins transactions itself), a binding of
 * a type neither PDO nor tetherd binds, placeholders that do not match the bindings. Refused by the server, with
 * nothing run, and explained here: several statements in one DB::unprepared() (getPrevious() is the server's
 * error). Inside a query Laravel wraps it in a QueryException (the SQL and bindings), as it wraps PDOException.
 * Never retryable: the same statement fails the same way.
 */
final class UnsupportedStatementException extends \LogicException
{
}
