<?php

declare(strict_types=1);

namespace Tether\Laravel;

use Tether\Connection\CommunicationException;
use Tether\Connection\UnknownOutcomeException;
use Tether\Exception\TetherException;
use Tether\Laravel\Sql\SqlText;
use Tether\Server\ServerException;

/**
 * TetherQueryError is a failure of the tether driver in the shape PDO gives its own: a PDOException whose
 * getCode() is a SQLSTATE string, whose errorInfo is [SQLSTATE, driver code, driver message] and whose message
 * reads "SQLSTATE[23000]: Integrity constraint violation: 1062 Duplicate entry ...", so that Laravel's
 * QueryException carries the same code and errorInfo, and its lost-connection, concurrency and unique-violation
 * checks (which read the code and the message) answer as they do with PDO. getPrevious() is the Tether exception.
 *
 * How tetherd's answers map:
 * - backend_error: MySQL's error number becomes errorInfo[1], with its SQLSTATE from a table of the common errors
 *   (HY000 otherwise); PostgreSQL's SQLSTATE is the code and errorInfo[1] is 7, as pdo_pgsql reports.
 * - tx_aborted (the server rolled the transaction back) is 40001, a serialization failure: DB::transaction() with
 *   attempts > 1 runs the closure again, as after a deadlock.
 * - not sent (CommunicationException, and unavailable when retryable): 08S01 "Communication link failure ... Lost
 *   connection": Laravel reconnects and runs the statement again when outside a transaction. An outcome unknown
 *   (UnknownOutcomeException) is HY000 without those words, so that Laravel never runs it twice.
 * - timeout HYT00, busy and the rest HY000, the tetherd code named in the message.
 */
final class TetherQueryError extends \PDOException
{
    private const MYSQL_SQLSTATES = [
        1022 => '23000', 1048 => '23000', 1062 => '23000', 1169 => '23000', 1216 => '23000', 1217 => '23000',
        1451 => '23000', 1452 => '23000', 1557 => '23000', 1586 => '23000', 4025 => '23000',
        1213 => '40001', 1205 => 'HY000',
        1146 => '42S02', 1050 => '42S01', 1054 => '42S22', 1060 => '42S21', 1061 => '42000', 1064 => '42000',
        1091 => '42000', 1044 => '42000', 1142 => '42000', 1143 => '42000', 1149 => '42000', 1045 => '28000',
        1406 => '22001', 1264 => '22003', 1292 => '22007', 1365 => '22012',
        2006 => 'HY000', 2013 => 'HY000',
    ];

    /** The texts PDO puts after SQLSTATE[...] for the codes met here. */
    private const SQLSTATE_TEXTS = [
        '08S01' => 'Communication link failure', '08006' => 'Connection failure', '21000' => 'Cardinality violation',
        '22001' => 'String data, right truncated', '22003' => 'Numeric value out of range',
        '22007' => 'Invalid datetime format', '22012' => 'Division by zero', '22P02' => 'Invalid text representation',
        '23000' => 'Integrity constraint violation', '23502' => 'Not null violation',
        '23503' => 'Foreign key violation', '23505' => 'Unique violation', '23514' => 'Check violation',
        '25P02' => 'In failed sql transaction', '28000' => 'Invalid authorization specification',
        '40001' => 'Serialization failure', '40P01' => 'Deadlock detected', '42000' => 'Syntax error or access violation',
        '42601' => 'Syntax error', '42703' => 'Undefined column', '42883' => 'Undefined function',
        '42P01' => 'Undefined table', '42P07' => 'Duplicate table', '42S01' => 'Base table or view already exists',
        '42S02' => 'Base table or view not found', '42S21' => 'Column already exists', '42S22' => 'Column not found',
        'HYT00' => 'Timeout expired', '0A000' => 'Feature not supported',
    ];

    /**
     * @param array{0: string, 1: int|string|null, 2: string} $errorInfo
     */
    private function __construct(string $message, array $errorInfo, \Throwable $previous)
    {
        parent::__construct($message, 0, $previous);
        $this->code = $errorInfo[0];
        $this->errorInfo = $errorInfo;
    }

    /**
     * from translates a Tether exception raised while running a statement on $platform ('mysql' or 'pgsql').
     */
    public static function from(TetherException $e, string $platform): self
    {
        if ($e instanceof UnknownOutcomeException) {
            return self::make('HY000', null, 'tetherd connection failed after the statement was sent, so it may or may not have run: ' . $e->getMessage(), $e);
        }
        if ($e instanceof CommunicationException) {
            return self::make('08S01', null, 'Lost connection to tetherd, the statement was not sent: ' . $e->getMessage(), $e);
        }
        if (!$e instanceof ServerException) {
            return self::make('HY000', null, 'tether client: ' . $e->getMessage(), $e);
        }

        switch ($e->getErrorCode()) {
            case ServerException::BACKEND_ERROR:
                $backendCode = $e->getBackendCode();
                if ($platform === SqlText::PGSQL) {
                    $state = ($backendCode !== null && \preg_match('/^[0-9A-Z]{5}$/', $backendCode) === 1) ? $backendCode : 'HY000';

                    return self::make($state, 7, 'ERROR:  ' . $e->getMessage(), $e);
                }
                if ($backendCode !== null && \ctype_digit($backendCode)) {
                    return self::make(self::MYSQL_SQLSTATES[(int) $backendCode] ?? 'HY000', (int) $backendCode, $e->getMessage(), $e);
                }

                return self::make('HY000', $backendCode, $e->getMessage(), $e);
            case ServerException::TX_ABORTED:
                return self::make('40001', null, 'tetherd rolled the transaction back (tx_aborted), retry it as a whole: ' . $e->getMessage(), $e);
            case ServerException::UNAVAILABLE:
                if ($e->isRetryable()) {
                    return self::make('08S01', null, 'Lost connection: tetherd has no connection to the server (unavailable): ' . $e->getMessage(), $e);
                }

                return self::make('HY000', null, 'tetherd: backend unavailable, the statement may or may not have run: ' . $e->getMessage(), $e);
            case ServerException::TIMEOUT:
                return self::make('HYT00', null, 'tetherd: the statement timed out: ' . $e->getMessage(), $e);
            default:
                return self::make('HY000', null, \sprintf('tetherd answered %s: %s', $e->getErrorCode(), $e->getMessage()), $e);
        }
    }

    private static function make(string $sqlstate, int|string|null $driverCode, string $driverMessage, \Throwable $previous): self
    {
        $text = self::SQLSTATE_TEXTS[$sqlstate] ?? 'General error';
        $message = \sprintf('SQLSTATE[%s]: %s: %s', $sqlstate, $text, $driverCode !== null ? $driverCode . ' ' . $driverMessage : $driverMessage);

        return new self($message, [$sqlstate, $driverCode, $driverMessage], $previous);
    }
}
