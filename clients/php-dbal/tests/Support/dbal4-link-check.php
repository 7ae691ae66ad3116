<?php

// tests/Support/dbal4-link-check.php: run by Unit\Dbal4SignaturesTest in a PHP process of its own. It declares
// hand-written stand-ins for the DBAL 4 interfaces the driver implements, with DBAL 4.0's method signatures (typed
// parameters, void and union return types, the ParameterType enum, ServerVersionProvider), then loads the driver's
// classes against them: PHP refuses to link a class whose methods are incompatible with its interface. It prints
// one line per check and "ok" at the end.
namespace Doctrine\DBAL {
    interface ServerVersionProvider { public function getServerVersion(): string; }
    enum ParameterType { case NULL; case INTEGER; case STRING; case LARGE_OBJECT; case BOOLEAN; case BINARY; case ASCII; }
    interface Driver {
        public function connect(#[\SensitiveParameter] array $params): Driver\Connection;
        public function getDatabasePlatform(ServerVersionProvider $versionProvider): Platforms\AbstractPlatform;
        public function getExceptionConverter(): Driver\API\ExceptionConverter;
    }
    class Query {}
    class Connection {}
}
namespace Doctrine\DBAL\Platforms {
    abstract class AbstractPlatform {}
    class AbstractMySQLPlatform extends AbstractPlatform {}
    class MySQL80Platform extends AbstractMySQLPlatform {}
    class PostgreSQLPlatform extends AbstractPlatform {}
}
namespace Doctrine\DBAL\Driver {
    use Doctrine\DBAL\ParameterType;
    use Doctrine\DBAL\ServerVersionProvider;
    interface Connection extends ServerVersionProvider {
        public function prepare(string $sql): Statement;
        public function query(string $sql): Result;
        public function quote(string $value): string;
        public function exec(string $sql): int|string;
        public function lastInsertId(): int|string;
        public function beginTransaction(): void;
        public function commit(): void;
        public function rollBack(): void;
        public function getNativeConnection();
    }
    interface Statement {
        public function bindValue(int|string $param, mixed $value, ParameterType $type): void;
        public function execute(): Result;
    }
    interface Result {
        public function fetchNumeric(): array|false;
        public function fetchAssociative(): array|false;
        public function fetchOne(): mixed;
        public function fetchAllNumeric(): array;
        public function fetchAllAssociative(): array;
        public function fetchFirstColumn(): array;
        public function rowCount(): int|string;
        public function columnCount(): int;
        public function getColumnName(int $index): string;
        public function free(): void;
    }
    interface Exception extends \Throwable { public function getSQLState(): ?string; }
    abstract class AbstractException extends \Exception implements Exception {
        public function __construct(string $message, private readonly ?string $sqlState = null, int $code = 0, ?\Throwable $previous = null) { parent::__construct($message, $code, $previous); }
        public function getSQLState(): ?string { return $this->sqlState; }
    }
    abstract class AbstractMySQLDriver implements \Doctrine\DBAL\Driver {
        public function getDatabasePlatform(ServerVersionProvider $versionProvider): \Doctrine\DBAL\Platforms\AbstractMySQLPlatform { return new \Doctrine\DBAL\Platforms\MySQL80Platform(); }
        public function getExceptionConverter(): API\ExceptionConverter { throw new \LogicException(); }
    }
    abstract class AbstractPostgreSQLDriver implements \Doctrine\DBAL\Driver {
        public function getDatabasePlatform(ServerVersionProvider $versionProvider): \Doctrine\DBAL\Platforms\PostgreSQLPlatform { return new \Doctrine\DBAL\Platforms\PostgreSQLPlatform(); }
        public function getExceptionConverter(): API\ExceptionConverter { throw new \LogicException(); }
    }
}
namespace Doctrine\DBAL\Driver\API {
    interface ExceptionConverter { public function convert(\Doctrine\DBAL\Driver\Exception $exception, ?\Doctrine\DBAL\Query $query): \Doctrine\DBAL\Exception\DriverException; }
}
namespace Doctrine\DBAL\Exception { class DriverException extends \Exception {} }
namespace {
    require __DIR__ . '/../../autoload.php';
    foreach (['Tether\DBAL\Driver', 'Tether\DBAL\Connection', 'Tether\DBAL\Statement', 'Tether\DBAL\Result', 'Tether\DBAL\ExceptionConverter', 'Tether\DBAL\Exception\RefusedStatement', 'Tether\DBAL\Exception\UnsupportedOption', 'Tether\DBAL\Dialect'] as $class) {
        class_exists($class) || enum_exists($class) || exit("cannot load $class\n");
        echo "linked $class\n";
    }
    Tether\DBAL\Dialect::MySQL->platformDriver();
    Tether\DBAL\Dialect::PostgreSQL->platformDriver();
    $p = (new Tether\DBAL\Driver())->getDatabasePlatform(new class implements Doctrine\DBAL\ServerVersionProvider { public function getServerVersion(): string { return '10.11.6-MariaDB'; } });
    echo get_class($p), "\n";
    $e = new Tether\DBAL\Exception\DriverError('x', '23505', 0);
    echo $e->getSQLState(), "\n";
    echo "ok\n";
}
