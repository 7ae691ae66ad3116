<?php

declare(strict_types=1);

namespace Tether\Laravel\Tests\Integration;

use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use Tether\Laravel\Tests\Support\Databases;

/**
 * TestCase is the base of the integration tests: each test runs once per platform (data provider platforms())
 * on a fresh Capsule whose default connection uses the `tether` driver.
 */
abstract class TestCase extends \PHPUnit\Framework\TestCase
{
    protected ?Capsule $capsule = null;

    /** @return array<string, array{string}> */
    public function platforms(): array
    {
        return ['mariadb' => [Databases::MYSQL], 'postgresql' => [Databases::PGSQL]];
    }

    /**
     * connect makes the test's Capsule for $platform and returns its default connection.
     *
     * @param array<string, mixed> $overrides
     */
    protected function connect(string $platform, array $overrides = []): Connection
    {
        $this->capsule = Databases::capsule($platform, $overrides);

        return $this->capsule->getConnection();
    }

    protected function tearDown(): void
    {
        if ($this->capsule !== null) {
            foreach ($this->capsule->getDatabaseManager()->getConnections() as $connection) {
                if ($connection->transactionLevel() > 0) {
                    $connection->rollBack(0);
                }
                $connection->disconnect();
            }
            $this->capsule = null;
        }
        parent::tearDown();
    }
}
