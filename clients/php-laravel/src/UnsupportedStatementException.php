<?php

declare(strict_types=1);

namespace Tether\Laravel;

/**
 * UnsupportedStatementException is thrown, before anything is sent, for a statement the tether driver cannot serve
 * the way PDO would: transaction control or LOCK TABLES in raw SQL (tetherd pins transactions itself), several
 * statements in one DB::unprepared(), a binding of a type PDO would not bind either, or placeholders that do not
 * match the bindings. Inside a query, Laravel wraps it in a QueryException (the SQL and bindings), as it wraps
 * PDOException. Never retryable: the same statement fails the same way.
 */
final class UnsupportedStatementException extends \LogicException
{
}
