<?php

declare(strict_types=1);

namespace Tether\DBAL\Tests\Integration;

use Doctrine\DBAL\Schema\Schema;
use Doctrine\DBAL\Types\Types;
use Tether\DBAL\Tests\Support\IntegrationTestCase;

/**
 * SchemaTest: DBAL's schema manager introspects through the driver (tables, columns, indexes, foreign keys) and
 * migrates (create, alter, drop) with Schema + Comparator, and sees what a direct connection sees.
 */
final class SchemaTest extends IntegrationTestCase
{
    /** @dataProvider backends */
    public function testIntrospectionAndMigrations(string $kind): void
    {
        $conn = $this->connect($kind);
        $sm = $conn->createSchemaManager();
        foreach (['sch_orders', 'sch_users'] as $table) {
            if ($sm->tablesExist([$table])) {
                $sm->dropTable($table);
            }
        }

        // Create both tables from a Schema, as a migration does.
        $from = $sm->introspectSchema();
        $to = clone $from;
        $users = $to->createTable('sch_users');
        $users->addColumn('id', Types::INTEGER, ['autoincrement' => true]);
        $users->addColumn('email', Types::STRING, ['length' => 190]);
        $users->addColumn('nick', Types::STRING, ['length' => 50, 'notnull' => false]);
        $users->setPrimaryKey(['id']);
        $users->addUniqueIndex(['email'], 'uniq_sch_users_email');
        $orders = $to->createTable('sch_orders');
        $orders->addColumn('id', Types::INTEGER, ['autoincrement' => true]);
        $orders->addColumn('user_id', Types::INTEGER);
        $orders->addColumn('total', Types::DECIMAL, ['precision' => 10, 'scale' => 2]);
        $orders->setPrimaryKey(['id']);
        $orders->addIndex(['user_id'], 'idx_sch_orders_user');
        $orders->addForeignKeyConstraint('sch_users', ['user_id'], ['id'], ['onDelete' => 'CASCADE'], 'fk_sch_orders_user');
        $this->migrate($conn, $from, $to);

        $names = $sm->listTableNames();
        self::assertContains('sch_users', $names);
        self::assertContains('sch_orders', $names);
        self::assertEqualsCanonicalizing($names, $this->directDbal($kind)->createSchemaManager()->listTableNames());

        $columns = $sm->listTableColumns('sch_users');
        self::assertSame(['id', 'email', 'nick'], array_values(array_map(static fn ($c) => $c->getName(), $columns)));
        self::assertTrue($columns['id']->getAutoincrement());
        self::assertSame(190, $columns['email']->getLength());
        self::assertFalse($columns['nick']->getNotnull());

        $table = $sm->introspectTable('sch_orders');
        self::assertSame(['id'], $table->getPrimaryKey()?->getColumns());
        self::assertTrue($table->hasIndex('idx_sch_orders_user'));
        self::assertSame(['user_id'], $table->getIndex('idx_sch_orders_user')->getColumns());
        self::assertSame(2, $table->getColumn('total')->getScale());
        $fks = $table->getForeignKeys();
        self::assertCount(1, $fks);
        $fk = array_values($fks)[0];
        self::assertSame('fk_sch_orders_user', strtolower($fk->getName()));
        self::assertSame('sch_users', $fk->getForeignTableName());
        self::assertSame(['user_id'], $fk->getLocalColumns());
        self::assertSame('CASCADE', $fk->onDelete());
        $indexes = $sm->listTableIndexes('sch_users');
        self::assertTrue($indexes['uniq_sch_users_email']->isUnique());

        // Alter: add a column, drop one, add an index; the diff applies and introspection sees it.
        $from = $sm->introspectSchema();
        $to = clone $from;
        $to->getTable('sch_users')->addColumn('created_at', Types::DATETIME_IMMUTABLE, ['notnull' => false]);
        $to->getTable('sch_users')->dropColumn('nick');
        $to->getTable('sch_users')->addIndex(['created_at'], 'idx_sch_users_created');
        $this->migrate($conn, $from, $to);
        $users = $sm->introspectTable('sch_users');
        self::assertTrue($users->hasColumn('created_at'));
        self::assertFalse($users->hasColumn('nick'));
        self::assertTrue($users->hasIndex('idx_sch_users_created'));
        $comparator = $sm->createComparator();
        self::assertTrue($comparator->compareSchemas($sm->introspectSchema(), $to)->isEmpty(), 'the database now matches the target schema');

        // Drop both.
        $from = $sm->introspectSchema();
        $to = clone $from;
        $to->dropTable('sch_orders');
        $to->dropTable('sch_users');
        $this->migrate($conn, $from, $to);
        self::assertNotContains('sch_users', $sm->listTableNames());
        self::assertNotContains('sch_orders', $this->directDbal($kind)->createSchemaManager()->listTableNames());
    }

    private function migrate(\Doctrine\DBAL\Connection $conn, Schema $from, Schema $to): void
    {
        $diff = $conn->createSchemaManager()->createComparator()->compareSchemas($from, $to);
        $sql = $conn->getDatabasePlatform()->getAlterSchemaSQL($diff);
        self::assertNotEmpty($sql);
        foreach ($sql as $statement) {
            $conn->executeStatement($statement);
        }
    }
}
