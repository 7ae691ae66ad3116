<?php

declare(strict_types=1);

namespace Tether\DBAL\Exception;

use Tether\Server\ServerException;

/**
 * RefusedStatement reports a statement this driver cannot run through a pool of shared connections, named in
 * the message: SQL that opens, ends or locks a transaction by its text (BEGIN, START TRANSACTION, COMMIT, ROLLBACK,
 * SET autocommit = 0, LOCK TABLES, XA ...). tetherd refuses those that leave a transaction open, autocommit off or
 * tables locked outside a transaction (bad_request; it rolled back or reset what they did); this driver refuses
 * them inside one, where they would end tetherd's transaction behind its back. Use Connection::beginTransaction(), commit() and rollBack() instead (and savepoints for nesting).
 */
final class RefusedStatement extends DriverError
{
    /** byTetherd wraps tetherd's bad_request answer to $sql. */
    public static function byTetherd(string $sql, ServerException $e): self
    {
        return new self(\sprintf(
            'tetherd refused the statement %s: %s (transactions go through Connection::beginTransaction(), commit() and rollBack())',
            self::excerpt($sql),
            $e->getMessage(),
        ), null, 0, $e);
    }

    /** insideTransaction refuses $sql, which controls the transaction by its text, inside an open transaction. */
    public static function insideTransaction(string $sql, string $keyword): self
    {
        return new self(\sprintf(
            'the statement %s (%s) would end or lock the transaction tetherd holds for this connection: use Connection::commit(), rollBack() and savepoints instead',
            self::excerpt($sql),
            $keyword,
        ));
    }
}
